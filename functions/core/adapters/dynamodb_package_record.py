"""A delivery's package record in DynamoDB: attributes of the delivery's inbox item.

The worker already holds the inbox item (its claim is written there), so the package is
recorded by one conditional update of that item: the condition that the writer still
holds the claim and that no package is kept yet is checked in the same write. One
single-item write costs 1 write unit while the item stays under 1 KB; the former
record of its own cost a two-item transaction (a check of the claim and a put, 2 units
each). A large package's content is an object in the steps' object store, named by its
digest (:mod:`functions.core.package_record`), so the item stays small. For a workflow
without effects this module's write is not made: the completion sets the same
attributes (:func:`package_attributes`) in its own update, at no unit of its own.

The record shares the inbox item's retention (``expires_at``): it is the default
workflow's archive (docs/workflows.md). Records written by earlier versions, an item
of their own (``sk`` = ``package``), are still read and noted on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_requests
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.claim import Claim, ClaimLost
from functions.core.errors import TransientError
from functions.core.models import State
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.steps import StoredResult

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

# The record's attributes on the inbox item (short names: every byte of the item is
# billed again by each later write of it).
DIGEST: Final = "pkg_sha256"
CONTENT: Final = "pkg_content"
SIZE: Final = "pkg_size"
RECORDED_AT: Final = "pkg_at"
RECORDED_BY: Final = "pkg_by"
REFETCHED_DIGEST: Final = "pkg_refetched_sha256"
REFETCHED_AT: Final = "pkg_refetched_at"

_HOLDER_AND_FIRST: Condition = (
    ("#state = :processing", "only a running attempt fetches: a finished one records nothing"),
    (
        "lease_owner = :owner",
        "an attempt whose lease ran out must not record its package over its successor's",
    ),
    (f"attribute_not_exists({DIGEST})", "the first package wins: an attempt may run on it"),
)
_KEPT: Condition = (("attribute_exists(pk)", "a refetch is noted on a kept record only"),)
_KEPT_HERE: Condition = ((f"attribute_exists({DIGEST})", "a refetch is noted on a kept record"),)


def package_key(delivery_id: str) -> dynamodb_items.Item:
    """The key of a record written by an earlier version (an item of its own)."""
    return dynamodb_items.key(delivery_id, table_layout.SK_PACKAGE)


def package_from_item(item: dynamodb_items.Item) -> PackageRecord | None:
    """The package record an inbox item holds (or an earlier version's record item)."""
    if DIGEST in item:
        return _record(item, DIGEST, CONTENT, SIZE, RECORDED_AT, RECORDED_BY, REFETCHED_DIGEST)
    if "package_sha256" in item:  # an earlier version's item of its own
        return _record(
            item,
            "package_sha256",
            "content",
            "content_size",
            "recorded_at",
            "recorded_by",
            "refetched_sha256",
        )
    return None


def _record(  # noqa: PLR0917 (the attribute names of one of the two shapes)
    item: dynamodb_items.Item,
    digest: str,
    content: str,
    size: str,
    recorded_at: str,
    recorded_by: str,
    refetched: str,
) -> PackageRecord:
    refetched_at = REFETCHED_AT if refetched == REFETCHED_DIGEST else "refetched_at"
    return PackageRecord(
        delivery_id=str(item[table_layout.TABLE_PARTITION_KEY]["S"]),
        digest=str(item[digest]["S"]),
        content=StoredResult(
            size=int(item[size]["N"]),
            inline=item[content]["S"] if content in item else None,
            digest=None if content in item else str(item[digest]["S"]),
        ),
        recorded_at=int(item[recorded_at]["N"]),
        recorded_by=str(item[recorded_by]["S"]),
        refetched_digest=item[refetched]["S"] if refetched in item else None,
        refetched_at=int(item[refetched_at]["N"]) if refetched_at in item else None,
    )


def package_attributes(record: PackageRecord) -> dynamodb_items.Item:
    """The attributes the record adds to the inbox item."""
    attributes: dynamodb_items.Item = {
        DIGEST: {"S": record.digest},
        SIZE: {"N": str(record.content.size)},
        RECORDED_AT: {"N": str(record.recorded_at)},
        RECORDED_BY: {"S": record.recorded_by},
    }
    if record.content.inline is not None:
        attributes[CONTENT] = {"S": record.content.inline}
    return attributes


class DynamoDbPackageRecords:
    """The :class:`~functions.core.ports.package_record.PackageRecordStore` port."""

    def __init__(self, *, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def get(self, delivery_id: str) -> PackageRecord | None:
        inbox = dynamodb_requests.get(
            self._client, self._table, dynamodb_items.inbox_key(delivery_id)
        )
        if inbox is None:
            return None
        kept = package_from_item(inbox)
        if kept is not None or int(inbox.get("attempts", {"N": "0"})["N"]) <= 1:
            return kept  # a first attempt: no earlier one can have recorded anything
        earlier = dynamodb_requests.get(self._client, self._table, package_key(delivery_id))
        return None if earlier is None else package_from_item(earlier)

    def record(
        self,
        claim: Claim,
        record: PackageRecord,
        *,
        expires_at: int,  # unused: the inbox item's own retention applies
    ) -> PackageRecord | None:
        attributes = package_attributes(record)
        values = {f":{name}": value for name, value in attributes.items()}
        written = dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=dynamodb_items.inbox_key(claim.delivery_id),
            UpdateExpression="SET " + ", ".join(f"{name} = :{name}" for name in attributes),
            ConditionExpression=condition_expression(_HOLDER_AND_FIRST),
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                **values,
                ":processing": {"S": State.PROCESSING.value},
                ":owner": {"S": claim.owner},
            },
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if written.written:
            return None
        stored = written.item
        holds = (
            stored is not None
            and stored.get("state", {}).get("S") == State.PROCESSING.value
            and stored.get("lease_owner", {}).get("S") == claim.owner
        )
        if not holds or stored is None:
            raise ClaimLost()  # nothing was written: the claim is checked first
        first = package_from_item(stored)
        if first is None:  # the condition's last clause refused: a package is kept
            raise TransientError("package_record_conflict")  # yet none is: changed under us
        return first

    def record_refetch(self, delivery_id: str, *, digest: str, now: int) -> None:
        noted = dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=dynamodb_items.inbox_key(delivery_id),
            UpdateExpression=f"SET {REFETCHED_DIGEST} = :digest, {REFETCHED_AT} = :now",
            ConditionExpression=condition_expression(_KEPT_HERE),
            ExpressionAttributeValues={":digest": {"S": digest}, ":now": {"N": str(now)}},
        )
        if noted.written:
            return
        dynamodb_requests.conditional(  # an earlier version's record item
            self._client.update_item,
            TableName=self._table,
            Key=package_key(delivery_id),
            UpdateExpression="SET refetched_sha256 = :digest, refetched_at = :now",
            ConditionExpression=condition_expression(_KEPT),
            ExpressionAttributeValues={":digest": {"S": digest}, ":now": {"N": str(now)}},
        )
