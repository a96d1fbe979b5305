"""Listing the sparse, keys-only state index: what the reconciler and operators look at.

The index holds keys only (``pk``, ``sk``, ``state_shard``, ``listed_at``), so a
listing is a Query per shard for keys, then one consistent ``BatchGetItem`` per page
for the items themselves. The items read are checked again against the listing (the
index is eventually consistent: an item may have left the label meanwhile), and the
filters (an expired lease, an unflagged intent) run on them, not on the index.
A count reads no item (``Select=COUNT``); the newest entries of several labels are
merged across their shards by ``listed_at`` (:func:`newest`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_log_state
from functions.core.adapters.dynamodb_errors import storage_error
from functions.core.adapters.dynamodb_pass_cursor import Position, entry_after
from functions.core.errors import StorageUnavailable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

# BatchGetItem's maximum keys per request, and how often the keys it left unprocessed
# (throttled) are asked for again before the listing gives up as storage weather.
_BATCH_GET_KEYS: Final = 100
_BATCH_GET_ROUNDS: Final = 4
# Later than any listing time (epoch seconds): a window that ends here holds every entry.
_END_OF_TIME: Final = 2**40


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
    arguments = _window_query(table, shard, changed_before, changed_since)
    if arguments is None:
        return
    if page_size is not None:
        arguments["Limit"] = page_size
    for response in _pages(client, arguments):
        keys = [table_key(entry) for entry in response.get("Items", [])]
        if keys:
            yield keys


def key_pages(
    client: DynamoDBClient,
    table: str,
    *,
    shard: str,
    changed_before: int,
    page_size: int,
    start_key: dynamodb_items.Item | None = None,
) -> Iterator[tuple[list[dynamodb_items.Item], dynamodb_items.Item | None]]:
    """One index shard's entries listed before ``changed_before``, after ``start_key``
    (an index key, as a page's ``LastEvaluatedKey``), page by page: each page's entries
    (index and table keys) and the key after which the next page starts (None: the
    shard's end). An empty page is yielded too: a reader bounded by time sees each."""
    arguments = _window_query(table, shard, changed_before, None)
    if arguments is None:
        return
    arguments["Limit"] = page_size
    if start_key is not None:
        arguments["ExclusiveStartKey"] = start_key
    for response in _pages(client, arguments):
        yield list(response.get("Items", [])), response.get("LastEvaluatedKey") or None


def label_pages(
    client: DynamoDBClient,
    table: str,
    *,
    label: str,
    start: Position | None,
    changed_before: int,
    page_size: int,
    unflagged: bool = False,
    consistent: bool = True,
) -> Iterator[tuple[list[dynamodb_items.Item], Position | None]]:
    """The items listed under ``label`` before ``changed_before``, from ``start`` (None:
    the first shard's start), a query page of one shard at a time, read lazily: each
    page's items still listed there (``unflagged``: only those without ``flagged_at``)
    and where a pass resumes after it (None: the label's end)."""
    shards = label_shards(client, table, label)
    first = 0 if start is None else start.shard
    for index in range(first, len(shards)):
        at = start if start is not None and index == start.shard else Position(index)
        if at.after is not None and at.after[0] >= changed_before:
            # Nothing after it is in the window (a shorter one than when it was saved);
            # DynamoDB refuses a start key outside the key condition.
            continue
        keep = _filter(
            shards[index], changed_before, changed_since=None, expired_at=None, unflagged=unflagged
        )
        for entries, last in key_pages(
            client,
            table,
            shard=shards[index],
            changed_before=changed_before,
            page_size=page_size,
            start_key=at.start_key(label),
        ):
            keys = [table_key(entry) for entry in entries]
            read = read_items(client, table, keys, consistent=consistent)
            if last is not None:
                resume: Position | None = entry_after(index, last)
            elif index + 1 < len(shards):
                resume = Position(index + 1)
            else:
                resume = None
            yield [item for item in read if keep(item)], resume


def count(
    client: DynamoDBClient,
    table: str,
    *,
    label: str,
    changed_before: int,
    changed_since: int | None = None,
) -> int:
    """How many entries the index lists under ``label`` in the window: a ``Select=COUNT``
    Query per shard (no item read; the index may lag the table by a moment)."""
    total = 0
    for shard in label_shards(client, table, label):
        arguments = _window_query(table, shard, changed_before, changed_since)
        if arguments is None:
            return 0
        arguments["Select"] = "COUNT"
        total += sum(response.get("Count", 0) for response in _pages(client, arguments))
    return total


def oldest_listed(client: DynamoDBClient, table: str, *, label: str) -> int | None:
    """When the entry listed longest ago under ``label`` was listed: the first key of
    each shard, no item read (the index may lag the table by a moment); None: none."""
    oldest: int | None = None
    for shard in label_shards(client, table, label):
        arguments = _window_query(table, shard, _END_OF_TIME, None)
        if arguments is None:  # (a window with no start is never empty)
            continue
        arguments["Limit"] = 1
        try:
            response = client.query(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise storage_error(exc) from exc
        for entry in response.get("Items", []):
            listed_at = int(entry[table_layout.STATE_INDEX_SORT_KEY]["N"])
            oldest = listed_at if oldest is None else min(oldest, listed_at)
    return oldest


def newest(
    client: DynamoDBClient,
    table: str,
    *,
    labels: Sequence[str],
    changed_before: int,
    changed_since: int | None = None,
    batch: int = 25,
) -> Iterator[tuple[int, dynamodb_items.Item]]:
    """``(listed_at, item)`` of every record listed under ``labels`` in the window, the
    most recently listed first, read lazily.

    Each shard of each label is queried newest first (``batch`` keys a page), the shards
    are merged by ``listed_at``, and the items are read consistently ``batch`` at a time.
    An item that moved since the index listed it is left out here: its new entry (if it
    is in ``labels``) comes in its place.
    """
    streams = [
        _newest_in_shard(client, table, shard, (changed_since, changed_before), batch)
        for label in labels
        for shard in label_shards(client, table, label)
    ]
    merged = heapq.merge(*streams, key=lambda entry: entry[0], reverse=True)
    while chunk := list(itertools.islice(merged, batch)):
        listed = {_identity(key): (at, shard) for at, shard, key in chunk}
        for item in read_items(client, table, [key for _at, _shard, key in chunk]):
            at, shard = listed[_identity(item)]
            if item.get(table_layout.STATE_INDEX_PARTITION_KEY) == {"S": shard} and item.get(
                table_layout.STATE_INDEX_SORT_KEY
            ) == {"N": str(at)}:
                yield at, item


def _newest_in_shard(
    client: DynamoDBClient,
    table: str,
    shard: str,
    window: tuple[int | None, int],
    batch: int,
) -> Iterator[tuple[int, str, dynamodb_items.Item]]:
    """``(listed_at, shard, table key)`` of one shard's entries in ``window``
    (``[since, before)``), newest first."""
    arguments = _window_query(table, shard, window[1], window[0])
    if arguments is None:
        return
    arguments["ScanIndexForward"] = False
    arguments["Limit"] = batch
    for response in _pages(client, arguments):
        for entry in response.get("Items", []):
            listed_at = int(entry[table_layout.STATE_INDEX_SORT_KEY]["N"])
            yield listed_at, shard, table_key(entry)


def _window_query(
    table: str, shard: str, changed_before: int, changed_since: int | None
) -> dict[str, Any] | None:
    """The Query arguments for one shard's entries in ``[changed_since, changed_before)``;
    None: the window is empty (DynamoDB refuses a BETWEEN whose ends are reversed)."""
    if changed_since is not None and changed_since >= changed_before:
        return None
    values: dict[str, Any] = {":shard": {"S": shard}}
    if changed_since is None:
        window = "#listed < :before"
        values[":before"] = {"N": str(changed_before)}
    else:  # BETWEEN includes both ends
        window = "#listed BETWEEN :since AND :last"
        values[":since"] = {"N": str(changed_since)}
        values[":last"] = {"N": str(changed_before - 1)}
    return {
        "TableName": table,
        "IndexName": table_layout.STATE_INDEX,
        "KeyConditionExpression": f"#shard = :shard AND {window}",
        "ExpressionAttributeNames": {
            "#shard": table_layout.STATE_INDEX_PARTITION_KEY,
            "#listed": table_layout.STATE_INDEX_SORT_KEY,
        },
        "ExpressionAttributeValues": values,
    }


def _pages(client: DynamoDBClient, arguments: dict[str, Any]) -> Iterator[Any]:
    """Every response page of one Query."""
    while True:
        try:
            response = client.query(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise storage_error(exc) from exc
        yield response
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        arguments["ExclusiveStartKey"] = last


def label_shards(client: DynamoDBClient, table: str, label: str) -> list[str]:
    """Every index partition of ``label``: for the completed label, as many as the
    largest received log shard count ever deployed (the watermark item records it;
    ``table_layout.listing_keys``), so entries written under any count are read."""
    if label not in table_layout.SCALED_LABELS:
        return dynamodb_items.all_state_shards(label)
    deployed = dynamodb_log_state.read_state(client, table).shards_to_read
    return dynamodb_items.all_state_shards(label, log_shards=deployed)


def read_items(
    client: DynamoDBClient,
    table: str,
    keys: list[dynamodb_items.Item],
    *,
    consistent: bool = True,
) -> list[dynamodb_items.Item]:
    """The items under ``keys`` that still exist, in the keys' order; read consistently
    unless the caller's next step is a conditional write that checks what it read."""
    found: dict[tuple[str, str], dynamodb_items.Item] = {}
    for start in range(0, len(keys), _BATCH_GET_KEYS):
        wanted: list[dynamodb_items.Item] = keys[start : start + _BATCH_GET_KEYS]
        for _round in range(_BATCH_GET_ROUNDS):
            if not wanted:
                break
            try:
                response = client.batch_get_item(
                    RequestItems={table: {"Keys": wanted, "ConsistentRead": consistent}}
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
    for shard in label_shards(client, table, label):
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


def table_key(entry: dynamodb_items.Item) -> dynamodb_items.Item:
    """The table key of an index entry."""
    return {
        name: entry[name]
        for name in (table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY)
    }


def _identity(item: dynamodb_items.Item) -> tuple[str, str]:
    return (
        str(item[table_layout.TABLE_PARTITION_KEY]["S"]),
        str(item[table_layout.TABLE_SORT_KEY]["S"]),
    )
