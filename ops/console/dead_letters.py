"""The work dead-letter queue as the console shows it: its depth, a peek, redrive one.

A peek receives with a visibility timeout of 0, so the letters stay where they are
for ``redrive``. Redriving one letter is the ``redrive`` command's order for that
letter alone: give its delivery its next attempt (``requeue``), then delete the letter;
the letters looked at on the way are made visible again at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core.models import WorkItem
from ops.requeue import RequeueOutcome, RequeueResult, dead_letter_count, requeue
from ops.target import OperatorError, Target, describe_aws_error

_BATCH: Final = 10
# Receives that look for one letter before giving up (SQS samples its servers).
_SEARCH_RECEIVES: Final = 10
# A letter whose delivery is in one of these outcomes needs no dead letter any more.
_SETTLED: Final = (RequeueOutcome.REQUEUED, RequeueOutcome.RESENT, RequeueOutcome.UNKNOWN)


@dataclass(frozen=True, slots=True)
class DeadLetters:
    depth: int  # approximate, as SQS counts (visible or not)
    delivery_ids: list[str]  # a sample of the letters' deliveries (malformed ones skipped)


def _sqs(call: Any, **arguments: Any) -> Any:
    try:
        return call(**arguments)
    except (ClientError, BotoCoreError) as exc:
        raise OperatorError(f"SQS: {describe_aws_error(exc)}") from None


def peek(target: Target) -> DeadLetters:
    response = _sqs(
        target.sqs.receive_message,
        QueueUrl=target.dead_letter_queue_url,
        MaxNumberOfMessages=_BATCH,
        VisibilityTimeout=0,
    )
    ids: list[str] = []
    for message in response.get("Messages", []):
        try:
            ids.append(WorkItem.from_json(message["Body"]).delivery_id)
        except ValueError:
            continue
    return DeadLetters(dead_letter_count(target), sorted(set(ids)))


def redrive_one(target: Target, delivery_id: str, *, now: int) -> RequeueResult | None:
    """Redrive the dead letter of ``delivery_id``; None when no such letter was found."""
    for _ in range(_SEARCH_RECEIVES):
        response = _sqs(
            target.sqs.receive_message,
            QueueUrl=target.dead_letter_queue_url,
            MaxNumberOfMessages=_BATCH,
            VisibilityTimeout=30,
        )
        messages = response.get("Messages", [])
        if not messages:
            return None
        result: RequeueResult | None = None
        for message in messages:
            handle = message["ReceiptHandle"]
            mine = _letter_of(message["Body"]) == delivery_id and result is None
            if mine:
                result = requeue(target, delivery_id, now=now)
            if mine and result is not None and _done_with(result):
                _sqs(
                    target.sqs.delete_message,
                    QueueUrl=target.dead_letter_queue_url,
                    ReceiptHandle=handle,
                )
            else:
                _sqs(
                    target.sqs.change_message_visibility,
                    QueueUrl=target.dead_letter_queue_url,
                    ReceiptHandle=handle,
                    VisibilityTimeout=0,
                )
        if result is not None:
            return result
    return None


def _letter_of(body: str) -> str | None:
    try:
        return WorkItem.from_json(body).delivery_id
    except ValueError:
        return None


def _done_with(result: RequeueResult) -> bool:
    """Requeued, or completed/ignored meanwhile: the letter has nothing left to do."""
    if result.outcome in _SETTLED:
        return True
    return result.state in ("completed", "ignored")
