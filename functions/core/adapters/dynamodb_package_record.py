"""A delivery's package record in DynamoDB (``pk`` = delivery id, ``sk`` = ``package``).

It sits beside the delivery's step and effect records and shares their retention
(``expires_at``). It is written once, in one transaction with a check that the writer
still holds the delivery's claim; a large package's content is an object in the steps'
object store, named by its digest (:mod:`functions.core.package_record`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_requests
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.adapters.dynamodb_errors import condition_failed, storage_error
from functions.core.claim import Claim, ClaimLost
from functions.core.errors import TransientError
from functions.core.models import State
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.steps import StoredResult

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

_HOLDER: Condition = (
    ("#state = :processing", "only a running attempt fetches: a finished one records nothing"),
    (
        "lease_owner = :owner",
        "an attempt whose lease ran out must not record its package over its successor's",
    ),
)
_FIRST: Condition = (
    ("attribute_not_exists(pk)", "the first package wins: an attempt may already run on it"),
)
_KEPT: Condition = (("attribute_exists(pk)", "a refetch is noted on a kept record only"),)
# The transaction's actions, in order: whose refused condition means what.
_CHECK_CLAIM, _PUT_RECORD = 0, 1


def package_key(delivery_id: str) -> dynamodb_items.Item:
    return dynamodb_items.key(delivery_id, table_layout.SK_PACKAGE)


def package_from_item(item: dynamodb_items.Item) -> PackageRecord:
    return PackageRecord(
        delivery_id=str(item["delivery_id"]["S"]),
        digest=str(item["package_sha256"]["S"]),
        content=StoredResult(
            size=int(item["content_size"]["N"]),
            inline=item["content"]["S"] if "content" in item else None,
            digest=None if "content" in item else str(item["package_sha256"]["S"]),
        ),
        recorded_at=int(item["recorded_at"]["N"]),
        recorded_by=str(item["recorded_by"]["S"]),
        refetched_digest=item["refetched_sha256"]["S"] if "refetched_sha256" in item else None,
        refetched_at=int(item["refetched_at"]["N"]) if "refetched_at" in item else None,
    )


def package_to_item(record: PackageRecord, *, expires_at: int) -> dynamodb_items.Item:
    item: dynamodb_items.Item = {
        **package_key(record.delivery_id),
        table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_PACKAGE},
        "delivery_id": {"S": record.delivery_id},
        "package_sha256": {"S": record.digest},
        "content_size": {"N": str(record.content.size)},
        "recorded_at": {"N": str(record.recorded_at)},
        "recorded_by": {"S": record.recorded_by},
    }
    if record.content.inline is not None:
        item["content"] = {"S": record.content.inline}
    if expires_at:
        item[table_layout.TTL_ATTRIBUTE] = {"N": str(expires_at)}
    return item


class DynamoDbPackageRecords:
    """The :class:`~functions.core.ports.package_record.PackageRecordStore` port."""

    def __init__(self, *, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def get(self, delivery_id: str) -> PackageRecord | None:
        item = dynamodb_requests.get(self._client, self._table, package_key(delivery_id))
        return None if item is None else package_from_item(item)

    def record(
        self, claim: Claim, record: PackageRecord, *, expires_at: int
    ) -> PackageRecord | None:
        actions: list[TransactWriteItemTypeDef] = [
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": dynamodb_items.inbox_key(claim.delivery_id),
                    "ConditionExpression": condition_expression(_HOLDER),
                    "ExpressionAttributeNames": {"#state": "state"},
                    "ExpressionAttributeValues": {
                        ":processing": {"S": State.PROCESSING.value},
                        ":owner": {"S": claim.owner},
                    },
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": package_to_item(record, expires_at=expires_at),
                    "ConditionExpression": condition_expression(_FIRST),
                }
            },
        ]
        try:
            self._client.transact_write_items(TransactItems=actions)
        except ClientError as exc:
            if condition_failed(exc, action=_CHECK_CLAIM) is not None:
                raise ClaimLost() from exc
            if condition_failed(exc, action=_PUT_RECORD) is not None:
                first = self.get(claim.delivery_id)
                if first is None:
                    raise TransientError("package_record_conflict") from exc  # gone under us
                return first
            raise storage_error(exc) from exc
        except BotoCoreError as exc:
            raise storage_error(exc) from exc
        return None

    def record_refetch(self, delivery_id: str, *, digest: str, now: int) -> None:
        dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=package_key(delivery_id),
            UpdateExpression="SET refetched_sha256 = :digest, refetched_at = :now",
            ConditionExpression=condition_expression(_KEPT),
            ExpressionAttributeValues={":digest": {"S": digest}, ":now": {"N": str(now)}},
        )
