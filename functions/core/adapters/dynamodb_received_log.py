"""The received log: the outbox records read by time, and the reconciler's watermark.

A new open inbox item has no state index entry (``table_layout``): its receipt is found
through its outbox record, which the receiver's transaction keys by when it was received
(``received#NN`` / ``<received_at>#<delivery id>``). A window of the log is a Query per
shard for the records (small, read eventually consistent: they never change), then one
consistent ``BatchGetItem`` per page for the inbox items they name; an item still open
and still unlisted is what the window yields. The reconciler lists those it finds
(``list_open``) and keeps a watermark (one item): every receipt before it has been
looked at. Operators read the log after the watermark to see fresh open work.

The shard count is a deploy setting. The watermark item also records the largest
count a reconciler run was deployed with (at the run's start) and how many shards the
log has been read with up to the watermark; every reader reads at least the larger, so
a deploy that lowers the setting strands no receipt written under the larger count. The
shards a raised count adds are read from their oldest receipt (a receiver of the new
deploy may write them before its reconciler runs) before the watermark moves on.

A run that reads shards side by side (:meth:`DynamoDbReceivedLog.slices`) keeps a
watermark per shard (``received_watermark#NN``) as well: a shard that cannot be read
holds back only its own mark. The shared watermark then moves to the least of them, so
every reader of it (operators, an older deploy) still sees a mark before which every
shard was read.
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
from functions.core.adapters import (
    dynamodb_items,
    dynamodb_log_state,
    dynamodb_requests,
    dynamodb_state_index,
)
from functions.core.adapters.dynamodb_errors import storage_error
from functions.core.adapters.dynamodb_log_state import read_state
from functions.core.models import InboxItem

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

_WATERMARK: Final = dynamodb_log_state.WATERMARK_ATTRIBUTE
_SHARDS: Final = table_layout.WATERMARK_SHARDS_ATTRIBUTE  # read up to the watermark
_SHARDS_SEEN: Final = table_layout.WATERMARK_SHARDS_SEEN_ATTRIBUTE  # largest deployed
# Receipts per Query page (and so per BatchGetItem of their inbox items, at most 100 a
# request): a page is read only once the one before is worked off.
LOG_PAGE_SIZE: Final = 500


def read_watermark(client: DynamoDBClient, table: str) -> int | None:
    """The reconciler's watermark (consistent read); None: it never advanced one."""
    return read_state(client, table).watermark


def oldest(
    client: DynamoDBClient,
    table: str,
    *,
    shards: int,
    first_shard: int = 0,
    since: int | None = None,
    only: int | None = None,
) -> int | None:
    """When the oldest receipt (at or after ``since``) shards ``first_shard`` to
    ``shards - 1`` (or shard ``only``) still hold was received; None: they hold none."""
    found: list[int] = []
    for shard in _shard_keys(shards, first_shard=first_shard, only=only):
        arguments = _window(table, shard, since=since, before=None)
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
    shards: int,
    page_size: int = LOG_PAGE_SIZE,
    only: int | None = None,
) -> Iterator[list[tuple[int, str]]]:
    """``(received_at, delivery id)`` of the receipts in ``[since, before)``, a page of
    one shard at a time, shard after shard (each page in time order); ``only``: of
    that one shard."""
    if _empty(since, before):
        return
    for shard in _shard_keys(shards, only=only):
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
    shards: int,
    page_size: int = LOG_PAGE_SIZE,
    settled: SettledReceipts | None = None,
    consistent: bool = True,
) -> Iterator[dynamodb_items.Item]:
    """The inbox items received in ``[since, before)`` that are open (pending or
    processing) and have no state index entry, each read consistently unless told
    otherwise (except those ``settled`` knows; those read settled are added to it)."""
    pages = receipts(client, table, since=since, before=before, shards=shards, page_size=page_size)
    for page in pages:
        yield from _read_open_unlisted(client, table, page, settled, consistent=consistent)


