"""The received log: the outbox records read by time, and the reconciler's watermark.

A new open inbox item has no state index entry (``table_layout``): its receipt is found
through its outbox record, which the receiver's transaction keys by when it was received
(``received#NN`` / ``<received_at>#<delivery id>``). A window of the log is a Query per
shard for the records (small, read eventually consistent: they never change), then one
consistent ``BatchGetItem`` per page for the inbox items they name; an item still open
and still unlisted is what the window yields. The reconciler lists those it finds
(``list_open``) and keeps a watermark (one item): every receipt before it has been
looked at. Operators read the log after the watermark to see fresh open work.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters import dynamodb_items, dynamodb_requests, dynamodb_state_index
from functions.core.adapters.dynamodb_errors import storage_error
from functions.core.models import InboxItem

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

_WATERMARK: Final = "received_before"  # epoch seconds: the log before it is looked at
# Receipts per Query page (and so per BatchGetItem of their inbox items, at most 100 a
# request): a page is read only once the one before is worked off.
LOG_PAGE_SIZE: Final = 500


def read_watermark(client: DynamoDBClient, table: str) -> int | None:
    """The reconciler's watermark (consistent read); None: it never advanced one."""
    item = dynamodb_requests.get(client, table, dynamodb_items.watermark_key())
    return None if item is None else int(item[_WATERMARK]["N"])


def oldest(client: DynamoDBClient, table: str) -> int | None:
    """When the oldest receipt the log still holds was received; None: it is empty."""
    found: list[int] = []
    for shard in dynamodb_items.all_received_log_shards():
        arguments = _window(table, shard, since=None, before=None)
        arguments["Limit"] = 1
        response = _query(client, arguments)
        found.extend(_received_at(entry) for entry in response.get("Items", []))
    return min(found, default=None)


def receipts(
    client: DynamoDBClient,
    table: str,
    *,
    since: int | None,
    before: int | None,
    page_size: int = LOG_PAGE_SIZE,
) -> Iterator[list[tuple[int, str]]]:
    """``(received_at, delivery id)`` of the receipts in ``[since, before)``, a page of
    one shard at a time, shard after shard (each page in time order)."""
    if _empty(since, before):
        return
    for shard in dynamodb_items.all_received_log_shards():
        arguments = _window(table, shard, since=since, before=before)
        arguments["Limit"] = page_size
        while True:
            response = _query(client, arguments)
            page = [_receipt(entry) for entry in response.get("Items", [])]
            if page:
                yield page
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            arguments["ExclusiveStartKey"] = last


class SettledReceipts:
    """Receipts whose inbox item was read listed, ended or gone: read again, it could
    only say so again (no row removes an index entry; completed and ignored are final;
    a failed item leaves failed only by reset_failed, which lists it). A reader that
    keeps one across reads (the console, refreshing) reads only the other items."""

    def __init__(self) -> None:
        self._received: dict[str, int] = {}
        self._lock = threading.Lock()

    def __contains__(self, delivery_id: object) -> bool:
        with self._lock:
            return delivery_id in self._received

    def add(self, delivery_id: str, received_at: int) -> None:
        with self._lock:
            self._received[delivery_id] = received_at

    def forget_before(self, received_at: int) -> None:
        """Drop the receipts no window from ``received_at`` on can name: it stays small."""
        with self._lock:
            self._received = {d: t for d, t in self._received.items() if t >= received_at}


def unlisted_open(
    client: DynamoDBClient,
    table: str,
    *,
    since: int | None,
    before: int | None,
    page_size: int = LOG_PAGE_SIZE,
    settled: SettledReceipts | None = None,
) -> Iterator[dynamodb_items.Item]:
    """The inbox items received in ``[since, before)`` that are open (pending or
    processing) and have no state index entry, each read consistently (except those
    ``settled`` knows; those read settled are added to it)."""
    for page in receipts(client, table, since=since, before=before, page_size=page_size):
        yield from _read_open_unlisted(client, table, page, settled)


def newest_unlisted_open(
    client: DynamoDBClient,
    table: str,
    *,
    since: int | None,
    before: int | None,
    batch: int = 25,
    settled: SettledReceipts | None = None,
) -> Iterator[tuple[int, dynamodb_items.Item]]:
    """``(received_at, item)`` of the open, unlisted inbox items received in
    ``[since, before)``, the most recently received first, read lazily (``settled``: as
    for :func:`unlisted_open`)."""
    streams = [
        _newest_in_shard(client, table, shard, since=since, before=before, batch=batch)
        for shard in dynamodb_items.all_received_log_shards()
    ]
    merged = heapq.merge(*streams, reverse=True)
    while chunk := list(itertools.islice(merged, batch)):
        for item in _read_open_unlisted(client, table, chunk, settled):
            yield int(item["received_at"]["N"]), item


