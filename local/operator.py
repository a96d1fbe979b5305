"""What the operator commands do, against a deployed stack or a local one.

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

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_state_index
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.work_queue import SqsWorkQueue
from functions.core.models import InboxItem, QuarantineRecord, State, WorkItem

if TYPE_CHECKING:
    from local.state import LocalState

# Stack outputs the operator needs (infra/stack.py).
OUTPUT_TABLE: Final = "TableName"
OUTPUT_WORK_QUEUE: Final = "WorkQueueUrl"
OUTPUT_DEAD_LETTER_QUEUE: Final = "WorkDeadLetterQueueUrl"
# Later than any state change: the index query's "changed before" bound for "all".
_END_OF_TIME: Final = 2**53
# Each received dead letter stays hidden this long while it is handled.
_REDRIVE_VISIBILITY_SECONDS: Final = 60
_SQS_BATCH: Final = 10

# Why the reset is conditional: only a delivery whose processing is over (failed) may
# get a fresh budget; a worker holding it, or a completion, must not be undone.
_RESET_FAILED: Final = (
    ("attribute_exists(pk)", "an item that expired meanwhile is not re-created"),
    ("#state = :failed", "only a failed delivery is retried; never undo a completion"),
)


class OperatorError(Exception):
    """The target cannot be reached or is not a receiver stack (a one-line message)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where the operator commands act: clients and the stack's resource names."""

    dynamodb: Any
    sqs: Any
    table_name: str
    work_queue_url: str
    dead_letter_queue_url: str
    # SQS long-poll wait of redrive's receives: short polls may miss messages on SQS,
    # while the local emulator serves one request at a time and must not be held.
    receive_wait_seconds: int = 1

    @classmethod
    def from_stack(cls, stack_name: str, *, region: str | None = None) -> Target:
        """Names from a deployed stack's CloudFormation outputs; default credential chain."""
        import boto3  # noqa: PLC0415 (keeps the CLI's --help quick)

        session = boto3.session.Session(region_name=region)
        try:
            stacks = session.client("cloudformation").describe_stacks(StackName=stack_name)
        except ClientError as exc:
            message = exc.response.get("Error", {}).get("Message", "unknown error")
            raise OperatorError(f"cannot describe stack {stack_name}: {message}") from None
        except BotoCoreError as exc:
            raise OperatorError(f"cannot describe stack {stack_name}: {exc}") from None
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks["Stacks"][0].get("Outputs", [])}
        missing = [
            k
            for k in (OUTPUT_TABLE, OUTPUT_WORK_QUEUE, OUTPUT_DEAD_LETTER_QUEUE)
            if k not in outputs
        ]
        if missing:
            raise OperatorError(
                f"stack {stack_name} lacks the outputs {', '.join(missing)}"
                " (not a relaylink-receiver stack, or deployed before they existed)"
            )
        return cls(
            dynamodb=session.client("dynamodb"),
            sqs=session.client("sqs"),
            table_name=outputs[OUTPUT_TABLE],
            work_queue_url=outputs[OUTPUT_WORK_QUEUE],
            dead_letter_queue_url=outputs[OUTPUT_DEAD_LETTER_QUEUE],
        )

    @classmethod
    def from_local(cls, state: LocalState) -> Target:
        """The local stack's emulator, from its state file."""
        return cls(
            dynamodb=state.aws_client("dynamodb"),
            sqs=state.aws_client("sqs"),
            table_name=state.resources.table_name,
            work_queue_url=state.resources.work_queue_url,
            dead_letter_queue_url=state.resources.dead_letter_queue_url,
            receive_wait_seconds=0,
        )

    def claims(self) -> DynamoDbClaims:
        return DynamoDbClaims(client=self.dynamodb, table_name=self.table_name)


