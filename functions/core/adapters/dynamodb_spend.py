"""A delivery's paid calls in DynamoDB (``pk`` = delivery id, ``sk`` = ``spend#model``):
the model's, and the screening guardrail's.

One item per delivery, beside its ``step#`` and ``effect#`` records and sharing their
retention (``expires_at``). Call ids are kept in string sets, so every write is
idempotent by its call id: ``ADD`` to a set is a no-op for an id already in it, and
the tokens are added under the condition that the call's id is not yet in
``answered`` (a resent write whose first answer was lost adds nothing). The item is
never listed in the state index: it needs no one's attention.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_requests
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.spend import ModelSpend

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

SK_SPEND: Final = "spend#model"
KIND_SPEND: Final = "spend"

_NOT_ANSWERED: Condition = (
    ("NOT contains(answered, :id)", "an answered call's tokens are added once per call id"),
)
_GUARDRAIL_NOT_ANSWERED: Condition = (
    (
        "NOT contains(guardrail_answered, :id)",
        "an answered guardrail call's units are added once per call id",
    ),
)


def spend_key(delivery_id: str) -> dynamodb_items.Item:
    return dynamodb_items.key(delivery_id, SK_SPEND)


def spend_from_item(item: dynamodb_items.Item) -> ModelSpend:
    """The spend an item holds: calls sent and not refused, tokens of those answered."""

    def ids(name: str) -> set[str]:
        return set(item[name]["SS"]) if name in item else set()

    def number(name: str) -> int:
        return int(item[name]["N"]) if name in item else 0

    return ModelSpend(
        model_calls=len(ids("calls") - ids("not_run")),
        answered=len(ids("answered")),
        input_tokens=number("input_tokens"),
        output_tokens=number("output_tokens"),
        guardrail_calls=len(ids("guardrail_calls") - ids("not_run")),
        guardrail_answered=len(ids("guardrail_answered")),
        guardrail_text_units=number("guardrail_text_units"),
        guardrail_tokens=number("guardrail_tokens"),
    )


class DynamoDbSpend:
    """The :class:`~functions.core.ports.spend.SpendStore` port."""

    def __init__(self, *, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def sent(self, delivery_id: str, call_id: str, *, expires_at: int) -> None:
        self._sent("calls", delivery_id, call_id, expires_at=expires_at)

    def guardrail_sent(self, delivery_id: str, call_id: str, *, expires_at: int) -> None:
        self._sent("guardrail_calls", delivery_id, call_id, expires_at=expires_at)

    def _sent(self, calls: str, delivery_id: str, call_id: str, *, expires_at: int) -> None:
        update = "SET #kind = :kind, delivery_id = :delivery_id"
        values: dynamodb_items.Item = {
            ":kind": {"S": KIND_SPEND},
            ":delivery_id": {"S": delivery_id},
            ":ids": {"SS": [call_id]},
        }
        if expires_at:
            update += f", {table_layout.TTL_ATTRIBUTE} = :expires_at"
            values[":expires_at"] = {"N": str(expires_at)}
        dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=spend_key(delivery_id),
            UpdateExpression=f"{update} ADD {calls} :ids",
            ExpressionAttributeNames={"#kind": table_layout.KIND_ATTRIBUTE},
            ExpressionAttributeValues=values,
        )

    def not_run(self, delivery_id: str, call_id: str) -> None:
        dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=spend_key(delivery_id),
            UpdateExpression="ADD not_run :ids",
            ExpressionAttributeValues={":ids": {"SS": [call_id]}},
        )

    def answered(
        self, delivery_id: str, call_id: str, *, input_tokens: int, output_tokens: int
    ) -> None:
        # Refused: this call's tokens are counted already (a resent write).
        dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=spend_key(delivery_id),
            UpdateExpression="ADD answered :ids, input_tokens :in, output_tokens :out",
            ConditionExpression=condition_expression(_NOT_ANSWERED),
            ExpressionAttributeValues={
                ":ids": {"SS": [call_id]},
                ":id": {"S": call_id},
                ":in": {"N": str(input_tokens)},
                ":out": {"N": str(output_tokens)},
            },
        )

    def guardrail_answered(
        self, delivery_id: str, call_id: str, *, text_units: int, tokens: int
    ) -> None:
        dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=spend_key(delivery_id),
            UpdateExpression=(
                "ADD guardrail_answered :ids, guardrail_text_units :units, guardrail_tokens :t"
            ),
            ConditionExpression=condition_expression(_GUARDRAIL_NOT_ANSWERED),
            ExpressionAttributeValues={
                ":ids": {"SS": [call_id]},
                ":id": {"S": call_id},
                ":units": {"N": str(text_units)},
                ":t": {"N": str(tokens)},
            },
        )

    def get(self, delivery_id: str) -> ModelSpend | None:
        item = dynamodb_requests.get(self._client, self._table, spend_key(delivery_id))
        return None if item is None else spend_from_item(item)
