"""The completed listing's keys follow the received log's shard count: a worker deployed
with more shards spreads its completions over more keys, and every reader reads every
key any deploy wrote to (the largest count the watermark item records)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from functions.core import table_layout
from functions.core.adapters import dynamodb_state_index
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.dynamodb_received_log import DynamoDbReceivedLog
from local.testkit import builders

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

NOW = 1_760_000_000
COMPLETED = table_layout.STATE_LABEL_COMPLETED


def complete(dynamodb: DynamoDBClient, table: str, n: int, *, log_shards: int) -> str:
    """One delivery received and completed by a worker deployed with ``log_shards``."""
    delivery_id = f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}"
    item = builders.inbox_item(delivery_id, received_at=NOW)
    assert builders.record_new(DynamoDbInbox(dynamodb, table), item) is None
    claims = DynamoDbClaims(client=dynamodb, table_name=table, log_shards=log_shards)
    claim = claims.claim(delivery_id, owner="w", now=NOW, lease_seconds=60).claim
    assert claim is not None
    claims.complete(claim, now=NOW + 1)
    return delivery_id


def keys_used(dynamodb: DynamoDBClient, table: str, ids: list[str]) -> set[str]:
    found = dynamodb_state_index.read_items(
        dynamodb, table, [{"pk": {"S": d}, "sk": {"S": table_layout.SK_INBOX}} for d in ids]
    )
    return {str(item[table_layout.STATE_INDEX_PARTITION_KEY]["S"]) for item in found}


def listed(dynamodb: DynamoDBClient, table: str) -> int:
    return dynamodb_state_index.count(dynamodb, table, label=COMPLETED, changed_before=NOW + 10)


def test_completions_spread_over_as_many_keys_as_the_log_has_shards(
    dynamodb: DynamoDBClient, table: str
) -> None:
    ids = [complete(dynamodb, table, n, log_shards=32) for n in range(64)]
    used = keys_used(dynamodb, table, ids)
    assert len(used) > table_layout.STATE_INDEX_SHARDS
    assert used <= {f"{COMPLETED}#{k:02d}" for k in range(32)}
    # A run of the reconciler deployed with 32 records the count: readers read them all.
    DynamoDbReceivedLog(client=dynamodb, table_name=table, shards=32).watermark()
    assert listed(dynamodb, table) == len(ids)


def test_a_lowered_count_leaves_every_completion_readable(
    dynamodb: DynamoDBClient, table: str
) -> None:
    DynamoDbReceivedLog(client=dynamodb, table_name=table, shards=32).watermark()
    wide = [complete(dynamodb, table, n, log_shards=32) for n in range(40)]
    # A later deploy goes back to 8: its worker writes 8 keys, its reconciler records
    # nothing smaller, so the 32 keys stay read.
    DynamoDbReceivedLog(client=dynamodb, table_name=table, shards=8).watermark()
    narrow = [complete(dynamodb, table, n, log_shards=8) for n in range(40, 60)]
    assert len(keys_used(dynamodb, table, narrow)) <= table_layout.STATE_INDEX_SHARDS
    assert listed(dynamodb, table) == len(wide) + len(narrow)


def test_fewer_log_shards_than_the_index_had_keep_its_eight_keys() -> None:
    assert table_layout.listing_keys(COMPLETED, 2) == table_layout.STATE_INDEX_SHARDS
    assert table_layout.listing_keys(COMPLETED, 64) == 64
    # The other labels take few entries: their keys do not move.
    assert table_layout.listing_keys(table_layout.STATE_LABEL_OPEN, 64) == (
        table_layout.STATE_INDEX_SHARDS
    )