def iso(epoch: int | None) -> str | None:
    """Epoch seconds as ``2026-12-02T15:04:05Z`` (None stays None)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- inbox --------------------------------------------------------------------------


def inbox_view(item: InboxItem) -> dict[str, Any]:
    """One inbox item as the commands print it: stable keys, epoch seconds, no body."""
    return {
        "delivery_id": item.delivery_id,
        "event": item.event,
        "state": item.state.value,
        "attempts": item.attempts,
        "body_sha256": item.body_sha256,
        "package_id": item.package_id,
        "mcp_url": item.mcp_url,
        "received_at": item.received_at,
        "state_changed_at": item.state_changed_at,
        "completed_at": item.completed_at,
        "lease_until": item.lease_until,
        "last_error": item.last_error,
    }


def show_inbox(target: Target, delivery_id: str) -> InboxItem | None:
    """The inbox item (consistent read), or None for an unknown id."""
    return target.claims().get(delivery_id)


def list_inbox(
    target: Target, *, state: State | None = None, limit: int | None = None
) -> list[InboxItem]:
    """Inbox items, oldest received first (then by id); ``state`` uses the by_state index."""
    if state is None:
        found = [dynamodb_items.inbox_from_item(i) for i in _scan_inbox(target)]
    else:
        found = [
            dynamodb_items.inbox_from_item(item)
            for item in dynamodb_state_index.query_index(
                target.dynamodb, target.table_name, label=state.value, changed_before=_END_OF_TIME
            )
            # The index also lists other records (quarantine, effect intents) by label.
            if item[table_layout.TABLE_SORT_KEY]["S"] == table_layout.SK_INBOX
        ]
    found.sort(key=lambda i: (i.received_at, i.delivery_id))
    return found if limit is None else found[:limit]


def _scan_inbox(target: Target) -> Iterator[dynamodb_items.Item]:
    arguments: dict[str, Any] = {
        "TableName": target.table_name,
        "FilterExpression": "#sk = :inbox",
        "ExpressionAttributeNames": {"#sk": table_layout.TABLE_SORT_KEY},
        "ExpressionAttributeValues": {":inbox": {"S": table_layout.SK_INBOX}},
        "ConsistentRead": True,
    }
    yield from _paginate(target.dynamodb.scan, arguments)


def _paginate(call: Any, arguments: dict[str, Any]) -> Iterator[dynamodb_items.Item]:
    while True:
        try:
            response = call(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise OperatorError(f"DynamoDB: {describe_aws_error(exc)}") from None
        yield from response.get("Items", [])
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        arguments["ExclusiveStartKey"] = last


def describe_aws_error(exc: Exception) -> str:
    """One line for an SDK error: its code and message, no request details."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    return str(exc)


# --- quarantine ---------------------------------------------------------------------


def quarantine_view(record: QuarantineRecord) -> dict[str, Any]:
    """One quarantine record: both digests and the time (never a body: none is kept)."""
    return {
        "delivery_id": record.delivery_id,
        "event": record.event,
        "stored_sha256": record.stored_sha256,
        "received_sha256": record.received_sha256,
        "quarantined_at": record.quarantined_at,
    }


def _quarantine_order(record: QuarantineRecord) -> tuple[int, str, str]:
    return (record.quarantined_at, record.delivery_id, record.received_sha256)


def list_quarantine(target: Target) -> list[QuarantineRecord]:
    """Every quarantine record (from the by_state index), oldest first."""
    records = [
        dynamodb_items.quarantine_from_item(item)
        for item in dynamodb_state_index.query_index(
            target.dynamodb,
            target.table_name,
            label=dynamodb_items.QUARANTINED_LABEL,
            changed_before=_END_OF_TIME,
        )
    ]
    return sorted(records, key=_quarantine_order)


def show_quarantine(target: Target, delivery_id: str) -> list[QuarantineRecord]:
    """The quarantine records of one delivery (one per conflicting body digest)."""
    arguments: dict[str, Any] = {
        "TableName": target.table_name,
        "KeyConditionExpression": "#pk = :id AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {
            "#pk": table_layout.TABLE_PARTITION_KEY,
            "#sk": table_layout.TABLE_SORT_KEY,
        },
        "ExpressionAttributeValues": {
            ":id": {"S": delivery_id},
            ":prefix": {"S": table_layout.SK_QUARANTINE_PREFIX},
        },
        "ConsistentRead": True,
    }
    records = [
        dynamodb_items.quarantine_from_item(i) for i in _paginate(target.dynamodb.query, arguments)
    ]
    return sorted(records, key=_quarantine_order)


# --- redrive and requeue ------------------------------------------------------------


