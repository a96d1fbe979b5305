"""The worker: consumes the work queue, fetches packages over MCP, runs the workflow."""

from __future__ import annotations

from aws_cdk import Annotations, Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from functions.core import event_source_limits, setting_defaults
from functions.worker.settings import DEADLINE_MARGIN_SECONDS, message_seconds
from infra.config import StackConfig
from infra.environments import worker_environment
from infra.lambda_function import python_function
from infra.nag import acknowledge, acknowledge_tracing, logical_id, role_of
from infra.secrets import ReadableSecret
from infra.table_access import ItemAction, grant_item_actions

WORKER_TIMEOUT = Duration.seconds(180)
WORKER_BATCH_SIZE = event_source_limits.WORKER_BATCH_SIZE
VISIBILITY_TIMEOUT_FACTOR = event_source_limits.VISIBILITY_TIMEOUT_FACTOR
VISIBILITY_TIMEOUT = Duration.seconds(WORKER_TIMEOUT.to_seconds() * VISIBILITY_TIMEOUT_FACTOR)
# A live worker's lease must outlast its invocation, and a message that comes back after
# a crash must find the lease expired: timeout < lease < visibility timeout.
LEASE_SECONDS = setting_defaults.DEFAULT_LEASE_SECONDS


def check_timing(
    *, timeout_s: float, lease_s: float, visibility_s: float, message_s: float = 0.0
) -> None:
    """Refuse to synthesize timings under which claims and redeliveries fight, or under
    which a worker could never start a message.

    Args:
        message_s: the time a worker needs left to start a message (the MCP fetch's
            bound plus the workflow's allowance).

    Raises:
        ValueError: when timeout < lease < visibility timeout does not hold, or a
            message's time and the deadline's margin do not fit the timeout.
    """
    if not timeout_s < lease_s < visibility_s:
        raise ValueError(
            f"need worker timeout ({timeout_s}s) < lease ({lease_s}s) "
            f"< visibility timeout ({visibility_s}s)"
        )
    if message_s + DEADLINE_MARGIN_SECONDS > timeout_s:
        raise ValueError(
            f"a message needs {message_s:g}s (MCP fetch bound + worker_workflow_seconds)"
            f" plus a {DEADLINE_MARGIN_SECONDS:g}s margin: more than the worker's"
            f" {timeout_s:g}s timeout"
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
        mcp_token: ReadableSecret,
        archive: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        check_timing(
            timeout_s=WORKER_TIMEOUT.to_seconds(),
            lease_s=LEASE_SECONDS,
            visibility_s=VISIBILITY_TIMEOUT.to_seconds(),
            message_s=message_seconds(
                mcp_timeout_seconds=setting_defaults.DEFAULT_MCP_TIMEOUT_SECONDS,
                workflow_seconds=config.worker_workflow_seconds,
            ),
        )
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
            lease_seconds=LEASE_SECONDS,
            notify_url=config.notify_url,
            batch_concurrency=config.worker_batch_concurrency,
            workflow_seconds=config.worker_workflow_seconds,
        )
        if config.notify_url is None and config.workflow == setting_defaults.DEFAULT_WORKFLOW:
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
        # Claim, complete, release and fail update the inbox item; the effect ledger
        # reads, puts (the intent) and updates (done) its own records.
        grant_item_actions(
            self.function,
            table,
            ItemAction.GET_ITEM,
            ItemAction.PUT_ITEM,
            ItemAction.UPDATE_ITEM,
        )
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
