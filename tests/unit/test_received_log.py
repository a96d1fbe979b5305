"""The received log on moto: windows by receipt time, open and unlisted items only, a
watermark that only moves forward."""

from __future__ import annotations

from typing import TYPE_CHECKING

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_log_state, dynamodb_received_log
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.dynamodb_received_log import DynamoDbReceivedLog
from local.testkit import builders

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

NOW = 1_760_000_000
SHARDS = table_layout.DEFAULT_RECEIVED_LOG_SHARDS


def receive(dynamodb: DynamoDBClient, table: str, n: int, received_at: int) -> str:
    """What the receiver writes: the inbox item and its outbox record, in one transaction."""
    delivery_id = f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}"
    item = builders.inbox_item(delivery_id, received_at=received_at)
    assert builders.record_new(DynamoDbInbox(dynamodb, table), item) is None
    return delivery_id


def test_a_window_holds_every_receipt_of_its_seconds_and_none_of_the_next(
    dynamodb: DynamoDBClient, table: str
) -> None:
    before = receive(dynamodb, table, 0, NOW - 1)
    same = [receive(dynamodb, table, n, NOW) for n in range(1, 12)]  # over all the shards
    after = receive(dynamodb, table, 12, NOW + 1)
    log = DynamoDbReceivedLog(client=dynamodb, table_name=table)
    window = log.unlisted_open(since=NOW, before=NOW + 1, page_size=2)
    assert sorted(item.delivery_id for item in window) == sorted(same)
    assert log.oldest() == NOW - 1
    every = log.unlisted_open(since=NOW - 1, before=NOW + 2, page_size=500)
    assert {item.delivery_id for item in every} == {before, *same, after}


def test_only_open_unlisted_items_are_named(dynamodb: DynamoDBClient, table: str) -> None:
    pending, processing, done, listed = (receive(dynamodb, table, n, NOW) for n in range(4))
    claims = DynamoDbClaims(client=dynamodb, table_name=table)
    claims.claim(processing, owner="w", now=NOW, lease_seconds=60)
    claim = claims.claim(done, owner="w", now=NOW, lease_seconds=60).claim
    assert claim is not None
    claims.complete(claim, now=NOW + 1)
    log = DynamoDbReceivedLog(client=dynamodb, table_name=table)
    (to_list,) = [
        i
        for i in log.unlisted_open(since=NOW, before=NOW + 1, page_size=10)
        if i.delivery_id == listed
    ]
    assert log.list_open(to_list)
    assert not log.list_open(to_list)  # once
    found = log.unlisted_open(since=NOW, before=NOW + 1, page_size=10)
    assert sorted(i.delivery_id for i in found) == sorted([pending, processing])
    raw = dynamodb.get_item(TableName=table, Key=dynamodb_items.inbox_key(done))["Item"]
    assert not log.list_open(dynamodb_items.inbox_from_item(raw))  # ended: left as it is


def test_the_watermark_only_moves_forward(dynamodb: DynamoDBClient, table: str) -> None:
    log = DynamoDbReceivedLog(client=dynamodb, table_name=table)
    assert log.watermark() is None
    assert log.oldest() is None
    log.advance(NOW)
    log.advance(NOW - 60)  # a slower run that overlapped a faster one
    assert log.watermark() == NOW == dynamodb_received_log.read_watermark(dynamodb, table)
    log.advance(NOW + 60)
    assert log.watermark() == NOW + 60


def test_an_outbox_record_sits_under_its_received_log_key() -> None:
    item = builders.inbox_item("6f1c2a9e-3b7d-4c1e-9a52-000000000007", received_at=NOW)
    work = item.work_item()
    assert work is not None
    record = dynamodb_items.outbox_to_item(
        work, created_at=NOW, expires_at=item.expires_at, shards=SHARDS
    )
    key = dynamodb_items.outbox_key(work.delivery_id, NOW, shards=SHARDS)
    assert {name: record[name] for name in key} == key
    # It expires with its inbox item: a receipt outlives no open item it could name.
    assert record[table_layout.TTL_ATTRIBUTE] == {"N": str(item.expires_at)}