def reset_failed(target: Target, delivery_id: str, *, now: int) -> bool:
    """``failed`` -> ``pending`` with attempts 0; False if the item is not failed (any more)."""
    try:
        target.dynamodb.update_item(
            TableName=target.table_name,
            Key=dynamodb_items.inbox_key(delivery_id),
            UpdateExpression=(
                "SET #state = :pending, attempts = :zero,"
                " state_shard = :shard, state_changed_at = :now"
            ),
            ConditionExpression=" AND ".join(f"({part})" for part, _why in _RESET_FAILED),
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":pending": {"S": State.PENDING.value},
                ":failed": {"S": State.FAILED.value},
                ":zero": {"N": "0"},
                ":shard": {"S": dynamodb_items.state_shard(State.PENDING.value, delivery_id)},
                ":now": {"N": str(now)},
            },
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise OperatorError(f"DynamoDB: {describe_aws_error(exc)}") from None
    except BotoCoreError as exc:
        raise OperatorError(f"DynamoDB: {describe_aws_error(exc)}") from None
    return True


def _send_work(target: Target, work: WorkItem) -> None:
    queue = SqsWorkQueue(client=target.sqs, queue_url=target.work_queue_url)
    try:
        queue.send(work)
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
    outcome = RequeueOutcome.RESENT
    if item.state is State.FAILED:
        if not reset_failed(target, delivery_id, now=now):
            return RequeueResult(
                delivery_id, RequeueOutcome.REFUSED, previous, "it changed meanwhile; look again"
            )
        outcome = RequeueOutcome.REQUEUED
    # Sending again to a pending delivery is harmless: the claim lets one worker run it.
    _send_work(target, work)
    return RequeueResult(delivery_id, outcome, previous)


class RedriveOutcome(StrEnum):
    MOVED = "moved"  # back on the work queue (reset from failed, or already pending)
    IN_PROGRESS = "in_progress"  # a worker holds it now: the dead letter is dropped
    ALREADY_DONE = "already_done"  # completed or ignored meanwhile: dropped
    MISSING = "missing"  # no inbox item (expired): nothing can process it; dropped
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


def redrive(target: Target, *, now: int, max_messages: int | None = None) -> RedriveReport:
    """Move dead-lettered work back to the work queue.

    Each dead letter is handled in an order that survives an interruption at any
    point: the inbox item is reset (failed -> pending) first, then the work item is
    sent, then the dead letter deleted. A re-run finds the item pending and sends it
    again (harmless: one claim wins), so redrive is idempotent.

    Args:
        now: epoch seconds, the reset's ``state_changed_at``.
        max_messages: stop after this many dead letters (None: until the queue is empty).
    """
    report = RedriveReport()
    kept: list[str] = []  # receipt handles of malformed letters, made visible again at the end
    try:
        while max_messages is None or len(report.outcomes) < max_messages:
            want = _SQS_BATCH if max_messages is None else max_messages - len(report.outcomes)
            messages = _receive(target, min(_SQS_BATCH, want))
            if not messages:
                break
            for message in messages:
                delivery_id, outcome = _redrive_one(target, message["Body"], now=now)
                report.outcomes.append((delivery_id, outcome))
                if outcome is RedriveOutcome.MALFORMED:
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


def _receive(target: Target, count: int) -> list[dict[str, Any]]:
    response = _sqs(
        target.sqs.receive_message,
        QueueUrl=target.dead_letter_queue_url,
        MaxNumberOfMessages=count,
        VisibilityTimeout=_REDRIVE_VISIBILITY_SECONDS,
        WaitTimeSeconds=target.receive_wait_seconds,
    )
    return list(response.get("Messages", []))


def _sqs(call: Any, **arguments: Any) -> Any:
    try:
        return call(**arguments)
    except (ClientError, BotoCoreError) as exc:
        raise OperatorError(f"SQS: {describe_aws_error(exc)}") from None


def _redrive_one(target: Target, body: str, *, now: int) -> tuple[str | None, RedriveOutcome]:
    try:
        work = WorkItem.from_json(body)
    except ValueError:
        return None, RedriveOutcome.MALFORMED
    item = show_inbox(target, work.delivery_id)
    if item is None:
        return work.delivery_id, RedriveOutcome.MISSING
    if item.state is State.FAILED and not reset_failed(target, work.delivery_id, now=now):
        item = show_inbox(target, work.delivery_id)  # changed meanwhile: look again
        if item is None:
            return work.delivery_id, RedriveOutcome.MISSING
    if item.state in (State.FAILED, State.PENDING):
        _send_work(target, work)
        return work.delivery_id, RedriveOutcome.MOVED
    if item.state is State.PROCESSING:
        return work.delivery_id, RedriveOutcome.IN_PROGRESS
    return work.delivery_id, RedriveOutcome.ALREADY_DONE
