"""The relay Lambda: outbox records from the table's stream become work-queue messages.

The event-source mapping already filters the stream to ``INSERT`` events of
``kind = outbox``; the checks here are the second line. A batch's work items go to
SQS ten to a ``SendMessageBatch`` call (one request instead of ten: SQS bills per
request), and every record SQS did not take is reported by its sequence number, so
one bad record never blocks or repeats the whole batch (Lambda resumes from the first
failure; a record sent twice is harmless because a claim is idempotent). The outbox
record itself is not deleted: it is also the received log the reconciler reads, and
the receiver wrote it to expire with its inbox item (``dynamodb_items.outbox_to_item``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from botocore.config import Config

from functions.core import metric_names, table_layout, tracing
from functions.core.adapters import dynamodb_items, span_export
from functions.core.adapters.cloudwatch_metrics import EmfMetrics
from functions.core.adapters.work_queue import SEND_BATCH_LIMIT, SqsWorkQueue
from functions.core.errors import StorageUnavailable
from functions.core.lazy_deps import LazyDeps
from functions.core.models import WorkItem
from functions.core.observability import logger
from functions.core.ports.queue import EnqueueBatch
from functions.core.trace_context import SpanContext
from functions.relay.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

SQS_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard"})
METRIC_SKIPPED = "OutboxRecordsSkipped"


@dataclass(frozen=True, slots=True)
class Deps:
    queue: EnqueueBatch
    metrics: EmfMetrics


def build_deps(settings: Settings, *, sqs: SQSClient | None = None) -> Deps:
    if sqs is None:
        import boto3  # noqa: PLC0415 (only production wiring needs the default session)

        sqs = boto3.client("sqs", config=SQS_CONFIG)
    span_export.install_from_env(os.environ)
    queue = SqsWorkQueue(
        client=sqs,
        queue_url=settings.work_queue_url,
        aws_trace_header=span_export.xray_on(os.environ),
    )
    return Deps(queue=queue, metrics=EmfMetrics())


# The container's dependencies, built from the environment on first use; tests and
# the local runtime replace them with ``container_deps.set``.
container_deps: Final = LazyDeps(lambda: build_deps(Settings.from_env(os.environ)))


@dataclass(frozen=True, slots=True)
class _Outgoing:
    sequence_number: str
    work: WorkItem
    accept: SpanContext | None = None  # the delivery's accept span, when it has a trace


def work_of(record: dict[str, Any], deps: Deps) -> WorkItem | None:
    """The work item of one outbox insert; None for anything else (skipped)."""
    image = record.get("dynamodb", {}).get("NewImage") or {}
    if record.get("eventName") != "INSERT" or image.get(table_layout.KIND_ATTRIBUTE) != {
        "S": table_layout.KIND_OUTBOX
    }:
        return None  # not a work item (the filter should have dropped it)
    try:
        return dynamodb_items.work_item_from_outbox(image)
    except (KeyError, TypeError):
        # Retrying cannot repair it, and failing it would hold up the shard until
        # the record expires: count it, and the reconciler finds the pending inbox item.
        logger.warning("malformed outbox record skipped", extra={"event_id": record.get("eventID")})
        deps.metrics.count(METRIC_SKIPPED)
        return None


def _send_all(outgoing: Sequence[_Outgoing], deps: Deps) -> list[str]:
    """Send ``outgoing`` in chunks of :data:`SEND_BATCH_LIMIT`; the sequence numbers of
    the records SQS did not take (a refused entry, or every entry of a failed call)."""
    failed: list[str] = []
    for start in range(0, len(outgoing), SEND_BATCH_LIMIT):
        chunk = outgoing[start : start + SEND_BATCH_LIMIT]
        try:
            unsent = deps.queue.send_batch([o.work for o in chunk])
        except StorageUnavailable as exc:
            # One line for the chunk: it names each delivery's trace, so that a trace's
            # search for its lines finds it.
            traces = [c.trace_id for o in chunk if (c := tracing.parent_from(o.work.traceparent))]
            logger.warning(
                "work queue unavailable",
                extra={"records": len(chunk), "code": exc.code, "trace_ids": traces},
            )
            failed += [o.sequence_number for o in chunk]
            continue
        refused = {id(u.work): u.reason for u in unsent}
        for o in chunk:
            if id(o.work) in refused:
                with tracing.within(o.work.traceparent):
                    logger.warning(
                        "work item refused by the queue",
                        extra={"delivery_id": o.work.delivery_id, "code": refused[id(o.work)]},
                    )
                failed.append(o.sequence_number)
        deps.metrics.count(metric_names.METRIC_WORK_RELAYED, len(chunk) - len(refused))
    return failed


def relay(records: Sequence[dict[str, Any]], deps: Deps) -> list[str]:
    """Relay a stream batch; the sequence numbers of the records to retry."""
    outgoing = [
        _traced(str(record["dynamodb"]["SequenceNumber"]), work)
        for record in records
        if (work := work_of(record, deps)) is not None
    ]
    started_ns = time.time_ns()
    failed = _send_all(outgoing, deps)
    _record_spans(outgoing, set(failed), started_ns=started_ns)
    return failed


def _traced(sequence_number: str, work: WorkItem) -> _Outgoing:
    """``work`` carrying its relay span (a child of its accept span) to the worker."""
    accept = tracing.parent_from(work.traceparent)
    if accept is None:
        return _Outgoing(sequence_number, work)  # received untraced: nothing to continue
    relayed = dataclasses.replace(work, traceparent=accept.child().traceparent)
    return _Outgoing(sequence_number, relayed, accept)


def _record_spans(outgoing: Sequence[_Outgoing], failed: set[str], *, started_ns: int) -> None:
    """One relay span per work item, over the batch's sends that carried it."""
    ended_ns = time.time_ns()
    for o in outgoing:
        own = tracing.parent_from(o.work.traceparent)
        if o.accept is None or own is None:
            continue
        sent = o.sequence_number not in failed
        tracing.record(
            tracing.SPAN_RELAY,
            parent=o.accept,
            context=own,
            start_ns=started_ns,
            end_ns=ended_ns,
            attributes={"delivery_id": o.work.delivery_id, "sent": sent, "batch": len(outgoing)},
            error=not sent,
        )


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (DynamoDB stream, ``ReportBatchItemFailures``)."""
    records = event.get("Records") or []
    if not records:
        return {"batchItemFailures": []}
    deps = container_deps.get()
    try:
        failed = relay(records, deps)
    finally:
        deps.metrics.flush()
        tracing.flush()
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
