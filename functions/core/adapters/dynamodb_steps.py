"""Step records in DynamoDB (``pk`` = delivery id, ``sk`` = ``step#<name>``).

They sit beside the delivery's ``effect#<name>`` records and share their retention
(``expires_at``). A step record is never listed in the state index (it has no
``state_shard``): a running step needs no one's attention, and staying out spares the
index a write on every run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_requests
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.errors import TransientError
from functions.core.ports.steps import StepRecord, StepStatus, StoredResult

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

SK_STEP_PREFIX: Final = "step#"  # + step name
KIND_STEP: Final = "step"

_STARTABLE: Condition = (
    (
        "attribute_not_exists(pk) OR #status <> :recorded",
        "a recorded result is kept for good: effects may already have used it",
    ),
)
_UNRECORDED: Condition = (
    ("attribute_exists(pk)", "a result completes a run started before"),
    ("#status <> :recorded", "the first result wins: effects may already have used it"),
)
_LATEST_RUN: Condition = (
    ("#status = :started", "a failure ends a running run, never a recorded one"),
    ("#runs = :run", "only the run that failed: a newer run may still be going"),
)
_RECORDED: Final[dynamodb_items.Item] = {":recorded": {"S": StepStatus.RECORDED.value}}


def step_key(delivery_id: str, name: str) -> dynamodb_items.Item:
    return dynamodb_items.key(delivery_id, SK_STEP_PREFIX + name)


def step_from_item(item: dynamodb_items.Item) -> StepRecord:
    result = None
    if "result" in item or "result_sha256" in item:
        result = StoredResult(
            size=int(item["result_size"]["N"]),
            inline=item["result"]["S"] if "result" in item else None,
            digest=item["result_sha256"]["S"] if "result_sha256" in item else None,
        )
    return StepRecord(
        delivery_id=str(item["delivery_id"]["S"]),
        name=str(item["name"]["S"]),
        status=StepStatus(item["status"]["S"]),
        runs=int(item["runs"]["N"]),
        started_at=int(item["started_at"]["N"]),
        recorded_at=int(item["recorded_at"]["N"]) if "recorded_at" in item else None,
        result=result,
        label=item["label"]["S"] if "label" in item else None,
        error=item["error"]["S"] if "error" in item else None,
    )


class DynamoDbSteps:
    """The :class:`~functions.core.ports.steps.StepStore` port."""

    def __init__(self, *, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def get(self, delivery_id: str, name: str) -> StepRecord | None:
        item = dynamodb_requests.get(self._client, self._table, step_key(delivery_id, name))
        return None if item is None else step_from_item(item)

    def start(
        self, delivery_id: str, name: str, *, now: int, expires_at: int, label: str = ""
    ) -> StepRecord | None:
        update = (
            "SET #status = :started, started_at = :now, #kind = :kind,"
            " delivery_id = :delivery_id, #name = :name"
        )
        values: dynamodb_items.Item = {
            ":started": {"S": StepStatus.STARTED.value},
            ":now": {"N": str(now)},
            ":kind": {"S": KIND_STEP},
            ":delivery_id": {"S": delivery_id},
            ":name": {"S": name},
            ":one": {"N": "1"},
            **_RECORDED,
        }
        if expires_at:
            update += f", {table_layout.TTL_ATTRIBUTE} = :expires_at"
            values[":expires_at"] = {"N": str(expires_at)}
        if label:
            update += ", #label = :label"
            values[":label"] = {"S": label}
        written = dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=step_key(delivery_id, name),
            UpdateExpression=update + " REMOVE failed_at, #error ADD #runs :one",
            ConditionExpression=condition_expression(_STARTABLE),
            ExpressionAttributeNames={
                "#status": "status",
                "#kind": table_layout.KIND_ATTRIBUTE,
                "#name": "name",
                "#runs": "runs",
                "#error": "error",
            }
            | ({"#label": "label"} if label else {}),
            ExpressionAttributeValues=values,
            # The record as it was, written or not: the caller learns whether this is a
            # first run, a rerun, or too late (a result is recorded).
            ReturnValues="ALL_OLD",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return None if written.item is None else step_from_item(written.item)

    def record_failed(
        self, delivery_id: str, name: str, *, run: int, now: int, error: str = ""
    ) -> bool:
        values: dynamodb_items.Item = {
            ":failed": {"S": StepStatus.FAILED.value},
            ":started": {"S": StepStatus.STARTED.value},
            ":run": {"N": str(run)},
            ":now": {"N": str(now)},
        }
        update = "SET #status = :failed, failed_at = :now"
        if error:
            update += ", #error = :error"
            values[":error"] = {"S": error}
        names = {"#status": "status", "#runs": "runs"} | ({"#error": "error"} if error else {})
        return dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=step_key(delivery_id, name),
            UpdateExpression=update,
            ConditionExpression=condition_expression(_LATEST_RUN),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        ).written

    def record_result(
        self, delivery_id: str, name: str, *, result: StoredResult, now: int
    ) -> StepRecord | None:
        if result.inline is not None:
            kept, value = "#result", {"S": result.inline}
        elif result.digest is not None:
            kept, value = "#result_sha256", {"S": result.digest}
        else:
            raise ValueError("a stored result is inline or has a digest")
        written = dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=step_key(delivery_id, name),
            UpdateExpression=(
                f"SET #status = :recorded, recorded_at = :now, result_size = :size, {kept} = :kept"
            ),
            ConditionExpression=condition_expression(_UNRECORDED),
            ExpressionAttributeNames={"#status": "status", kept: kept.removeprefix("#")},
            ExpressionAttributeValues={
                ":now": {"N": str(now)},
                ":size": {"N": str(result.size)},
                ":kept": value,
                **_RECORDED,
            },
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if written.written:
            return None
        first = None if written.item is None else step_from_item(written.item)
        if first is None or first.status is not StepStatus.RECORDED:
            raise TransientError("step_conflict")  # the record vanished under us
        return first
