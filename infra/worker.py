"""The worker: consumes the work queue, fetches packages over MCP, runs the workflow."""

from __future__ import annotations

from aws_cdk import Annotations, Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from functions.core import names
from infra.config import StackConfig
from infra.lambda_function import python_function
from infra.nag import acknowledge, acknowledge_index_grant, acknowledge_tracing, logical_id, role_of

WORKER_TIMEOUT = Duration.seconds(180)
WORKER_BATCH_SIZE = 10
# AWS: a queue's visibility timeout should be at least six times the function's timeout
# (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
VISIBILITY_TIMEOUT_FACTOR = 6
VISIBILITY_TIMEOUT = Duration.seconds(WORKER_TIMEOUT.to_seconds() * VISIBILITY_TIMEOUT_FACTOR)
# A live worker's lease must outlast its invocation, and a message that comes back after
# a crash must find the lease expired: timeout < lease < visibility timeout.
LEASE_SECONDS = names.DEFAULT_LEASE_SECONDS


def check_timing(*, timeout_s: float, lease_s: float, visibility_s: float) -> None:
    """Refuse to synthesize timings under which claims and redeliveries fight.

    Raises:
        ValueError: when timeout < lease < visibility timeout does not hold.
    """
    if not timeout_s < lease_s < visibility_s:
        raise ValueError(
            f"need worker timeout ({timeout_s}s) < lease ({lease_s}s) "
            f"< visibility timeout ({visibility_s}s)"
        )


class Worker(Construct):
    """Worker Lambda on the work queue (partial batch responses, bounded concurrency).

    Attributes:
        function: The worker Lambda.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        table: dynamodb.ITable,
        work_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        mcp_token: secretsmanager.ISecret,
        archive: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        check_timing(
            timeout_s=WORKER_TIMEOUT.to_seconds(),
            lease_s=LEASE_SECONDS,
            visibility_s=VISIBILITY_TIMEOUT.to_seconds(),
        )
        environment = {
            names.ENV_TABLE_NAME: table.table_name,
            names.ENV_WORK_QUEUE_URL: work_queue.queue_url,
            names.ENV_DEAD_LETTER_QUEUE_URL: dead_letter_queue.queue_url,
            names.ENV_MCP_TOKEN_SECRET_ARN: mcp_token.secret_arn,
            names.ENV_MCP_ALLOWED_HOSTS: ",".join(config.mcp_allowed_hosts),
            names.ENV_MCP_TIMEOUT_SECONDS: str(names.DEFAULT_MCP_TIMEOUT_SECONDS),
            names.ENV_WORKFLOW: config.workflow,
            names.ENV_ARCHIVE_BUCKET: archive.bucket_name,
            names.ENV_MAX_ATTEMPTS: str(config.worker_max_attempts),
            names.ENV_LEASE_SECONDS: str(LEASE_SECONDS),
            names.ENV_SECRETS_MAX_AGE_SECONDS: str(names.DEFAULT_SECRETS_MAX_AGE_SECONDS),
        }
        if config.notify_url is not None:
            environment[names.ENV_NOTIFY_URL] = config.notify_url
        elif config.workflow == names.DEFAULT_WORKFLOW:
            Annotations.of(self).add_warning_v2(
                "relaylink:notify-url",
                "context notify_url is not set: the default workflow refuses to start "
                "without it, so every package would fail. Set -c notify_url=https://...",
            )
        self.function: lambda_.Function = python_function(
            self,
            "Function",
            function="worker",
            config=config,
            description="Claims work items, fetches packages over MCP, runs the workflow",
            timeout=WORKER_TIMEOUT,
            memory_size=512,
            environment=environment,
        )
        # Claim, complete, fail and the effect ledger are reads and writes of the table.
        table.grant_read_write_data(self.function)
        # Re-sending a deferred work item, and moving an unreadable or exhausted message
        # to the dead-letter queue with its state recorded, are the worker's own sends.
        work_queue.grant_send_messages(self.function)
        dead_letter_queue.grant_send_messages(self.function)
        mcp_token.grant_read(self.function)
        archive.grant_put(self.function)
        self.function.add_event_source(
            sources.SqsEventSource(
                work_queue,
                batch_size=WORKER_BATCH_SIZE,
                report_batch_item_failures=True,
                max_concurrency=config.worker_max_concurrency,
            )
        )
        acknowledge_tracing(self.function)
        acknowledge_index_grant(self.function, table, "grant_read_write_data")
        acknowledge(
            role_of(self.function),
            "AwsSolutions-IAM5[Action::s3:Abort*]",
            "Generated by grant_put: lets an interrupted upload of an archive object be "
            "aborted; scoped to the archive bucket's objects.",
        )
        acknowledge(
            role_of(self.function),
            f"AwsSolutions-IAM5[Resource::<{logical_id(archive)}.Arn>/*]",
            "Generated by grant_put: archive object keys are per delivery, so the grant "
            "covers the objects of this one bucket and nothing else.",
        )
