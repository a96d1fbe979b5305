"""The effect ledger's records in DynamoDB (``pk`` = delivery id, ``sk`` = ``effect#<name>``).

While an effect is only *intended*, its record is listed in the state index under
``effect_intent#NN``; the done write, and a resolution (by the ledger when the effect
says it was not applied, or by an operator), remove it from the index, so the index
holds exactly the effects whose outcome is uncertain or in flight. A repeatable effect
has no record here: the completion marks it done on the inbox item
(:data:`~functions.core.adapters.dynamodb_items.EFFECTS_DONE`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from functions.core import table_layout
from functions.core.adapters import (
    dynamodb_items,
    dynamodb_pass_cursor,
    dynamodb_requests,
    dynamodb_state_index,
)
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.errors import TransientError
from functions.core.ports.effects import EffectRecord, EffectStatus
from functions.core.ports.recovery import IntentCursor, IntentPage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

_NEW_INTENT: Condition = (
    (
        "attribute_not_exists(pk) OR #status = :not_applied",
        "an intent or done record is never overwritten; one certainly not applied is"
        " as good as none",
    ),
)
_RECORDED: Condition = (
    ("attribute_exists(pk)", "a done record completes an intent written before"),
)
_UNFLAGGED_INTENT: Condition = (
    ("#status = :intent", "a done effect needs no operator"),
    ("attribute_not_exists(flagged_at)", "flag (and count) each uncertain effect once"),
)
_IN_DOUBT: Condition = (
    ("#status = :intent", "only an effect in doubt is resolved; a done one stays done"),
)
# Leaving the in-doubt list: out of the index, no longer an operator's case.
_UNLISTED: str = "REMOVE #shard, #changed, flagged_at"
_INDEX_NAMES: dict[str, str] = {
    "#status": "status",
    "#shard": table_layout.STATE_INDEX_PARTITION_KEY,
    "#changed": table_layout.STATE_INDEX_SORT_KEY,
}


# The token of the attempt that wrote an intent (records from before it have none).
_ATTEMPT = "attempt"


def effect_key(delivery_id: str, name: str) -> dynamodb_items.Item:
    return dynamodb_items.key(delivery_id, table_layout.SK_EFFECT_PREFIX + name)


def effect_from_item(item: dynamodb_items.Item) -> EffectRecord:
    def number(attribute: str) -> int | None:
        value = item.get(attribute)
        return None if value is None else int(value["N"])

    return EffectRecord(
        delivery_id=str(item["delivery_id"]["S"]),
        name=str(item["name"]["S"]),
        status=EffectStatus(item["status"]["S"]),
        key=str(item["idempotency_key"]["S"]),
        intent_at=int(item["intent_at"]["N"]),
        done_at=number("done_at"),
        flagged_at=number("flagged_at"),
        attempt=str(item.get(_ATTEMPT, {}).get("S", "")),
    )


def _record_item(
    delivery_id: str, name: str, *, status: EffectStatus, key: str, intent_at: int
) -> dynamodb_items.Item:
    return {
        **effect_key(delivery_id, name),
        table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_EFFECT},
        "delivery_id": {"S": delivery_id},
        "name": {"S": name},
        "status": {"S": status.value},
        "idempotency_key": {"S": key},
        "intent_at": {"N": str(intent_at)},
    }


class DynamoDbEffects:
    """The :class:`~functions.core.ports.effects.EffectStore` port, plus the reconciler's view."""

    def __init__(self, *, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def get(self, delivery_id: str, name: str) -> EffectRecord | None:
        item = dynamodb_requests.get(self._client, self._table, effect_key(delivery_id, name))
        return None if item is None else effect_from_item(item)

    def record_intent(
        self,
        delivery_id: str,
        name: str,
        *,
        key: str,
        now: int,
        expires_at: int,
        attempt: str = "",
    ) -> bool:
        item = _record_item(delivery_id, name, status=EffectStatus.INTENT, key=key, intent_at=now)
        if attempt:
            item[_ATTEMPT] = {"S": attempt}
        item[table_layout.STATE_INDEX_PARTITION_KEY] = {
            "S": dynamodb_items.state_shard(table_layout.STATE_LABEL_EFFECT_INTENT, delivery_id)
        }
        item[table_layout.STATE_INDEX_SORT_KEY] = {"N": str(now)}
        if expires_at:
            item[table_layout.TTL_ATTRIBUTE] = {"N": str(expires_at)}
        return dynamodb_requests.conditional(
            self._client.put_item,
            TableName=self._table,
            Item=item,
            ConditionExpression=condition_expression(_NEW_INTENT),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":not_applied": {"S": EffectStatus.NOT_APPLIED.value}},
        ).written

    def record_done(self, delivery_id: str, name: str, *, now: int) -> None:
        if not self._unlist(delivery_id, name, EffectStatus.DONE, "done_at", _RECORDED, now=now):
            raise TransientError("effect_conflict")  # the intent vanished under us

    def resolve_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        """An operator found the effect applied: done. False if it is not in doubt."""
        return self._unlist(delivery_id, name, EffectStatus.DONE, "done_at", _IN_DOUBT, now=now)

    def resolve_not_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        """The effect certainly did not happen (the ledger, or an operator, knows): the
        next attempt applies it as new. False if it is not in doubt."""
        return self._unlist(
            delivery_id, name, EffectStatus.NOT_APPLIED, "cleared_at", _IN_DOUBT, now=now
        )

    def _unlist(
        self,
        delivery_id: str,
        name: str,
        status: EffectStatus,
        stamp: str,
        condition: Condition,
        *,
        now: int,
    ) -> bool:
        """Move the record to ``status`` (time in ``stamp``) and out of the index."""
        expression = condition_expression(condition)
        values = {":status": {"S": status.value}, ":now": {"N": str(now)}}
        if ":intent" in expression:
            values[":intent"] = {"S": EffectStatus.INTENT.value}
        return dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=effect_key(delivery_id, name),
            UpdateExpression=f"SET #status = :status, {stamp} = :now {_UNLISTED}",
            ConditionExpression=expression,
            ExpressionAttributeNames=_INDEX_NAMES,
            ExpressionAttributeValues=values,
        ).written

    def uncertain(self, *, intended_before: int, page_size: int) -> Iterator[EffectRecord]:
        """Intents older than ``intended_before`` that no one has flagged yet (lazily)."""
        pages = self.uncertain_pages(
            start=None, intended_before=intended_before, page_size=page_size
        )
        return (record for page in pages for record in page.items)

    def uncertain_pages(
        self, *, start: IntentCursor | None, intended_before: int, page_size: int
    ) -> Iterator[IntentPage]:
        """Unflagged intents older than ``intended_before`` from ``start``, a query page
        of one index shard at a time (each read consistently)."""
        pages = dynamodb_state_index.label_pages(
            self._client,
            self._table,
            label=table_layout.STATE_LABEL_EFFECT_INTENT,
            start=_position(start),
            changed_before=intended_before,
            page_size=page_size,
            unflagged=True,
        )
        for items, resume in pages:
            yield IntentPage(
                items=[effect_from_item(item) for item in items], resume=_cursor(resume)
            )

    def intent_cursor(self) -> IntentCursor | None:
        """Where the last run left the pass over the intents (a consistent read)."""
        return _cursor(
            dynamodb_pass_cursor.load(
                self._client, self._table, sort_key=table_layout.INTENT_CURSOR_SORT_KEY
            )
        )

    def save_intent_cursor(self, cursor: IntentCursor | None) -> None:
        """Keep where the pass over the intents resumes."""
        dynamodb_pass_cursor.save(
            self._client,
            self._table,
            sort_key=table_layout.INTENT_CURSOR_SORT_KEY,
            position=_position(cursor),
        )

    def flag(self, record: EffectRecord, *, now: int) -> bool:
        """Mark an uncertain effect as handed to an operator; False if done or flagged."""
        return dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=effect_key(record.delivery_id, record.name),
            UpdateExpression="SET flagged_at = :now",
            ConditionExpression=condition_expression(_UNFLAGGED_INTENT),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":intent": {"S": EffectStatus.INTENT.value},
                ":now": {"N": str(now)},
            },
        ).written


def _position(cursor: IntentCursor | None) -> dynamodb_pass_cursor.Position | None:
    if cursor is None:
        return None
    if cursor.after is None:
        return dynamodb_pass_cursor.Position(cursor.shard)
    listed_at, delivery_id, name = cursor.after
    sort_key = table_layout.SK_EFFECT_PREFIX + name
    return dynamodb_pass_cursor.Position(cursor.shard, (listed_at, delivery_id, sort_key))


def _cursor(position: dynamodb_pass_cursor.Position | None) -> IntentCursor | None:
    if position is None:
        return None
    if position.after is None:
        return IntentCursor(position.shard)
    listed_at, delivery_id, sort_key = position.after
    return IntentCursor(
        position.shard,
        (listed_at, delivery_id, sort_key.removeprefix(table_layout.SK_EFFECT_PREFIX)),
    )
