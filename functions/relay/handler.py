"""The relay Lambda: outbox records from the table's stream become work-queue messages.

The event-source mapping already filters the stream to ``INSERT`` events of
``kind = outbox``; the checks here are the second line. Each record is sent on its
own, and Powertools reports failed records by sequence number, so one bad record
never blocks or repeats the whole batch (Lambda resumes from the first failure; a
record sent twice is harmless because a claim is idempotent). The outbox record
itself is not deleted: the receiver wrote it with a 24-hour TTL
(``dynamodb_items.outbox_to_item``), the stream's own retention.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from botocore.config import Config

from functions.core import metric_names, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.cloudwatch_metrics import EmfMetrics
from functions.core.adapters.work_queue import SqsWorkQueue
from functions.core.lazy_deps import LazyDeps
from functions.core.observability import logger
from functions.core.reconcile import Enqueue
from functions.relay.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

SQS_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard"})
METRIC_SKIPPED = "OutboxRecordsSkipped"


@dataclass(frozen=True, slots=True)
class Deps:
    queue: Enqueue
    metrics: EmfMetrics


def build_deps(settings: Settings, *, sqs: SQSClient | None = None) -> Deps:
    if sqs is None:
        import boto3  # noqa: PLC0415 (only production wiring needs the default session)

        sqs = boto3.client("sqs", config=SQS_CONFIG)
    return Deps(
        queue=SqsWorkQueue(client=sqs, queue_url=settings.work_queue_url), metrics=EmfMetrics()
    )


# The container's dependencies, built from the environment on first use; tests and
# the local runtime replace them with ``container_deps.set``.
container_deps: Final = LazyDeps(lambda: build_deps(Settings.from_env(os.environ)))


def relay_record(record: DynamoDBRecord, deps: Deps) -> None:
    """Send one outbox insert's work item; raise (a record failure) if SQS refuses."""
    raw = record.raw_event
    image = raw.get("dynamodb", {}).get("NewImage") or {}
    if raw.get("eventName") != "INSERT" or image.get(table_layout.KIND_ATTRIBUTE) != {
        "S": table_layout.KIND_OUTBOX
    }:
        return  # not a work item (the filter should have dropped it)
    try:
        work = dynamodb_items.work_item_from_outbox(image)
    except (KeyError, TypeError):
        # Retrying cannot repair it, and failing it would hold up the shard until
        # the record expires: count it, and the reconciler finds the pending inbox item.
        logger.warning("malformed outbox record skipped", extra={"event_id": raw.get("eventID")})
        deps.metrics.count(METRIC_SKIPPED)
        return
    deps.queue.send(work)
    deps.metrics.count(metric_names.METRIC_WORK_RELAYED)


def lambda_handler(event: dict[str, Any], context: Any) -> Any:
    """Lambda entry point (DynamoDB stream, ``ReportBatchItemFailures``)."""
    if not event.get("Records"):
        return {"batchItemFailures": []}  # Powertools refuses an empty batch
    deps = container_deps.get()
    processor = BatchProcessor(
        event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
    )
    try:
        return process_partial_response(
            event=event,
            record_handler=lambda record: relay_record(record, deps),
            processor=processor,
            context=context,
        )
    finally:
        deps.metrics.flush()
