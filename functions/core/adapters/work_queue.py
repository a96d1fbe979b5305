"""The work queue and its dead-letter queue in SQS."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core.errors import StorageUnavailable
from functions.core.models import UnsentWork, WorkItem
from functions.core.trace_context import parse_traceparent

# The most entries SQS takes in one SendMessageBatch call.
SEND_BATCH_LIMIT: Final = 10

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

# The message attribute that marks a message the worker dead-lettered; its value is the
# reason (an error code). SQS keeps message attributes when its redrive moves a dead
# letter back, so the worker can tell an operator's redrive from a new work item.
DEAD_LETTERED_ATTRIBUTE: Final = "relaylink-dead-lettered"
# Beside it, the failure the letter was sent for (the failing claim's owner token): a
# redrive reopens that failure only, never one the delivery reached since.
DEAD_LETTER_FAILURE_ATTRIBUTE: Final = "relaylink-failure"
# The span the work continues (W3C traceparent): read by the worker on every attempt.
TRACEPARENT_ATTRIBUTE: Final = "traceparent"


def _trace_attributes(work: WorkItem, *, aws_trace_header: bool) -> dict[str, Any]:
    """The trace the work continues, as a message attribute; with X-Ray on, also as
    SQS's ``AWSTraceHeader``, which X-Ray links to the worker's invocation trace (a
    link, not the same trace: docs/architecture.md, "Tracing: why our own exporter")."""
    context = parse_traceparent(work.traceparent)
    if context is None:
        return {}
    attributes: dict[str, Any] = {
        "MessageAttributes": {
            TRACEPARENT_ATTRIBUTE: {"DataType": "String", "StringValue": context.traceparent}
        }
    }
    if aws_trace_header:
        sampled = "1" if context.sampled else "0"
        header = (
            f"Root=1-{context.trace_id[:8]}-{context.trace_id[8:]};"
            f"Parent={context.span_id};Sampled={sampled}"
        )
        attributes["MessageSystemAttributes"] = {
            "AWSTraceHeader": {"DataType": "String", "StringValue": header}
        }
    return attributes


class SqsWorkQueue:
    """Sends work items and moves messages (the worker's and reconciler's queue port)."""

    def __init__(
        self,
        *,
        client: SQSClient,
        queue_url: str,
        dead_letter_queue_url: str | None = None,
        aws_trace_header: bool = False,
    ) -> None:
        """``aws_trace_header``: X-Ray is on (deployed, active tracing)."""
        self._client = client
        self._queue_url = queue_url
        self._dead_letter_queue_url = dead_letter_queue_url
        self._aws_trace_header = aws_trace_header

    def send(self, work: WorkItem, *, delay_seconds: int = 0) -> None:
        """Enqueue ``work`` (its JSON: ids and the MCP URL, never a secret)."""
        self._call(
            "send_message",
            QueueUrl=self._queue_url,
            MessageBody=work.to_json(),
            DelaySeconds=delay_seconds,
            **_trace_attributes(work, aws_trace_header=self._aws_trace_header),
        )

    def send_batch(self, works: Sequence[WorkItem]) -> list[UnsentWork]:
        """Enqueue ``works``, :data:`SEND_BATCH_LIMIT` per call; return those SQS refused.

        SQS answers a batch entry by entry: a refused entry (``Failed``) is returned
        with its code, the others were sent. A call that fails as a whole raises
        :class:`StorageUnavailable`; the chunks before it were sent.
        """
        unsent: list[UnsentWork] = []
        for start in range(0, len(works), SEND_BATCH_LIMIT):
            chunk = works[start : start + SEND_BATCH_LIMIT]
            response = self._call(
                "send_message_batch",
                QueueUrl=self._queue_url,
                # Ids are positions: one delivery may be in a batch twice (two effects).
                Entries=[
                    {
                        "Id": str(position),
                        "MessageBody": work.to_json(),
                        **_trace_attributes(work, aws_trace_header=self._aws_trace_header),
                    }
                    for position, work in enumerate(chunk)
                ],
            )
            unsent += [
                UnsentWork(chunk[int(failed["Id"])], reason=str(failed.get("Code", "")))
                for failed in response.get("Failed", [])
            ]
        return unsent

    def change_visibility(self, receipt_handle: str, *, seconds: int) -> None:
        """Hide a received message for ``seconds`` more (the retry back-off)."""
        self._call(
            "change_message_visibility",
            QueueUrl=self._queue_url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=seconds,
        )

    def dead_letter(self, body: str, *, reason: str, failure: str | None = None) -> None:
        """Copy a message body to the dead-letter queue (its original is then acked),
        marked with :data:`DEAD_LETTERED_ATTRIBUTE` = ``reason`` and
        :data:`DEAD_LETTER_FAILURE_ATTRIBUTE` = ``failure``."""
        if self._dead_letter_queue_url is None:
            raise RuntimeError("no dead-letter queue configured")
        mark = {DEAD_LETTERED_ATTRIBUTE: reason}
        if failure is not None:
            mark[DEAD_LETTER_FAILURE_ATTRIBUTE] = failure
        self._call(
            "send_message",
            QueueUrl=self._dead_letter_queue_url,
            MessageBody=body,
            MessageAttributes={
                name: {"DataType": "String", "StringValue": value} for name, value in mark.items()
            },
        )

    def _call(self, operation: str, **arguments: Any) -> Any:
        try:
            return getattr(self._client, operation)(**arguments)
        except (ClientError, BotoCoreError) as exc:
            # Every SQS failure here leaves the message where it was: try again later.
            raise StorageUnavailable("queue_unavailable") from exc
