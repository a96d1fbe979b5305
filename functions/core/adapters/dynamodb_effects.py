"""The effect ledger's records in DynamoDB (``pk`` = delivery id, ``sk`` = ``effect#<name>``).

While an effect is only *intended*, its record is listed in the ``by_state`` index
under ``effect_intent#NN``; the done write removes it from the index, so the index
holds exactly the effects whose outcome is uncertain or in flight.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import names
from functions.core.adapters import dynamodb_items, dynamodb_state_index
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.adapters.dynamodb_errors import condition_failed, storage_error
from functions.core.effects import EffectRecord, EffectStatus

_NEW_INTENT: Condition = (
    ("attribute_not_exists(pk)", "an existing record (intent or done) is never overwritten"),
)
_RECORDED: Condition = (
    ("attribute_exists(pk)", "a done record completes an intent written before"),
)
_UNFLAGGED_INTENT: Condition = (
    ("#status = :intent", "a done effect needs no operator"),
    ("attribute_not_exists(flagged_at)", "flag (and count) each uncertain effect once"),
)


def effect_key(delivery_id: str, name: str) -> dynamodb_items.Item:
    return dynamodb_items.key(delivery_id, names.SK_EFFECT_PREFIX + name)


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
    )


class DynamoDbEffects:
    """The :class:`~functions.core.effects.EffectStore` port, plus the reconciler's view."""

    def __init__(self, *, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def get(self, delivery_id: str, name: str) -> EffectRecord | None:
        try:
            response = self._client.get_item(
                TableName=self._table, Key=effect_key(delivery_id, name), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise storage_error(exc) from exc
        item = response.get("Item")
        return None if item is None else effect_from_item(item)

    def record_intent(
        self, delivery_id: str, name: str, *, key: str, now: int, expires_at: int
    ) -> bool:
        item: dynamodb_items.Item = {
            **effect_key(delivery_id, name),
            names.KIND_ATTRIBUTE: {"S": names.KIND_EFFECT},
            "delivery_id": {"S": delivery_id},
            "name": {"S": name},
            "status": {"S": EffectStatus.INTENT.value},
            "idempotency_key": {"S": key},
            "intent_at": {"N": str(now)},
            names.STATE_INDEX_PARTITION_KEY: {
                "S": dynamodb_items.state_shard(names.STATE_LABEL_EFFECT_INTENT, delivery_id)
            },
            names.STATE_INDEX_SORT_KEY: {"N": str(now)},
        }
        if expires_at:
            item[names.TTL_ATTRIBUTE] = {"N": str(expires_at)}
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=condition_expression(_NEW_INTENT),
            )
        except ClientError as exc:
            if condition_failed(exc) is not None:
                return False
            raise storage_error(exc) from exc
        except BotoCoreError as exc:
            raise storage_error(exc) from exc
        return True

    def record_done(self, delivery_id: str, name: str, *, now: int) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=effect_key(delivery_id, name),
                UpdateExpression=(
                    "SET #status = :done, done_at = :now REMOVE #shard, #changed, flagged_at"
                ),
                ConditionExpression=condition_expression(_RECORDED),
                ExpressionAttributeNames={
                    "#status": "status",
                    "#shard": names.STATE_INDEX_PARTITION_KEY,
                    "#changed": names.STATE_INDEX_SORT_KEY,
                },
                ExpressionAttributeValues={
                    ":done": {"S": EffectStatus.DONE.value},
                    ":now": {"N": str(now)},
                },
            )
        except (ClientError, BotoCoreError) as exc:
            raise storage_error(exc) from exc

    def uncertain(self, *, intended_before: int, page_size: int) -> Iterator[EffectRecord]:
        """Intents older than ``intended_before`` that no one has flagged yet (lazily)."""
        items = dynamodb_state_index.query_index(
            self._client,
            self._table,
            label=names.STATE_LABEL_EFFECT_INTENT,
            changed_before=intended_before,
            unflagged=True,
            page_size=page_size,
        )
        return (effect_from_item(item) for item in items)

    def flag(self, record: EffectRecord, *, now: int) -> bool:
        """Mark an uncertain effect as handed to an operator; False if done or flagged."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=effect_key(record.delivery_id, record.name),
                UpdateExpression="SET flagged_at = :now",
                ConditionExpression=condition_expression(_UNFLAGGED_INTENT),
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":intent": {"S": EffectStatus.INTENT.value},
                    ":now": {"N": str(now)},
                },
            )
        except ClientError as exc:
            if condition_failed(exc) is not None:
                return False
            raise storage_error(exc) from exc
        except BotoCoreError as exc:
            raise storage_error(exc) from exc
        return True
