"""Listing the sparse, keys-only state index: what the reconciler and operators look at.

The index holds keys only (``pk``, ``sk``, ``state_shard``, ``listed_at``), so a
listing is a Query per shard for keys, then one consistent ``BatchGetItem`` per page
for the items themselves. The items read are checked again against the listing (the
index is eventually consistent: an item may have left the label meanwhile), and the
filters (an expired lease, an unflagged intent) run on them, not on the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_errors import storage_error
from functions.core.errors import StorageUnavailable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

# BatchGetItem's maximum keys per request, and how often the keys it left unprocessed
# (throttled) are asked for again before the listing gives up as storage weather.
_BATCH_GET_KEYS: Final = 100
_BATCH_GET_ROUNDS: Final = 4


def query_shard(
    client: DynamoDBClient,
    table: str,
    *,
    shard: str,
    changed_before: int,
    changed_since: int | None = None,
    expired_at: int | None = None,
    unflagged: bool = False,
    page_size: int | None = None,
) -> Iterator[dynamodb_items.Item]:
    """Items still listed in one index shard, listed before ``changed_before`` (and,
    given ``changed_since``, at or after it).

    Read lazily, one query page (``page_size`` keys, or 1 MB) at a time; each page's
    items are read consistently. ``expired_at``: only items whose ``lease_until`` is at
    or before it; ``unflagged``: only items without ``flagged_at``.
    """
    keep = _filter(
        shard,
        changed_before,
        changed_since=changed_since,
        expired_at=expired_at,
        unflagged=unflagged,
    )
    for keys in query_keys(
        client,
        table,
        shard=shard,
        changed_before=changed_before,
        changed_since=changed_since,
        page_size=page_size,
    ):
        yield from (item for item in read_items(client, table, keys) if keep(item))


def query_keys(
    client: DynamoDBClient,
    table: str,
    *,
    shard: str,
    changed_before: int,
    changed_since: int | None = None,
    page_size: int | None = None,
) -> Iterator[list[dynamodb_items.Item]]:
    """The table keys one index shard lists before ``changed_before`` (and at or after
    ``changed_since``), page by page."""
    if changed_since is not None and changed_since >= changed_before:
        return  # an empty window (DynamoDB refuses a BETWEEN whose ends are reversed)
    values: dict[str, Any] = {":shard": {"S": shard}}
    if changed_since is None:
        window = "#listed < :before"
        values[":before"] = {"N": str(changed_before)}
    else:  # BETWEEN includes both ends
        window = "#listed BETWEEN :since AND :last"
        values[":since"] = {"N": str(changed_since)}
        values[":last"] = {"N": str(changed_before - 1)}
    arguments: dict[str, Any] = {
        "TableName": table,
        "IndexName": table_layout.STATE_INDEX,
        "KeyConditionExpression": f"#shard = :shard AND {window}",
        "ExpressionAttributeNames": {
            "#shard": table_layout.STATE_INDEX_PARTITION_KEY,
            "#listed": table_layout.STATE_INDEX_SORT_KEY,
        },
        "ExpressionAttributeValues": values,
    }
    if page_size is not None:
        arguments["Limit"] = page_size
    while True:
        try:
            response = client.query(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise storage_error(exc) from exc
        keys = [_table_key(entry) for entry in response.get("Items", [])]
        if keys:
            yield keys
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        arguments["ExclusiveStartKey"] = last


def read_items(
    client: DynamoDBClient, table: str, keys: list[dynamodb_items.Item]
) -> list[dynamodb_items.Item]:
    """The items under ``keys`` that still exist, read consistently, in the keys' order."""
    found: dict[tuple[str, str], dynamodb_items.Item] = {}
    for start in range(0, len(keys), _BATCH_GET_KEYS):
        wanted: list[dynamodb_items.Item] = keys[start : start + _BATCH_GET_KEYS]
        for _round in range(_BATCH_GET_ROUNDS):
            if not wanted:
                break
            try:
                response = client.batch_get_item(
                    RequestItems={table: {"Keys": wanted, "ConsistentRead": True}}
                )
            except (ClientError, BotoCoreError) as exc:
                raise storage_error(exc) from exc
            for item in response.get("Responses", {}).get(table, []):
                found[_identity(item)] = item
            # Throttled keys come back unprocessed: ask again for exactly those.
            unprocessed = response.get("UnprocessedKeys", {}).get(table)
            wanted = [] if unprocessed is None else list(unprocessed.get("Keys", []))
        if wanted:
            raise StorageUnavailable()  # still throttled: the caller's retry reads again
    return [found[identity] for identity in map(_identity, keys) if identity in found]


def query_index(
    client: DynamoDBClient,
    table: str,
    *,
    label: str,
    changed_before: int,
    changed_since: int | None = None,
    unflagged: bool = False,
    page_size: int | None = None,
) -> Iterator[dynamodb_items.Item]:
    """Every item listed under ``label`` in the state index, listed before
    ``changed_before`` (and at or after ``changed_since``)."""
    for shard in dynamodb_items.all_state_shards(label):
        yield from query_shard(
            client,
            table,
            shard=shard,
            changed_before=changed_before,
            changed_since=changed_since,
            unflagged=unflagged,
            page_size=page_size,
        )


def _filter(
    shard: str,
    changed_before: int,
    *,
    changed_since: int | None,
    expired_at: int | None,
    unflagged: bool,
) -> Callable[[dynamodb_items.Item], bool]:
    def keep(item: dynamodb_items.Item) -> bool:
        listed = item.get(table_layout.STATE_INDEX_SORT_KEY)
        if item.get(table_layout.STATE_INDEX_PARTITION_KEY) != {"S": shard} or listed is None:
            return False  # left the label since the index listed it
        if not (changed_since or 0) <= int(listed["N"]) < changed_before:
            return False  # listed again since, outside the window asked for
        if expired_at is not None:
            lease = item.get("lease_until")
            if lease is None or int(lease["N"]) > expired_at:
                return False
        return not (unflagged and "flagged_at" in item)

    return keep


def _table_key(entry: dynamodb_items.Item) -> dynamodb_items.Item:
    return {
        name: entry[name]
        for name in (table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY)
    }


def _identity(item: dynamodb_items.Item) -> tuple[str, str]:
    return (
        str(item[table_layout.TABLE_PARTITION_KEY]["S"]),
        str(item[table_layout.TABLE_SORT_KEY]["S"]),
    )
