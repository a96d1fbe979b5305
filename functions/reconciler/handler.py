"""The reconciler Lambda (EventBridge schedule): one reconciler run per invocation.

Each run works until the lists are done or the invocation's remaining time, less a
safety margin, is spent. Runs may overlap with each other and with workers: every
action is a conditional write first (see :mod:`functions.core.reconcile`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from botocore.config import Config

from functions.core import tracing
from functions.core.adapters import span_export
from functions.core.adapters.cloudwatch_metrics import EmfMetrics
from functions.core.adapters.dynamodb_approvals import DynamoDbApprovals
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_effects import DynamoDbEffects
from functions.core.adapters.dynamodb_received_log import DynamoDbReceivedLog
from functions.core.adapters.work_queue import SqsWorkQueue
from functions.core.clock import Clock, SystemClock
from functions.core.deadline import Deadline
from functions.core.lazy_deps import LazyDeps
from functions.core.observability import logger
from functions.core.reconcile import (
    SAFETY_MARGIN_SECONDS,
    ReconcileConfig,
    ReconcileReport,
    reconcile,
)
from functions.reconciler.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

AWS_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard"})


@dataclass(frozen=True, slots=True)
class Deps:
    claims: DynamoDbClaims
    received: DynamoDbReceivedLog
    effects: DynamoDbEffects
    queue: SqsWorkQueue
    clock: Clock
    metrics: EmfMetrics
    config: ReconcileConfig
    approvals: DynamoDbApprovals | None = None

    def run(self, *, deadline: Deadline) -> ReconcileReport:
        return reconcile(
            store=self.claims,
            received=self.received,
            effects=self.effects,
            queue=self.queue,
            clock=self.clock,
            metrics=self.metrics,
            config=self.config,
            deadline=deadline,
            approvals=self.approvals,
        )


def build_deps(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    sqs: SQSClient | None = None,
    clock: Clock | None = None,
) -> Deps:
    if dynamodb is None or sqs is None:
        import boto3  # noqa: PLC0415 (only production wiring needs the default session)

        # A connection for each shard read at once (botocore keeps 10 by default).
        pool = Config(max_pool_connections=max(10, settings.parallelism))
        dynamodb = dynamodb or boto3.client("dynamodb", config=AWS_CONFIG.merge(pool))
        sqs = sqs or boto3.client("sqs", config=AWS_CONFIG)
    span_export.install_from_env(os.environ)
    return Deps(
        claims=DynamoDbClaims(client=dynamodb, table_name=settings.table_name),
        received=DynamoDbReceivedLog(
            client=dynamodb,
            table_name=settings.table_name,
            shards=settings.received_log_shards,
        ),
        effects=DynamoDbEffects(client=dynamodb, table_name=settings.table_name),
        queue=SqsWorkQueue(
            client=sqs,
            queue_url=settings.work_queue_url,
            aws_trace_header=span_export.xray_on(os.environ),
        ),
        clock=clock or SystemClock(),
        metrics=EmfMetrics(),
        config=ReconcileConfig(
            pending_age_seconds=settings.pending_age_seconds,
            effect_age_seconds=settings.effect_age_seconds,
            received_age_seconds=settings.received_age_seconds,
            retention_seconds=settings.retention_seconds,
            parallelism=settings.parallelism,
        ),
        approvals=DynamoDbApprovals(client=dynamodb, table_name=settings.table_name),
    )


# The container's dependencies, built from the environment on first use; tests and
# the local runtime replace them with ``container_deps.set``.
container_deps: Final = LazyDeps(lambda: build_deps(Settings.from_env(os.environ)))


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Lambda entry point (scheduled event; its content is not used)."""
    deps = container_deps.get()
    try:
        # A run is a trace of its own; each re-enqueue it makes is a span of its
        # delivery's trace, linked to this one.
        with tracing.span(tracing.SPAN_RECONCILER_RUN):
            remaining = context.get_remaining_time_in_millis() / 1000
            report = deps.run(deadline=Deadline.after(remaining - SAFETY_MARGIN_SECONDS))
    finally:
        deps.metrics.flush()
        tracing.flush()
    logger.info("reconciler run", extra=dataclasses.asdict(report))
    return dataclasses.asdict(report)