def test_an_empty_window_asks_dynamodb_nothing(dynamodb: DynamoDBClient, table: str) -> None:
    receive(dynamodb, table, 0, NOW)
    asked: list[str] = []
    dynamodb.meta.events.register(
        "before-call.dynamodb.Query", lambda **kwargs: asked.append("Query")
    )
    # An operator's "until" before the watermark: DynamoDB would refuse the inverted
    # BETWEEN (moto does not), so nothing may be asked.
    assert (
        list(dynamodb_received_log.receipts(dynamodb, table, since=NOW, before=NOW, shards=SHARDS))
        == []
    )
    newest = dynamodb_received_log.newest_unlisted_open(
        dynamodb, table, since=NOW + 5, before=NOW - 5, shards=SHARDS
    )
    assert list(newest) == []
    assert asked == []
    assert [
        r
        for page in dynamodb_received_log.receipts(
            dynamodb, table, since=NOW, before=NOW + 1, shards=SHARDS
        )
        for r in page
    ]
    assert asked == ["Query"] * SHARDS


def receive_into(dynamodb: DynamoDBClient, table: str, shards: int, count: int) -> list[str]:
    """``count`` receipts at NOW, written by a receiver deployed with ``shards`` shards."""
    inbox = DynamoDbInbox(dynamodb, table, received_log_shards=shards)
    ids = [f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}" for n in range(count)]
    for delivery_id in ids:
        assert builders.record_new(inbox, builders.inbox_item(delivery_id, received_at=NOW)) is None
    return ids


def in_shards_beyond(ids: list[str], shards: int, *, written: int) -> list[str]:
    return [
        d
        for d in ids
        if dynamodb_items.received_log_shard(d, shards=written)
        not in dynamodb_items.all_received_log_shards(shards)
    ]


def test_a_lowered_shard_setting_strands_no_receipt(dynamodb: DynamoDBClient, table: str) -> None:
    ids = receive_into(dynamodb, table, 32, 40)
    assert in_shards_beyond(ids, 8, written=32)  # some sit where 8 shards do not reach
    # A run deployed with 32 shards records them before it reads anything.
    DynamoDbReceivedLog(client=dynamodb, table_name=table, shards=32).watermark()
    lowered = DynamoDbReceivedLog(client=dynamodb, table_name=table, shards=8)
    lowered.watermark()
    assert lowered.shards_read == 32
    found = lowered.unlisted_open(since=NOW, before=NOW + 1, page_size=100)
    assert sorted(item.delivery_id for item in found) == sorted(ids)
    # The operators' reads span them too.
    assert dynamodb_log_state.read_state(dynamodb, table).shards_to_read == 32


def test_a_raised_shard_setting_reads_its_new_shards_from_their_oldest_receipt(
    dynamodb: DynamoDBClient, table: str
) -> None:
    before = DynamoDbReceivedLog(client=dynamodb, table_name=table)
    before.watermark()
    before.advance(NOW + 600)  # looked at up to here with 8 shards
    # A receiver of the new deploy wrote receipts before its reconciler ran.
    ids = receive_into(dynamodb, table, 32, 40)
    new_shards = in_shards_beyond(ids, 8, written=32)
    assert new_shards
    raised = DynamoDbReceivedLog(client=dynamodb, table_name=table, shards=32)
    mark = raised.watermark()
    assert mark is not None
    since = mark - table_layout.RECEIVED_LOG_OVERLAP_SECONDS
    assert since <= NOW
    found = {i.delivery_id for i in raised.unlisted_open(since=since, before=NOW + 1, page_size=9)}
    assert set(new_shards) <= found
    # Below the stored mark nothing moves; past it, the new count is recorded with it.
    raised.advance(NOW + 60)
    state = dynamodb_log_state.read_state(dynamodb, table)
    assert (state.watermark, state.shards, state.shards_seen) == (NOW + 600, 8, 32)
    raised.advance(NOW + 660)
    state = dynamodb_log_state.read_state(dynamodb, table)
    assert (state.watermark, state.shards) == (NOW + 660, 32)
    # A run of the older deploy can no longer record fewer shards.
    before.watermark()
    before.advance(NOW + 720)
    assert dynamodb_log_state.read_state(dynamodb, table).shards == 32


def test_the_oldest_receipt_since_a_time_passes_over_earlier_ones(
    dynamodb: DynamoDBClient, table: str
) -> None:
    receive(dynamodb, table, 0, 0)  # a record stamped at second 0
    receive(dynamodb, table, 1, NOW)
    log = DynamoDbReceivedLog(client=dynamodb, table_name=table)
    assert log.watermark() is None
    assert log.oldest() == 0
    assert log.oldest(since=NOW - 3600) == NOW
    assert log.oldest(since=NOW + 1) is None
