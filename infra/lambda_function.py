"""The one place that holds the Lambda defaults: runtime, architecture, logging, tracing.

Each function gets its own role and its own log group: the role starts with no
permission at all (no AWS managed policy) and receives only ``grant_*`` results,
among them write access to exactly its own log group.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from functions.core import env_names, metric_names
from infra.bundle import FUNCTIONS, AssetRecipe
from infra.config import StackConfig
from infra.environments import application_log_level
from infra.function_memory import DEFAULT_MEMORY_MB
from infra.lambda_code import function_code
from infra.nag import acknowledge, acknowledge_tracing
from infra.workflow_code import WorkflowCode

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64

_APPLICATION_LOG_LEVELS = {
    "DEBUG": lambda_.ApplicationLogLevel.DEBUG,
    "INFO": lambda_.ApplicationLogLevel.INFO,
}


def retention(days: int) -> logs.RetentionDays:
    """The ``RetentionDays`` member for a number of days (validated by ``StackConfig``)."""
    for member in logs.RetentionDays:
        if _days(member) == days:
            return member
    raise ValueError(f"CloudWatch Logs has no retention of {days} days")


def _days(member: logs.RetentionDays) -> int | None:
    # jsii enum members carry the CloudFormation value only after resolution; map by name.
    table = {
        "ONE_DAY": 1,
        "THREE_DAYS": 3,
        "FIVE_DAYS": 5,
        "ONE_WEEK": 7,
        "TWO_WEEKS": 14,
        "ONE_MONTH": 30,
        "TWO_MONTHS": 60,
        "THREE_MONTHS": 90,
        "FOUR_MONTHS": 120,
        "FIVE_MONTHS": 150,
        "SIX_MONTHS": 180,
        "ONE_YEAR": 365,
        "THIRTEEN_MONTHS": 400,
        "EIGHTEEN_MONTHS": 545,
        "TWO_YEARS": 731,
    }
    return table.get(member.name)


def python_function(
    scope: Construct,
    construct_id: str,
    *,
    function: str,
    config: StackConfig,
    description: str,
    environment: Mapping[str, str],
    timeout: Duration,
    memory_size: int = DEFAULT_MEMORY_MB,
    workflow: WorkflowCode | None = None,
) -> lambda_.Function:
    """A Lambda function running ``functions.<function>.handler.lambda_handler``.

    Args:
        scope: Parent construct.
        construct_id: Construct id.
        function: Directory name under ``functions/``.
        config: Stack settings (log level and retention). The log level is the
            functions' own (``POWERTOOLS_LOG_LEVEL``); Lambda's application log level
            stays at INFO or below so that its filter never drops a metric
            (``infra.environments.application_log_level``).
        description: Shown in the console.
        environment: The function's own settings; the Powertools keys are added here.
        timeout: Hard time limit of one invocation.
        memory_size: MiB (CPU scales with it).
        workflow: The workflow whose code and requirements the asset also holds.
    """
    log_group = logs.LogGroup(
        scope,
        f"{construct_id}Logs",
        retention=retention(config.log_retention_days),
        # Logs outlive a teardown for post-mortems; their retention still applies.
        removal_policy=RemovalPolicy.RETAIN,
    )
    role = iam.Role(
        scope,
        f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"{metric_names.SERVICE} {function}: only what the stack grants",
    )
    log_group.grant_write(role)
    handler = lambda_.Function(
        scope,
        construct_id,
        description=description,
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        handler=f"functions.{function}.handler.lambda_handler",
        code=function_code(AssetRecipe(FUNCTIONS[function], workflow)),
        role=role,
        timeout=timeout,
        memory_size=memory_size,
        # Off unless asked for (``-c tracing=true``): at 1 M deliveries a month, Lambda's
        # default sampling would be the largest line of the bill (docs/cost.md).
        tracing=lambda_.Tracing.ACTIVE if config.tracing else lambda_.Tracing.DISABLED,
        log_group=log_group,
        logging_format=lambda_.LoggingFormat.JSON,
        application_log_level_v2=_APPLICATION_LOG_LEVELS[application_log_level(config.log_level)],
        system_log_level_v2=lambda_.SystemLogLevel.WARN,
        environment={
            env_names.ENV_POWERTOOLS_SERVICE_NAME: metric_names.SERVICE,
            env_names.ENV_POWERTOOLS_METRICS_NAMESPACE: metric_names.METRICS_NAMESPACE,
            env_names.ENV_POWERTOOLS_LOG_LEVEL: config.log_level,
            env_names.ENV_POWERTOOLS_TRACE_DISABLED: "false" if config.tracing else "true",
            **environment,
        },
    )
    acknowledge(
        handler,
        "AwsSolutions-L1",
        f"{RUNTIME.name} is the newest Python that make test runs the functions' tests on "
        "(.venv-lambda); the runtime moves when the build image gains a newer one",
    )
    if config.tracing:
        acknowledge_tracing(handler)
    return handler
