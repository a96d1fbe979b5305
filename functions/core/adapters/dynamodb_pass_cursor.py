"""Where a reconciler pass over one label of the state index resumes, kept in DynamoDB.

Each pass (the open items, the uncertain effect intents, the parked deliveries) keeps
one item beside the watermark (``pk`` = ``reconciler``, ``sk`` = the pass's cursor
key): the index shard it is in and the last entry it worked off there. Written by an
update, not a put: the reconciler's role holds no PutItem. A save sets, never adds: one
whose answer was lost was applied (the next run goes on after its page) or was not
(the next run reads that page again; every action is a conditional write), so nothing
is skipped either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_requests
from functions.core.adapters.dynamodb_errors import storage_error
from functions.core.ports.recovery import OpenCursor

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

_SHARD = "cursor_shard"
_LISTED_AT = "cursor_listed_at"
_ID = "cursor_id"  # the entry's partition key: a delivery id
# The entry's sort key (which record of the delivery). Absent on cursors saved before
# passes other than the open one had a cursor: those are all inbox items.
_RECORD = "cursor_record"


@dataclass(frozen=True, slots=True)
class Position:
    """A shard of the label (its number), and the entry after which to continue there:
    ``(listed_at, pk, sk)``; None: the shard's start."""

    shard: int
    after: tuple[int, str, str] | None = None

    def start_key(self, label: str) -> dynamodb_items.Item | None:
        """The index key of the entry ``after`` names (a Query's ExclusiveStartKey)."""
        if self.after is None:
            return None
        listed_at, partition, sort = self.after
        return {
            table_layout.STATE_INDEX_PARTITION_KEY: {"S": _shard_name(label, self.shard)},
            table_layout.STATE_INDEX_SORT_KEY: {"N": str(listed_at)},
            **dynamodb_items.key(partition, sort),
        }


def entry_after(shard: int, last: dynamodb_items.Item) -> Position:
    """The position just after ``last`` (a page's ``LastEvaluatedKey``) in ``shard``."""
    return Position(
        shard,
        (
            int(last[table_layout.STATE_INDEX_SORT_KEY]["N"]),
            str(last[table_layout.TABLE_PARTITION_KEY]["S"]),
            str(last[table_layout.TABLE_SORT_KEY]["S"]),
        ),
    )


def load(client: DynamoDBClient, table: str, *, sort_key: str) -> Position | None:
    """The pass's saved position (a consistent read); None: at its start."""
    item = dynamodb_requests.get(client, table, _key(sort_key))
    if item is None or _SHARD not in item:
        return None
    if _LISTED_AT not in item:
        return Position(int(item[_SHARD]["N"]))
    record = str(item[_RECORD]["S"]) if _RECORD in item else table_layout.SK_INBOX
    after = (int(item[_LISTED_AT]["N"]), str(item[_ID]["S"]), record)
    return Position(int(item[_SHARD]["N"]), after)


def save(client: DynamoDBClient, table: str, *, sort_key: str, position: Position | None) -> None:
    """Keep where the pass resumes (None: at its start)."""
    names = {"#kind": table_layout.KIND_ATTRIBUTE}
    values: dict[str, Any] = {":kind": {"S": table_layout.KIND_CURSOR}}
    every = f"{_SHARD}, {_LISTED_AT}, {_ID}, {_RECORD}"
    if position is None:
        update = f"SET #kind = :kind REMOVE {every}"
    elif position.after is None:
        update = f"SET #kind = :kind, {_SHARD} = :shard REMOVE {_LISTED_AT}, {_ID}, {_RECORD}"
        values[":shard"] = {"N": str(position.shard)}
    else:
        update = (
            f"SET #kind = :kind, {_SHARD} = :shard, {_LISTED_AT} = :at, {_ID} = :id,"
            f" {_RECORD} = :record"
        )
        listed_at, partition, sort = position.after
        values[":shard"] = {"N": str(position.shard)}
        values[":at"] = {"N": str(listed_at)}
        values[":id"] = {"S": partition}
        values[":record"] = {"S": sort}
    try:
        client.update_item(
            TableName=table,
            Key=_key(sort_key),
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
    except (ClientError, BotoCoreError) as exc:
        raise storage_error(exc) from exc


def inbox_position(cursor: OpenCursor | None) -> Position | None:
    """Where a pass over a label of inbox items resumes, as the index keys it."""
    if cursor is None:
        return None
    if cursor.after is None:
        return Position(cursor.shard)
    listed_at, delivery_id = cursor.after
    return Position(cursor.shard, (listed_at, delivery_id, table_layout.SK_INBOX))


def inbox_cursor(position: Position | None) -> OpenCursor | None:
    """The cursor of a pass over a label of inbox items at ``position``."""
    if position is None:
        return None
    if position.after is None:
        return OpenCursor(position.shard)
    listed_at, delivery_id, _inbox = position.after
    return OpenCursor(position.shard, (listed_at, delivery_id))


def _key(sort_key: str) -> dynamodb_items.Item:
    return dynamodb_items.key(table_layout.WATERMARK_PARTITION, sort_key)


def _shard_name(label: str, shard: int) -> str:
    return dynamodb_items.all_state_shards(label)[shard]