def newest_unlisted_open(
    client: DynamoDBClient,
    table: str,
    *,
    since: int | None,
    before: int | None,
    shards: int,
    batch: int = 25,
    settled: SettledReceipts | None = None,
) -> Iterator[tuple[int, dynamodb_items.Item]]:
    """``(received_at, item)`` of the open, unlisted inbox items received in
    ``[since, before)``, the most recently received first, read lazily (``settled``: as
    for :func:`unlisted_open`)."""
    streams = [
        _newest_in_shard(client, table, shard, since=since, before=before, batch=batch)
        for shard in dynamodb_items.all_received_log_shards(shards)
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
    *,
    consistent: bool = True,
) -> Iterator[dynamodb_items.Item]:
    """The page's inbox items that are open and unlisted, in the page's order."""
    wanted = [(at, d) for at, d in page if settled is None or d not in settled]
    keys = [dynamodb_items.inbox_key(delivery_id) for _at, delivery_id in wanted]
    found = {
        str(item["delivery_id"]["S"]): item
        for item in dynamodb_state_index.read_items(client, table, keys, consistent=consistent)
    }
    for received_at, delivery_id in wanted:
        item = found.get(delivery_id)
        if item is not None and _open_unlisted(item):
            yield item
        elif settled is not None:
            settled.add(delivery_id, received_at)


class DynamoDbReceivedLog:
    """The reconciler's :class:`~functions.core.ports.recovery.ReceivedLog` on the table.

    ``shards`` is the deploy's setting; a run reads at least as many as the watermark
    item records (``dynamodb_log_state.LogState``), and records a larger count once it is safe to.
    """

    def __init__(
        self,
        *,
        client: DynamoDBClient,
        table_name: str,
        shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
    ) -> None:
        self._client = client
        self._table = table_name
        self._configured = shards
        # Set by watermark() at the start of each run.
        self._reading = shards
        self._recorded_mark: int | None = None

    @property
    def shards_read(self) -> int:
        """How many shards this run reads (known once :meth:`watermark` was read)."""
        return self._reading

    def watermark(self) -> int | None:
        """The watermark this run starts from. A deploy that raised the shard count
        starts its new shards from their oldest receipt, so the mark returned is then
        earlier than the stored one until a run has read them up to it."""
        state = read_state(self._client, self._table)
        self._reading = max(self._configured, state.shards_to_read)
        self._recorded_mark = state.watermark
        if self._reading > state.shards_seen:
            self._record_seen(self._reading)
        if state.watermark is None or self._reading == state.shards:
            return state.watermark
        first = oldest(self._client, self._table, shards=self._reading, first_shard=state.shards)
        if first is None:
            return state.watermark
        # (the reconciler looks again an overlap before the mark it is given)
        return min(state.watermark, first + table_layout.RECEIVED_LOG_OVERLAP_SECONDS)

    def _record_seen(self, shards: int) -> None:
        """Record at once that receivers may write ``shards`` shards: a later deploy that
        lowers the setting still reads them all (an update: never a smaller count)."""
        self._raise(dynamodb_items.watermark_key(), _SHARDS_SEEN, shards)

    def _raise(self, key: dynamodb_items.Item, attribute: str, value: int) -> None:
        """Set ``attribute`` of the watermark item under ``key`` to ``value`` if that
        raises it: a run that read less (or an older deploy) never lowers it."""
        dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=key,
            UpdateExpression="SET #kind = :kind, #value = :value",
            ConditionExpression="attribute_not_exists(#value) OR #value < :value",
            ExpressionAttributeNames={"#value": attribute, "#kind": table_layout.KIND_ATTRIBUTE},
            ExpressionAttributeValues={
                ":value": {"N": str(value)},
                ":kind": {"S": table_layout.KIND_WATERMARK},
            },
        )

    def oldest(self, *, since: int | None = None, shard: int | None = None) -> int | None:
        """The oldest receipt at or after ``since`` of every shard read (or of ``shard``)."""
        return oldest(self._client, self._table, shards=self._reading, since=since, only=shard)

    def slices(self) -> list[ShardLog]:
        """The log shard by shard, each with its own watermark, for a run that reads them
        side by side: what this run reads (as :meth:`watermark` does), and where each
        shard stands. A shard without a mark of its own starts at the shared mark if it
        was read up to it, else (a shard a raised count added) at its oldest receipt."""
        state = read_state(self._client, self._table)
        self._reading = max(self._configured, state.shards_to_read)
        self._recorded_mark = state.watermark
        if self._reading > state.shards_seen:
            self._record_seen(self._reading)
        keys = [dynamodb_items.received_watermark_key(n) for n in range(self._reading)]
        own = {
            str(item[table_layout.TABLE_SORT_KEY]["S"]): int(item[_WATERMARK]["N"])
            for item in dynamodb_state_index.read_items(self._client, self._table, keys)
            if _WATERMARK in item
        }
        logs = []
        for n, key in enumerate(keys):
            shared = state.watermark if n < state.shards else None
            mark = own.get(str(key[table_layout.TABLE_SORT_KEY]["S"]))
            # The shared mark may be ahead of a shard's own (a run that read every shard
            # at once moved only the shared one): every shard was read up to it.
            start = max((m for m in (mark, shared) if m is not None), default=None)
            logs.append(ShardLog(self, n, start=start, stored=mark))
        return logs

    def unlisted_open(self, *, since: int, before: int, page_size: int) -> Iterator[InboxItem]:
        for page in self.unlisted_open_pages(since=since, before=before, page_size=page_size):
            yield from page

    def unlisted_open_pages(
        self, *, since: int, before: int, page_size: int, shard: int | None = None
    ) -> Iterator[list[InboxItem]]:
        """The window's open, unlisted items (of every shard read, or of ``shard``), a
        page of receipts at a time (empty pages too: the reconciler looks at its deadline
        per page)."""
        pages = receipts(
            self._client,
            self._table,
            since=since,
            before=before,
            shards=self._reading,
            page_size=min(page_size, LOG_PAGE_SIZE),
            only=shard,
        )
        for page in pages:
            # Receipts older than the received age, each then listed by a conditional
            # write: a read a moment stale costs a no-op at most, at half the price.
            found = _read_open_unlisted(self._client, self._table, page, None, consistent=False)
            yield [dynamodb_items.inbox_from_item(item) for item in found]

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
        """Move the watermark forward to ``watermark``, recording the shards read up to
        it; never back, and never to fewer shards (a slower run that overlapped a faster
        one, or a run of an older deploy, leaves the later mark and the larger count)."""
        if self._recorded_mark is not None and watermark <= self._recorded_mark:
            return  # re-reading new shards below the stored mark: nothing to move yet
        # An update, not a put: the reconciler's role holds no PutItem (one could
        # overwrite a receipt).
        dynamodb_requests.conditional(
            self._client.update_item,
            TableName=self._table,
            Key=dynamodb_items.watermark_key(),
            UpdateExpression="SET #kind = :kind, #mark = :mark, #shards = :shards",
            ConditionExpression=(
                "(attribute_not_exists(#mark) OR #mark < :mark)"
                " AND (attribute_not_exists(#shards) OR #shards <= :shards)"
            ),
            ExpressionAttributeNames={
                "#mark": _WATERMARK,
                "#kind": table_layout.KIND_ATTRIBUTE,
                "#shards": _SHARDS,
            },
            ExpressionAttributeValues={
                ":mark": {"N": str(watermark)},
                ":kind": {"S": table_layout.KIND_WATERMARK},
                ":shards": {"N": str(self._reading)},
            },
        )
        self._recorded_mark = watermark

    def advance_shard(self, shard: int, watermark: int) -> None:
        """Move ``shard``'s own watermark forward to ``watermark``; never back (a slower
        run that overlapped a faster one leaves the later mark)."""
        self._raise(dynamodb_items.received_watermark_key(shard), _WATERMARK, watermark)


