"""Approval records in DynamoDB (``pk`` = delivery id, ``sk`` = ``approval#<name>``).

The record sits beside the delivery's step and effect records and shares their
retention. It is never listed in the state index itself: the parked inbox item is
(``awaiting_approval#NN``), and a listing reads the record beside each item.

A decision is one ``TransactWriteItems``: the record's decision (only if none is
recorded, only about the proposal the person named, only before the deadline for a
person and only after it for the timeout) and the inbox item's move out of
``awaiting_approval`` (only if it still waits for this approval;
:mod:`.dynamodb_inbox_transitions`). Its ``ClientRequestToken``
is the decision's token, so the SDK's retry of a transaction that committed but whose
answer was lost is answered as a success by DynamoDB (within its ten minutes), and a
later read tells our decision from another by the token on the record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters import (
    dynamodb_items,
    dynamodb_pass_cursor,
    dynamodb_requests,
    dynamodb_state_index,
)
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.adapters.dynamodb_errors import condition_failed, storage_error
from functions.core.models import InboxItem, State
from functions.core.ports.approvals import ApprovalDecision, ApprovalRecord, Decision
from functions.core.ports.recovery import OpenCursor, OpenPage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

# Listed before this (epoch seconds, far beyond any clock): every entry of the label.
_EVER: Final = 2**40

_NEW: Condition = (
    ("attribute_not_exists(pk)", "the first proposal is kept: a decision may refer to it"),
)
_UNDECIDED: Condition = (
    ("attribute_exists(pk)", "only an approval that was asked for is decided"),
    ("attribute_not_exists(decision)", "decided once: the first decision stands"),
)
_NAMED_PROPOSAL: Condition = (
    (
        "attribute_not_exists(proposal_digest) OR proposal_digest = :proposal",
        "a person decides what they were shown, not what waits now (a record from before"
        " digests were kept has no digest; its proposal was never rewritten either)",
    ),
)
_IN_TIME: Condition = (
    (
        "deadline > :at",
        "a person's decision after the deadline is refused, whatever the reconciler has done yet",
    ),
)
_TIMED_OUT: Condition = (("deadline <= :at", "the timeout decides only once it has passed"),)
_INBOX_MOVES: Final = {
    ApprovalDecision.APPROVED: transitions.APPROVE,
    ApprovalDecision.DENIED: transitions.DENY,
    ApprovalDecision.EXPIRED: transitions.APPROVAL_TIMEOUT,
}


def approval_key(delivery_id: str, name: str) -> dynamodb_items.Item:
    return dynamodb_items.key(delivery_id, table_layout.SK_APPROVAL_PREFIX + name)


def approval_to_item(record: ApprovalRecord, *, expires_at: int) -> dynamodb_items.Item:
    item: dynamodb_items.Item = {
        **approval_key(record.delivery_id, record.name),
        table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_APPROVAL},
        "delivery_id": {"S": record.delivery_id},
        "name": {"S": record.name},
        "proposal": {"S": record.proposal_json()},
        "proposal_digest": {"S": record.proposal_digest()},
        "requested_at": {"N": str(record.requested_at)},
        "deadline": {"N": str(record.deadline)},
    }
    if record.package_digest is not None:
        item["proposal_package"] = {"S": record.package_digest}
    if record.traceparent is not None:
        item[dynamodb_items.TRACEPARENT] = {"S": record.traceparent}
    if record.requested_at_ns is not None:
        item["requested_at_ns"] = {"N": str(record.requested_at_ns)}
    if expires_at:
        item[table_layout.TTL_ATTRIBUTE] = {"N": str(expires_at)}
    return item


def approval_from_item(item: dynamodb_items.Item) -> ApprovalRecord:
    """Parse a stored approval record; raises ``KeyError``/``ValueError`` on another shape."""
    decided = None
    if "decision" in item:
        decided = Decision(
            decision=ApprovalDecision(item["decision"]["S"]),
            decided_by=str(item["decided_by"]["S"]),
            decided_at=int(item["decided_at"]["N"]),
            token=str(item["decision_token"]["S"]),
            note=str(item["note"]["S"]) if "note" in item else None,
            proposal=str(item["decided_proposal"]["S"]) if "decided_proposal" in item else None,
        )
    package_digest = item.get("proposal_package")
    proposal: Any = json.loads(item["proposal"]["S"])
    if not isinstance(proposal, dict):
        raise ValueError("an approval's proposal is a JSON object")
    return ApprovalRecord(
        delivery_id=str(item["delivery_id"]["S"]),
        name=str(item["name"]["S"]),
        proposal=proposal,
        requested_at=int(item["requested_at"]["N"]),
        deadline=int(item["deadline"]["N"]),
        decided=decided,
        package_digest=None if package_digest is None else str(package_digest["S"]),
        traceparent=(
            str(item[dynamodb_items.TRACEPARENT]["S"])
            if dynamodb_items.TRACEPARENT in item
            else None
        ),
        requested_at_ns=int(item["requested_at_ns"]["N"]) if "requested_at_ns" in item else None,
    )


class DynamoDbApprovals:
    """The :class:`~functions.core.ports.approvals.ApprovalDecisions` port."""

    def __init__(self, *, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def get(self, delivery_id: str, name: str) -> ApprovalRecord | None:
        item = dynamodb_requests.get(self._client, self._table, approval_key(delivery_id, name))
        return None if item is None else approval_from_item(item)

    def request(self, record: ApprovalRecord, *, expires_at: int) -> bool:
        written = dynamodb_requests.conditional(
            self._client.put_item,
            TableName=self._table,
            Item=approval_to_item(record, expires_at=expires_at),
            ConditionExpression=condition_expression(_NEW),
        )
        return written.written

    def decide(self, delivery_id: str, name: str, decision: Decision) -> bool:
        values = {
            ":decision": {"S": decision.decision.value},
            ":by": {"S": decision.decided_by},
            ":at": {"N": str(decision.decided_at)},
            ":token": {"S": decision.token},
        }
        update = "SET decision = :decision, decided_by = :by, decided_at = :at,"
        update += " decision_token = :token"
        if decision.note:
            values[":note"] = {"S": decision.note}
            update += ", note = :note"
        condition = _UNDECIDED
        if decision.decision is ApprovalDecision.EXPIRED:
            condition += _TIMED_OUT
        else:
            condition += _IN_TIME
        if decision.proposal is not None:
            values[":proposal"] = {"S": decision.proposal}
            update += ", decided_proposal = :proposal"
            condition += _NAMED_PROPOSAL
        move = _INBOX_MOVES[decision.decision]
        extra = {} if move is transitions.APPROVE else {"error": decision.decision.error_code}
        inbox = transitions.update_request(
            self._table, move, delivery_id, now=decision.decided_at, approval=name, **extra
        )
        actions: list[TransactWriteItemTypeDef] = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": approval_key(delivery_id, name),
                    "UpdateExpression": update,
                    "ConditionExpression": condition_expression(condition),
                    "ExpressionAttributeValues": values,
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": inbox["Key"],
                    "UpdateExpression": inbox["UpdateExpression"],
                    "ConditionExpression": inbox["ConditionExpression"],
                    "ExpressionAttributeNames": inbox["ExpressionAttributeNames"],
                    "ExpressionAttributeValues": inbox["ExpressionAttributeValues"],
                }
            },
        ]
        try:
            self._client.transact_write_items(
                TransactItems=actions, ClientRequestToken=decision.token
            )
        except ClientError as exc:
            if condition_failed(exc, action=0) or condition_failed(exc, action=1):
                return False
            raise storage_error(exc) from exc
        except BotoCoreError as exc:
            raise storage_error(exc) from exc
        return True

    def waiting_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
        """The parked items from ``start``, a query page of one index shard at a time
        (each read consistently); items no longer parked are left out."""
        pages = dynamodb_state_index.label_pages(
            self._client,
            self._table,
            label=table_layout.STATE_LABEL_AWAITING_APPROVAL,
            start=dynamodb_pass_cursor.inbox_position(start),
            changed_before=_EVER,
            page_size=page_size,
        )
        for items, resume in pages:
            parked = (dynamodb_items.inbox_from_item(item) for item in items)
            yield OpenPage(
                items=[i for i in parked if i.state is State.AWAITING_APPROVAL],
                resume=dynamodb_pass_cursor.inbox_cursor(resume),
            )

    def waiting_cursor(self) -> OpenCursor | None:
        """Where the last run left the reconciler's pass over the parked items."""
        return dynamodb_pass_cursor.inbox_cursor(
            dynamodb_pass_cursor.load(
                self._client, self._table, sort_key=table_layout.WAITING_CURSOR_SORT_KEY
            )
        )

    def save_waiting_cursor(self, cursor: OpenCursor | None) -> None:
        dynamodb_pass_cursor.save(
            self._client,
            self._table,
            sort_key=table_layout.WAITING_CURSOR_SORT_KEY,
            position=dynamodb_pass_cursor.inbox_position(cursor),
        )

    def waiting_since(self) -> int | None:
        """When the delivery parked longest ago was parked: the first entry of each
        shard (the index orders a shard by when each entry joined the label)."""
        return dynamodb_state_index.oldest_listed(
            self._client, self._table, label=table_layout.STATE_LABEL_AWAITING_APPROVAL
        )

    def waiting(self, *, page_size: int) -> Iterator[InboxItem]:
        label = table_layout.STATE_LABEL_AWAITING_APPROVAL
        for shard in dynamodb_items.all_state_shards(label):
            for item in dynamodb_state_index.query_shard(
                self._client, self._table, shard=shard, changed_before=_EVER, page_size=page_size
            ):
                inbox = dynamodb_items.inbox_from_item(item)
                if inbox.state is State.AWAITING_APPROVAL:
                    yield inbox
