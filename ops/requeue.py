"""Requeue and redrive: give failed work another run, on a deployed stack or a local one.

Plain functions over boto3 clients and resource names (a :class:`Target`); they
return typed values that the command modules print. Every table access goes
through the functions' own adapters and item codec
(:mod:`functions.core.adapters.dynamodb_items`), so the operator reads and writes
exactly the layout the Lambdas do. Nothing here reads or prints a body: the table
holds none (only its SHA-256).

Redrive and requeue turn a ``failed`` inbox item back into ``pending`` with one
conditional update (``failed`` -> ``pending``, ``attempts`` reset to 0 so the worker
has its full budget again) *before* the work item is sent, so a worker can claim it
when the message arrives. ``last_error`` is kept: it still says why the delivery
failed until the next attempt records its own outcome.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import tracing, work_trace
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters import dynamodb_items
from functions.core.adapters.work_queue import DEAD_LETTER_FAILURE_ATTRIBUTE, SqsWorkQueue
from functions.core.errors import StorageUnavailable
from functions.core.models import InboxItem, State, WorkItem
from ops.inbox import show_inbox
from ops.target import OperatorError, Target, describe_aws_error

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

_Response = TypeVar("_Response")

# Each received dead letter stays hidden this long while it is handled.
_REDRIVE_VISIBILITY_SECONDS: Final = 60
_SQS_BATCH: Final = 10


def reset_failed(target: Target, delivery_id: str, *, now: int) -> bool:
    """``failed`` -> ``pending`` with attempts 0; False if the item is not failed (any more)."""
    return reopen(target, delivery_id, now=now).moved


@dataclass(frozen=True, slots=True)
class Reopened:
    """What :func:`reopen` did: ``moved`` (failed -> pending), else the state the item
    was in when the reset was refused (None: no such item any more), and whether its
    TTL had passed (``expired``: it can never run again)."""

    moved: bool
    refused_in: State | None = None
    expired: bool = False


def reopen(target: Target, delivery_id: str, *, now: int, failure: str | None = None) -> Reopened:
    """:func:`reset_failed`, saying what stood in the way when it is refused (no extra read).

    Args:
        failure: reopen only this failure (a worker's dead letter names the one it was
            sent for); None: whichever failure the delivery is in.
    """
    row, values = transitions.RESET_FAILED, {}
    if failure is not None:
        row, values = transitions.RESET_DEAD_LETTER, {"failure": failure}
    try:
        applied = transitions.apply(
            target.dynamodb, target.table_name, row, delivery_id, now=now, **values
        )
    except (StorageUnavailable, ClientError) as exc:
        # StorageUnavailable stands for the SDK error it was raised from: describe that.
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        raise OperatorError(f"DynamoDB: {describe_aws_error(cause)}") from None
    if applied.moved:
        return Reopened(moved=True)
    seen = None if applied.item is None else dynamodb_items.inbox_from_item(applied.item)
    if seen is None:
        return Reopened(moved=False)
    return Reopened(moved=False, refused_in=seen.state, expired=seen.expires_at <= now)


def _send_work(target: Target, work: WorkItem, *, action: str) -> None:
    """Send ``work`` again, as the operator's ``action``: a span of the delivery's trace."""
    queue = SqsWorkQueue(client=target.sqs, queue_url=target.work_queue_url)
    try:
        with work_trace.resending(tracing.SPAN_OPERATOR_PREFIX + action, [work]) as (traced,):
            queue.send(traced)
    except Exception as exc:  # noqa: BLE001 (StorageUnavailable: say what is left to do)
        raise OperatorError(
            f"{work.delivery_id} is pending but its work item could not be sent ({exc});"
            " run the command again, or the reconciler re-enqueues it within 30 minutes"
        ) from None


class RequeueOutcome(StrEnum):
    REQUEUED = "requeued"  # was failed: reset to pending, work item sent
    RESENT = "resent"  # was already pending (e.g. an interrupted requeue): work item sent
    UNKNOWN = "unknown"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class RequeueResult:
    delivery_id: str
    outcome: RequeueOutcome
    state: str | None  # the state before the command
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivery_id": self.delivery_id,
            "outcome": self.outcome.value,
            "previous_state": self.state,
            "reason": self.reason,
        }


_REFUSALS: Final = {
    State.COMPLETED: "it is completed: its work is done and is never run twice",
    State.PROCESSING: "a worker is processing it now",
    State.IGNORED: "its event needs no processing",
}
# Past its TTL a delivery's effect records may be deleted already: it never runs again.
_EXPIRED: Final = "it has expired: its records are being deleted (TTL), so it never runs again"


def requeue(target: Target, delivery_id: str, *, now: int) -> RequeueResult:
    """Give a failed delivery a new work item (a pending one gets its work item again)."""
    item = show_inbox(target, delivery_id)
    if item is None:
        return RequeueResult(delivery_id, RequeueOutcome.UNKNOWN, None, "no such delivery")
    previous = item.state.value
    work = item.work_item()
    if item.state in _REFUSALS or work is None:
        reason = _REFUSALS.get(item.state, "it has no work item (no package)")
        return RequeueResult(delivery_id, RequeueOutcome.REFUSED, previous, reason)
    if item.expires_at <= now:
        return RequeueResult(delivery_id, RequeueOutcome.REFUSED, previous, _EXPIRED)
    outcome = RequeueOutcome.RESENT
    if item.state is State.FAILED:
        reopened = reopen(target, delivery_id, now=now)
        if not reopened.moved:
            reason = _EXPIRED if reopened.expired else "it changed meanwhile; look again"
            return RequeueResult(delivery_id, RequeueOutcome.REFUSED, previous, reason)
        outcome = RequeueOutcome.REQUEUED
    # Sending again to a pending delivery is harmless: the claim lets one worker run it.
    _send_work(target, work, action="requeue")
    return RequeueResult(delivery_id, outcome, previous)


class RedriveOutcome(StrEnum):
    MOVED = "moved"  # back on the work queue (reset from failed, or already pending)
    IN_PROGRESS = "in_progress"  # a worker holds it now: the dead letter is dropped
    ALREADY_DONE = "already_done"  # completed or ignored meanwhile: dropped
    MISSING = "missing"  # no inbox item (expired): nothing can process it; dropped
    EXPIRED = "expired"  # its item's TTL has passed: it never runs again; dropped
    # Failed again since the worker sent this letter (after a requeue), for a failure of
    # its own: not the letter's to reopen (requeue the delivery for that); dropped.
    SUPERSEDED = "superseded"
    MALFORMED = "malformed"  # not a work item: left on the dead-letter queue


@dataclass(slots=True)
class RedriveReport:
    """What one ``redrive`` run did, per dead letter."""

    outcomes: list[tuple[str | None, RedriveOutcome]] = field(default_factory=list)

    def count(self, outcome: RedriveOutcome) -> int:
        return sum(1 for _id, o in self.outcomes if o is outcome)

    @property
    def moved(self) -> int:
        return self.count(RedriveOutcome.MOVED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "moved": self.moved,
            "counts": {o.value: self.count(o) for o in RedriveOutcome},
            "messages": [
                {"delivery_id": delivery_id, "outcome": outcome.value}
                for delivery_id, outcome in self.outcomes
            ],
        }


def redrive(
    target: Target,
    *,
    now: int,
    max_messages: int | None = None,
    dry_run: bool = False,
    delivery_id: str | None = None,
) -> RedriveReport:
    """Move dead-lettered work back to the work queue.

    Each dead letter is handled in an order that survives an interruption at any
    point: the inbox item is reset (failed -> pending) first, then the work item is
    sent, then the dead letter deleted. A re-run finds the item pending and sends it
    again (harmless: one claim wins), so redrive is idempotent.

    Args:
        now: epoch seconds, the reset's ``state_changed_at``.
        max_messages: stop after this many dead letters (None: until the queue is empty).
        dry_run: only say what each dead letter would come to; every letter stays.
        delivery_id: only this delivery's dead letters (the others are looked through
            and stay, unreported).
    """
    report = RedriveReport()
    kept: list[str] = []  # receipt handles of letters that stay, made visible again at the end
    seen: set[str] = set()  # a letter seen again (its hiding ran out): the pass is over
    try:
        while max_messages is None or len(report.outcomes) < max_messages:
            want = _SQS_BATCH if max_messages is None else max_messages - len(report.outcomes)
            messages = _receive(target, min(_SQS_BATCH, want))
            fresh = [m for m in messages if m["MessageId"] not in seen]
            kept += [m["ReceiptHandle"] for m in messages if m["MessageId"] in seen]
            if not fresh:
                break
            for message in fresh:
                seen.add(message["MessageId"])
                if delivery_id is not None and _letter_of(message["Body"]) != delivery_id:
                    kept.append(message["ReceiptHandle"])
                    continue
                letter_id, outcome = _redrive_one(target, message, now=now, dry_run=dry_run)
                report.outcomes.append((letter_id, outcome))
                if dry_run or outcome is RedriveOutcome.MALFORMED:
                    kept.append(message["ReceiptHandle"])
                else:
                    _sqs(
                        target.sqs.delete_message,
                        QueueUrl=target.dead_letter_queue_url,
                        ReceiptHandle=message["ReceiptHandle"],
                    )
    finally:
        for handle in kept:
            _sqs(
                target.sqs.change_message_visibility,
                QueueUrl=target.dead_letter_queue_url,
                ReceiptHandle=handle,
                VisibilityTimeout=0,
            )
    return report


def _receive(target: Target, count: int) -> list[MessageTypeDef]:
    response = _sqs(
        target.sqs.receive_message,
        QueueUrl=target.dead_letter_queue_url,
        MaxNumberOfMessages=count,
        VisibilityTimeout=_REDRIVE_VISIBILITY_SECONDS,
        WaitTimeSeconds=target.receive_wait_seconds,
        MessageAttributeNames=[DEAD_LETTER_FAILURE_ATTRIBUTE],
    )
    return list(response.get("Messages", []))


def _sqs(call: Callable[..., _Response], **arguments: Any) -> _Response:
    try:
        return call(**arguments)
    except (ClientError, BotoCoreError) as exc:
        raise OperatorError(f"SQS: {describe_aws_error(exc)}") from None


def _letter_of(body: str) -> str | None:
    """The delivery id a dead letter is for (None: not a work item)."""
    try:
        return WorkItem.from_json(body).delivery_id
    except ValueError:
        return None


def _redrive_one(
    target: Target, message: MessageTypeDef, *, now: int, dry_run: bool
) -> tuple[str | None, RedriveOutcome]:
    """Redrive one dead letter (a dry run: say what that would come to, change nothing).

    A letter the worker sent names the failure it was sent for: only that failure is
    reopened. A letter SQS moved (its receive count ran out) names none: whichever
    failure the delivery is in is.
    """
    try:
        work = WorkItem.from_json(message["Body"])
    except ValueError:
        return None, RedriveOutcome.MALFORMED
    mark = message.get("MessageAttributes", {}).get(DEAD_LETTER_FAILURE_ATTRIBUTE)
    failure_id = (mark.get("StringValue") if mark else None) or None
    item = show_inbox(target, work.delivery_id)
    if item is None:
        return work.delivery_id, RedriveOutcome.MISSING
    if dry_run:
        superseded = (
            failure_id is not None
            and item.state is State.FAILED
            and item.expires_at > now
            and _failure_of(target, work.delivery_id) != failure_id
        )
        return work.delivery_id, (
            RedriveOutcome.SUPERSEDED if superseded else _redrive_outcome(item, now=now)
        )
    if item.state is State.FAILED:
        reopened = reopen(target, work.delivery_id, now=now, failure=failure_id)
        if not reopened.moved and reopened.refused_in is State.FAILED and not reopened.expired:
            return work.delivery_id, RedriveOutcome.SUPERSEDED
        if not reopened.moved:
            item = show_inbox(target, work.delivery_id)  # changed meanwhile: look again
            if item is None:
                return work.delivery_id, RedriveOutcome.MISSING
    outcome = _redrive_outcome(item, now=now)
    if outcome is RedriveOutcome.MOVED:
        # The letter's body carries no trace; the inbox item has the delivery's.
        _send_work(
            target, dataclasses.replace(work, traceparent=item.traceparent), action="redrive"
        )
    return work.delivery_id, outcome


def _failure_of(target: Target, delivery_id: str) -> str | None:
    """Which failure the delivery is in (``failed_by``), read consistently."""
    response = _dynamodb(
        target.dynamodb.get_item,
        TableName=target.table_name,
        Key=dynamodb_items.inbox_key(delivery_id),
        ConsistentRead=True,
        ProjectionExpression=dynamodb_items.FAILED_BY,
    )
    failed_by = response.get("Item", {}).get(dynamodb_items.FAILED_BY, {})
    return failed_by.get("S")


def _dynamodb(call: Callable[..., _Response], **arguments: Any) -> _Response:
    try:
        return call(**arguments)
    except (ClientError, BotoCoreError) as exc:
        raise OperatorError(f"DynamoDB: {describe_aws_error(exc)}") from None


def _redrive_outcome(item: InboxItem, *, now: int) -> RedriveOutcome:
    state = item.state
    if state in (State.FAILED, State.PENDING) and item.expires_at <= now:
        return RedriveOutcome.EXPIRED
    if state in (State.FAILED, State.PENDING):
        return RedriveOutcome.MOVED
    if state is State.PROCESSING:
        return RedriveOutcome.IN_PROGRESS
    return RedriveOutcome.ALREADY_DONE


def dead_letter_count(target: Target) -> int:
    """How many letters the dead-letter queue holds, as SQS estimates it (visible or not)."""
    response = _sqs(
        target.sqs.get_queue_attributes,
        QueueUrl=target.dead_letter_queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )
    attributes = response.get("Attributes", {})
    visible = attributes.get("ApproximateNumberOfMessages", "0")
    hidden = attributes.get("ApproximateNumberOfMessagesNotVisible", "0")
    return int(visible) + int(hidden)
