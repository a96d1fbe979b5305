"""The worker: consumes the work queue, fetches packages over MCP, runs the workflow.

Its sizing is context (``worker_timeout_seconds``, ``worker_memory_mb``,
``worker_batch_size``); the lease, the work queue's visibility timeout and the
reconciler's effect age follow from the timeout (:class:`WorkerTiming`). Its workflow's
own needs are context too (``worker_secret_arns``, ``worker_managed_policy_arns``,
``worker_bedrock_model_arns``, the agent's ``guardrail_id``), and a CDK app can add more with
:meth:`Worker.grant_workflow` (docs/workflows.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Annotations, ArnFormat, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from functions.core import event_source_limits, settings_table, steps
from functions.worker.settings import DEADLINE_MARGIN_SECONDS
from infra.alerts import Alerts
from infra.config import (
    WORKER_MANAGED_POLICY_ACK,
    WORKER_MANAGED_POLICY_ARNS,
    StackConfig,
    is_privileged_policy,
    policy_name,
)
from infra.environments import worker_environment
from infra.lambda_function import python_function
from infra.nag import acknowledge, logical_id, role_of
from infra.secrets import ReadableSecret
from infra.table_access import ItemAction, deny_approval_decisions, grant_item_actions
from infra.workflow_check import check_workflow_loads

VISIBILITY_TIMEOUT_FACTOR = event_source_limits.VISIBILITY_TIMEOUT_FACTOR
LEASE_FACTOR = settings_table.LEASE_FACTOR
# SQS's longest visibility timeout.
MAX_VISIBILITY_TIMEOUT_SECONDS = 12 * 3600


@dataclass(frozen=True, slots=True)
class WorkerTiming:
    """The worker's time limits, all derived from its Lambda timeout.

    Attributes:
        timeout_seconds: The worker's Lambda timeout.
        lease_seconds: How long a claim holds (``WORKER_LEASE_SECONDS``).
        visibility_timeout_seconds: The work queue's visibility timeout.
        effect_age_seconds: Age after which the reconciler treats an effect intent as
            in doubt: beyond any lease, so never one a live worker still holds.
    """

    timeout_seconds: int
    lease_seconds: int
    visibility_timeout_seconds: int
    effect_age_seconds: int

    @classmethod
    def for_timeout(
        cls,
        timeout_seconds: int,
        *,
        message_seconds: float = 0.0,
        batching_window_seconds: int,
    ) -> WorkerTiming:
        """The timing for a worker timeout, checked.

        Args:
            timeout_seconds: The worker's Lambda timeout.
            message_seconds: The time a worker needs left to start a message.
            batching_window_seconds: The event-source mapping's batching window, which
                the visibility timeout covers too.

        Raises:
            ValueError: the derived values break an invariant (see ``check_timing``).
        """
        lease = settings_table.lease_seconds(timeout_seconds)
        timing = cls(
            timeout_seconds=timeout_seconds,
            lease_seconds=lease,
            visibility_timeout_seconds=timeout_seconds * VISIBILITY_TIMEOUT_FACTOR
            + batching_window_seconds,
            effect_age_seconds=settings_table.effect_age_seconds(lease),
        )
        check_timing(
            timeout_s=timing.timeout_seconds,
            lease_s=timing.lease_seconds,
            visibility_s=timing.visibility_timeout_seconds,
            effect_age_s=timing.effect_age_seconds,
            message_s=message_seconds,
        )
        return timing

    @property
    def visibility_timeout(self) -> Duration:
        return Duration.seconds(self.visibility_timeout_seconds)


def check_timing(
    *,
    timeout_s: float,
    lease_s: float,
    visibility_s: float,
    effect_age_s: float,
    message_s: float = 0.0,
) -> None:
    """Refuse to synthesize timings under which claims and redeliveries fight, or under
    which a worker could never start a message.

    Args:
        message_s: the time a worker needs left to start a message (the MCP fetch's
            bound plus the workflow's allowance).

    Raises:
        ValueError: when timeout < lease < visibility timeout <= SQS's maximum, or
            lease < effect age, does not hold, or a message's time and the deadline's
            margin do not fit the timeout.
    """
    if not timeout_s < lease_s < visibility_s <= MAX_VISIBILITY_TIMEOUT_SECONDS:
        raise ValueError(
            f"need worker timeout ({timeout_s}s) < lease ({lease_s}s) "
            f"< visibility timeout ({visibility_s}s) <= {MAX_VISIBILITY_TIMEOUT_SECONDS}s"
        )
    if not lease_s < effect_age_s:
        raise ValueError(f"need lease ({lease_s}s) < the reconciler's effect age ({effect_age_s}s)")
    if message_s + DEADLINE_MARGIN_SECONDS > timeout_s:
        raise ValueError(
            f"a message needs {message_s:g}s (MCP fetch bound + worker_workflow_seconds)"
            f" plus a {DEADLINE_MARGIN_SECONDS:g}s margin: more than the worker's"
            f" {timeout_s:g}s timeout"
        )


class Worker(Construct):
    """Worker Lambda on the work queue (partial batch responses, bounded concurrency).

    Attributes:
        function: The worker Lambda; ``grant_*`` methods of your own resources take it.
        role: Its role (only what the stack grants, plus ``worker_managed_policy_arns``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        timing: WorkerTiming,
        table: dynamodb.ITable,
        work_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        mcp_token: ReadableSecret,
        archive: s3.IBucket,
        alerts: Alerts,
    ) -> None:
        super().__init__(scope, construct_id)
        workflow = config.workflow_code
        environment = worker_environment(
            table_name=table.table_name,
            work_queue_url=work_queue.queue_url,
            dead_letter_queue_url=dead_letter_queue.queue_url,
            mcp_token_secret_arn=mcp_token.secret_arn,
            mcp_allowed_hosts=config.mcp_allowed_hosts,
            workflow=config.workflow,
            archive_bucket=archive.bucket_name,
            max_attempts=config.worker_max_attempts,
            retry_horizon_seconds=config.worker_retry_horizon_seconds,
            lease_seconds=timing.lease_seconds,
            notify_url=config.notify_url,
            batch_concurrency=config.batch_concurrency,
            workflow_seconds=config.worker_workflow_seconds,
            workflow_settings=config.workflow_settings,
            alert_topic_arn=alerts.topic.topic_arn,
            received_log_shards=config.received_log_shards,
        )
        if config.notify_url is None and config.notify_secret is None and config.runs_notify:
            Annotations.of(self).add_warning_v2(
                "relaylink:notify-url",
                "context notify_url is not set: the notify workflow refuses to start "
                "without it (or notify_secret_arn), so every package would fail. "
                "Set -c notify_url=https://...",
            )
        self.function: lambda_.Function = python_function(
            self,
            "Function",
            function="worker",
            config=config,
            description="Claims work items, fetches packages over MCP, runs the workflow",
            timeout=Duration.seconds(timing.timeout_seconds),
            memory_size=config.worker_memory_mb,
            environment=environment,
            workflow=workflow,
        )
        # What the worker's cold start would refuse, refused by the synth (once the
        # code is found where it ships: that refusal names the folder).
        check_workflow_loads(config)
        role = self.function.role
        if role is None:
            raise ValueError("the worker function has no role")
        self.role: iam.IRole = role
        # Claim, complete, release and fail update the inbox item; the effect ledger
        # reads, puts (the intent) and updates (done) its own records; the package is
        # recorded by a conditional update of the claimed inbox item.
        grant_item_actions(
            self.function,
            table,
            ItemAction.GET_ITEM,
            ItemAction.PUT_ITEM,
            ItemAction.UPDATE_ITEM,
        )
        # It asks for approvals; it may never decide one (docs/security.md).
        deny_approval_decisions(self.function, table)
        # Re-sending a deferred work item, and moving an unreadable or exhausted message
        # to the dead-letter queue with its state recorded, are the worker's own sends.
        work_queue.grant_send_messages(self.function)
        dead_letter_queue.grant_send_messages(self.function)
        mcp_token.grant_read(self.function)
        archive.grant_put(self.function)
        # A step result too large for its record is read back from the archive bucket,
        # and only from under its own prefix.
        step_results = archive.arn_for_objects(f"{steps.RESULT_OBJECT_PREFIX}*")
        self.grant_workflow(iam.PolicyStatement(actions=["s3:GetObject"], resources=[step_results]))
        alerts.grant_publish(self.function)
        self._grant_deployer_access(config)
        self.function.add_event_source(
            sources.SqsEventSource(
                work_queue,
                batch_size=config.worker_batch_size,
                max_batching_window=Duration.seconds(config.worker_batching_window_seconds),
                report_batch_item_failures=True,
                max_concurrency=config.worker_max_concurrency,
            )
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Action::s3:Abort*]",
            "Generated by grant_put: lets an interrupted upload of an archive object be "
            "aborted; scoped to the archive bucket's objects.",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{logical_id(archive)}.Arn>/*]",
            "Generated by grant_put: archive object keys are per delivery, so the grant "
            "covers the objects of this one bucket and nothing else.",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{logical_id(archive)}.Arn>/"
            f"{steps.RESULT_OBJECT_PREFIX}*]",
            "Step results are stored by content digest, so their keys are not known at "
            "deploy time; the read covers that one prefix of this one bucket.",
        )

    def grant_workflow(self, statement: iam.PolicyStatement) -> None:
        """Allow the workflow one more action (a hook for your own CDK app).

        Example: ``stack.worker.grant_workflow(iam.PolicyStatement(actions=[...],
        resources=[...]))`` between ``build_app()`` and ``app.synth()``.
        """
        self.function.add_to_role_policy(statement)

    def _grant_deployer_access(self, config: StackConfig) -> None:
        """What the context names for the workflow: secrets, models, managed policies."""
        # The tools' secrets, named by ARN in tool_settings, beside the deployer's own.
        workflow = config.shipped_workflow_settings
        tool_secrets = workflow.secret_arns if workflow is not None else ()
        secret_arns = list(dict.fromkeys([*config.worker_secret_arns, *tool_secrets]))
        if secret_arns:
            self.grant_workflow(
                iam.PolicyStatement(
                    actions=["secretsmanager:GetSecretValue"],
                    resources=secret_arns,
                )
            )
        # The alert endpoint's secrets: exactly these two (each with its key, if any).
        for index, (arn, key_arn) in enumerate(config.alert_secrets):
            secret = secretsmanager.Secret.from_secret_complete_arn(
                self, f"AlertSecret{index}", arn
            )
            ReadableSecret(secret, key_arn=key_arn).grant_read(self.function)
        # The notify endpoint's secret: exactly this one (with its key, if any).
        if config.notify_secret is not None:
            arn, key_arn = config.notify_secret
            secret = secretsmanager.Secret.from_secret_complete_arn(self, "NotifySecret", arn)
            ReadableSecret(secret, key_arn=key_arn).grant_read(self.function)
        models = list(config.worker_bedrock_model_arns)
        for model_id in reversed(workflow.bedrock_model_ids if workflow else ()):
            models.insert(0, foundation_model_arn(self, model_id))
        if models:
            self.grant_workflow(
                iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=models)
            )
        guardrails = [
            guardrail_arn(self, guardrail_id)
            for guardrail_id in (workflow.bedrock_guardrail_ids if workflow else ())
        ]
        if guardrails:
            # The screening guardrail alone (any of its versions: IAM names none).
            self.grant_workflow(
                iam.PolicyStatement(actions=["bedrock:ApplyGuardrail"], resources=guardrails)
            )
        for index, arn in enumerate(config.worker_managed_policy_arns):
            self.role.add_managed_policy(
                iam.ManagedPolicy.from_managed_policy_arn(self, f"ManagedPolicy{index}", arn)
            )
            if ":iam::aws:policy/" not in arn:
                continue
            reason = (
                f"Named by the deployer in {WORKER_MANAGED_POLICY_ARNS} for the "
                "workflow's own needs; the stack's own grants stay least privilege."
            )
            if is_privileged_policy(arn):
                name = policy_name(arn)
                reason = (
                    f"{name} grants administrator or full-access power; the deployer "
                    f"acknowledged it by name ({WORKER_MANAGED_POLICY_ACK}={name}) for the "
                    "workflow's own needs; the stack's own grants stay least privilege."
                )
            acknowledge(role_of(self.function), f"AwsSolutions-IAM4[Policy::{arn}]", reason)


def foundation_model_arn(scope: Construct, model_id: str) -> str:
    """``arn:<partition>:bedrock:<the stack's region>::foundation-model/<model_id>``."""
    return Stack.of(scope).format_arn(
        service="bedrock",
        account="",
        resource="foundation-model",
        resource_name=model_id,
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )


def guardrail_arn(scope: Construct, guardrail_id: str) -> str:
    """The guardrail's ARN as given, or ``arn:<partition>:bedrock:<the stack's region>:
    <its account>:guardrail/<id>`` for a bare id."""
    if guardrail_id.startswith("arn:"):
        return guardrail_id
    return Stack.of(scope).format_arn(
        service="bedrock",
        resource="guardrail",
        resource_name=guardrail_id,
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )
