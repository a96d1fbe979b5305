"""The worker Lambda: a batch of work-queue messages in, a partial batch response out.

Per message: claim, fetch the package over MCP, run the workflow, complete
(:mod:`functions.core.process`). The whole batch runs inside one ``asyncio.run``
and one package source, so messages that share an MCP server share one session;
the messages run concurrently, up to ``WORKER_BATCH_CONCURRENCY``, and none is
started that the invocation's remaining time cannot see through
(:mod:`functions.core.batch`).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from botocore.config import Config

from functions.core import tracing
from functions.core.adapters import mcp_timing, span_export
from functions.core.adapters.cloudwatch_metrics import EmfMetrics
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_effects import DynamoDbEffects
from functions.core.adapters.dynamodb_package_record import DynamoDbPackageRecords
from functions.core.adapters.dynamodb_steps import DynamoDbSteps
from functions.core.adapters.mcp_fetcher import McpPackageFetcher
from functions.core.adapters.mcp_token import SecretsManagerMcpToken
from functions.core.adapters.object_store_s3 import S3ObjectStore
from functions.core.adapters.work_queue import (
    DEAD_LETTER_FAILURE_ATTRIBUTE,
    DEAD_LETTERED_ATTRIBUTE,
    TRACEPARENT_ATTRIBUTE,
    SqsWorkQueue,
)
from functions.core.batch import BatchLimits, QueueMessage, process_batch
from functions.core.clock import Clock, SystemClock
from functions.core.deadline import Deadline
from functions.core.host_policy import HostPolicy
from functions.core.lazy_deps import LazyDeps
from functions.core.package_record import PackageStorage
from functions.core.ports.package import PackageSourceFactory
from functions.core.ports.workflow import Workflow
from functions.core.process import ProcessConfig, Processor
from functions.core.steps import StepStorage
from functions.core.workflow import WorkflowContext
from functions.worker.settings import DEADLINE_MARGIN_SECONDS, Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_secretsmanager.client import SecretsManagerClient
    from mypy_boto3_sqs.client import SQSClient

AWS_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard"})
# docs/contract.md (Packages over MCP) sets no size; a briefing plus attachment metadata
# is text, and anything near this is not a briefing an agent should be handed.
MAX_RESULT_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Deps:
    processor: Processor
    queue: SqsWorkQueue
    packages: PackageSourceFactory
    metrics: EmfMetrics
    limits: BatchLimits


def mcp_packages(
    settings: Settings, *, secretsmanager: SecretsManagerClient | None
) -> PackageSourceFactory:
    """One MCP fetcher per batch, with the (cached) token and the host allowlist."""
    tokens = SecretsManagerMcpToken(
        secret_arn=settings.mcp_token_secret_arn,
        max_age_seconds=settings.secrets_max_age_seconds,
        client=secretsmanager,
    )
    policy = HostPolicy(
        allowed_hosts=settings.mcp_allowed_hosts,
        allow_insecure_loopback=settings.mcp_allow_insecure_loopback,
    )
    timeout = float(settings.mcp_timeout_seconds)

    def fetcher(deadline: Deadline) -> McpPackageFetcher:
        return McpPackageFetcher(
            token=tokens,
            policy=policy,
            connect_timeout=mcp_timing.connect_timeout(timeout),
            read_timeout=timeout,
            max_result_bytes=MAX_RESULT_BYTES,
            deadline=deadline,
        )

    return fetcher


def build_deps(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sqs: SQSClient | None = None,
    secretsmanager: SecretsManagerClient | None = None,
    s3: S3Client | None = None,
    clock: Clock | None = None,
    workflow: Workflow | None = None,
    packages: PackageSourceFactory | None = None,
) -> Deps:
    """Wire the use case to its adapters; tests pass their own clients, clock, workflow."""
    wants_s3 = s3 is None and settings.archive_bucket is not None
    if dynamodb is None or sqs is None or secretsmanager is None or wants_s3:
        import boto3  # noqa: PLC0415 (only production wiring needs the default session)

        dynamodb = dynamodb or boto3.client("dynamodb", config=AWS_CONFIG)
        sqs = sqs or boto3.client("sqs", config=AWS_CONFIG)
        secretsmanager = secretsmanager or boto3.client("secretsmanager", config=AWS_CONFIG)
        s3 = s3 or (boto3.client("s3", config=AWS_CONFIG) if wants_s3 else None)
    clock = clock or SystemClock()
    span_export.install_from_env(os.environ)
    metrics = EmfMetrics()
    # Workflow steps beside the effect records; results too large for an item go to
    # the archive bucket.
    objects = None if s3 is None else S3ObjectStore(client=s3, bucket=str(settings.archive_bucket))
    steps = StepStorage(
        records=DynamoDbSteps(client=dynamodb, table_name=settings.table_name),
        metrics=metrics,
        objects=objects,
    )
    if workflow is None:
        # The shipped workflows' wiring (boto3 clients) loads with the production deps.
        from functions.workflows import wiring  # noqa: PLC0415

        workflow = wiring.load(
            settings.workflow,
            WorkflowContext(
                notify_url=settings.notify_url,
                archive_bucket=settings.archive_bucket,
                allow_insecure_loopback=settings.mcp_allow_insecure_loopback,
                timeout_seconds=float(settings.mcp_timeout_seconds),
                clock=clock,
                settings=settings.workflow_settings,
                table_name=settings.table_name,
                alert_topic_arn=settings.alert_topic_arn,
                secrets_max_age_seconds=settings.secrets_max_age_seconds,
            ),
        )
    return Deps(
        processor=Processor(
            claims=DynamoDbClaims(
                client=dynamodb,
                table_name=settings.table_name,
                log_shards=settings.received_log_shards,
            ),
            effects=DynamoDbEffects(client=dynamodb, table_name=settings.table_name),
            workflow=workflow,
            clock=clock,
            metrics=metrics,
            config=ProcessConfig(
                max_attempts=settings.max_attempts,
                lease_seconds=settings.lease_seconds,
                retry_base_seconds=settings.retry_base_seconds,
                retry_horizon_seconds=settings.retry_horizon_seconds,
            ),
            steps=steps,
            # Each delivery's package, recorded once: large ones beside large step results.
            packages=PackageStorage(
                records=DynamoDbPackageRecords(client=dynamodb, table_name=settings.table_name),
                objects=objects,
            ),
        ),
        queue=SqsWorkQueue(
            client=sqs,
            queue_url=settings.work_queue_url,
            dead_letter_queue_url=settings.dead_letter_queue_url,
            aws_trace_header=span_export.xray_on(os.environ),
        ),
        packages=packages or mcp_packages(settings, secretsmanager=secretsmanager),
        metrics=metrics,
        limits=BatchLimits(
            concurrency=settings.batch_concurrency, message_seconds=settings.message_seconds
        ),
    )


# The container's dependencies, built from the environment on first use; tests and
# the local runtime replace them with ``container_deps.set``.
container_deps: Final = LazyDeps(lambda: build_deps(Settings.from_env(os.environ)))


def parse_messages(event: dict[str, Any]) -> list[QueueMessage]:
    return [
        QueueMessage(
            message_id=str(record["messageId"]),
            receipt_handle=str(record["receiptHandle"]),
            body=str(record["body"]),
            dead_lettered=_mark(record, DEAD_LETTERED_ATTRIBUTE),
            failure=_mark(record, DEAD_LETTER_FAILURE_ATTRIBUTE),
            traceparent=_mark(record, TRACEPARENT_ATTRIBUTE),
        )
        for record in event.get("Records", [])
    ]


def _mark(record: dict[str, Any], name: str) -> str | None:
    """A string message attribute: a part of the worker's dead-letter mark (when an SQS
    redrive brought the message back), or the trace the work continues."""
    attribute = (record.get("messageAttributes") or {}).get(name)
    value = attribute.get("stringValue") if isinstance(attribute, dict) else None
    return value if isinstance(value, str) and value else None


def handle(event: dict[str, Any], deps: Deps, *, remaining_ms: int | None = None) -> dict[str, Any]:
    """Process one SQS batch with ``deps``; returns the partial batch response.

    Args:
        remaining_ms: the invocation's remaining time; None: no deadline.
    """
    deadline = (
        Deadline.never()
        if remaining_ms is None
        else Deadline.after(remaining_ms / 1000 - DEADLINE_MARGIN_SECONDS)
    )
    try:
        # One event loop per batch: the MCP sessions of the batch live and die in it.
        failures = asyncio.run(
            process_batch(
                deps.processor,
                deps.queue,
                deps.packages,
                parse_messages(event),
                limits=deps.limits,
                deadline=deadline,
            )
        )
    finally:
        deps.metrics.flush()
        tracing.flush()
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (SQS, ``ReportBatchItemFailures``)."""
    return handle(
        event, container_deps.get(), remaining_ms=int(context.get_remaining_time_in_millis())
    )