class ShardLog:
    """One shard of the received log with its own watermark: a
    :class:`~functions.core.ports.recovery.ReceivedLog` a run reads beside the others."""

    def __init__(
        self, log: DynamoDbReceivedLog, shard: int, *, start: int | None, stored: int | None
    ) -> None:
        self._log = log
        self.shard = shard
        self._start = start
        self._stored = stored

    def watermark(self) -> int | None:
        return self._start

    def oldest(self, *, since: int | None = None) -> int | None:
        return self._log.oldest(since=since, shard=self.shard)

    def unlisted_open_pages(
        self, *, since: int, before: int, page_size: int
    ) -> Iterator[list[InboxItem]]:
        return self._log.unlisted_open_pages(
            since=since, before=before, page_size=page_size, shard=self.shard
        )

    def list_open(self, item: InboxItem) -> bool:
        return self._log.list_open(item)

    def advance(self, watermark: int) -> None:
        if self._stored is not None and watermark <= self._stored:
            return
        self._log.advance_shard(self.shard, watermark)
        self._stored = watermark


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


def _shard_keys(shards: int, *, first_shard: int = 0, only: int | None = None) -> list[str]:
    keys = dynamodb_items.all_received_log_shards(shards)
    return keys[first_shard:] if only is None else [keys[only]]


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