def _read_open_unlisted(
    client: DynamoDBClient,
    table: str,
    page: list[tuple[int, str]],
    settled: SettledReceipts | None,
) -> Iterator[dynamodb_items.Item]:
    """The page's inbox items that are open and unlisted, in the page's order."""
    wanted = [(at, d) for at, d in page if settled is None or d not in settled]
    keys = [dynamodb_items.inbox_key(delivery_id) for _at, delivery_id in wanted]
    found = {
        str(item["delivery_id"]["S"]): item
        for item in dynamodb_state_index.read_items(client, table, keys)
    }
    for received_at, delivery_id in wanted:
        item = found.get(delivery_id)
        if item is not None and _open_unlisted(item):
            yield item
        elif settled is not None:
            settled.add(delivery_id, received_at)


class DynamoDbReceivedLog:
    """The reconciler's :class:`~functions.core.reconcile.ReceivedLog` on the table."""

    def __init__(self, *, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def watermark(self) -> int | None:
        return read_watermark(self._client, self._table)

    def oldest(self) -> int | None:
        return oldest(self._client, self._table)

    def unlisted_open(self, *, since: int, before: int, page_size: int) -> Iterator[InboxItem]:
        for item in unlisted_open(
            self._client,
            self._table,
            since=since,
            before=before,
            page_size=min(page_size, LOG_PAGE_SIZE),
        ):
            yield dynamodb_items.inbox_from_item(item)

    def list_open(self, item: InboxItem) -> bool:
        """List the open item under ``open``, as if since its receipt; False: it ended or
        was listed meanwhile (the row's condition)."""
        return transitions.apply(
            self._client,
            self._table,
            transitions.LIST_OPEN,
            item.delivery_id,
            now=0,  # (not written: a listing changes no clock)
            listed=item.received_at,
        ).moved

    def advance(self, watermark: int) -> None:
        """Move the watermark forward to ``watermark``; never back (a slower run that
        overlapped a faster one leaves the later mark)."""
        # An update, not a put: the reconciler's role holds no PutItem (one could
        # overwrite a receipt).
        dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=dynamodb_items.watermark_key(),
            UpdateExpression="SET #kind = :kind, #mark = :mark",
            ConditionExpression="attribute_not_exists(#mark) OR #mark < :mark",
            ExpressionAttributeNames={"#mark": _WATERMARK, "#kind": table_layout.KIND_ATTRIBUTE},
            ExpressionAttributeValues={
                ":mark": {"N": str(watermark)},
                ":kind": {"S": table_layout.KIND_WATERMARK},
            },
        )


def _open_unlisted(item: dynamodb_items.Item) -> bool:
    state = item.get("state", {}).get("S")
    return (
        item[table_layout.TABLE_SORT_KEY]["S"] == table_layout.SK_INBOX
        and state in {s.value for s in dynamodb_items.OPEN_STATES}
        and not dynamodb_items.is_listed(item)
    )


def _newest_in_shard(
    client: DynamoDBClient,
    table: str,
    shard: str,
    *,
    since: int | None,
    before: int | None,
    batch: int,
) -> Iterator[tuple[int, str]]:
    if _empty(since, before):
        return
    arguments = _window(table, shard, since=since, before=before)
    arguments["ScanIndexForward"] = False
    arguments["Limit"] = batch
    while True:
        response = _query(client, arguments)
        yield from (_receipt(entry) for entry in response.get("Items", []))
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        arguments["ExclusiveStartKey"] = last


def _empty(since: int | None, before: int | None) -> bool:
    """An empty window (an operator's ``until`` before the watermark): DynamoDB refuses
    a BETWEEN whose low end is above its high end, so no Query is made."""
    return since is not None and before is not None and since >= before


def _window(table: str, shard: str, *, since: int | None, before: int | None) -> dict[str, Any]:
    """One shard's receipts in ``[since, before)``. A receipt's sort key is
    ``<received_at:010d>#<id>``, so the bare ``<before:010d>`` sorts before every receipt
    of that second and BETWEEN (inclusive) still excludes them."""
    low = dynamodb_items.received_log_position(since or 0)
    high = dynamodb_items.received_log_position(before if before is not None else 10**10 - 1)
    return {
        "TableName": table,
        "KeyConditionExpression": "#pk = :shard AND #sk BETWEEN :low AND :high",
        "ExpressionAttributeNames": {
            "#pk": table_layout.TABLE_PARTITION_KEY,
            "#sk": table_layout.TABLE_SORT_KEY,
        },
        "ExpressionAttributeValues": {
            ":shard": {"S": shard},
            ":low": {"S": low},
            ":high": {"S": high if before is not None else high + "~"},
        },
        "ProjectionExpression": "#sk",
    }


def _query(client: DynamoDBClient, arguments: dict[str, Any]) -> Any:
    try:
        return client.query(**arguments)
    except (ClientError, BotoCoreError) as exc:
        raise storage_error(exc) from exc


def _receipt(entry: dynamodb_items.Item) -> tuple[int, str]:
    received_at, _, delivery_id = str(entry[table_layout.TABLE_SORT_KEY]["S"]).partition("#")
    return int(received_at), delivery_id


def _received_at(entry: dynamodb_items.Item) -> int:
    return _receipt(entry)[0]
