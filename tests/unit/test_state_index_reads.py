"""Reading the items a keys-only listing names: every key once, in order, throttling bounded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from functions.core.adapters import dynamodb_items, dynamodb_state_index
from functions.core.errors import StorageUnavailable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

TABLE = "t"


def identity(item: dynamodb_items.Item) -> tuple[str, str]:
    return (str(item["pk"]["S"]), str(item["sk"]["S"]))


class ThrottlingTable:
    """A stand-in for the client's ``batch_get_item``: its first ``calls`` requests leave
    their last ``throttle`` keys unprocessed, as DynamoDB does when it throttles."""

    def __init__(self, items: list[dynamodb_items.Item], *, throttle: int, calls: int) -> None:
        self._items = {identity(i): i for i in items}
        self._throttle = throttle
        self._calls = calls
        self.requests: list[int] = []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        keys = RequestItems[TABLE]["Keys"]
        assert RequestItems[TABLE]["ConsistentRead"] is True
        self.requests.append(len(keys))
        cut = len(keys) - self._throttle if len(self.requests) <= self._calls else len(keys)
        served, left = keys[: max(cut, 0)], keys[max(cut, 0) :]
        found = [self._items[key] for key in map(identity, served) if key in self._items]
        answer: dict[str, Any] = {"Responses": {TABLE: found}}
        if left:
            answer["UnprocessedKeys"] = {TABLE: {"Keys": left}}
        return answer


def items(n: int) -> list[dynamodb_items.Item]:
    return [{**dynamodb_items.inbox_key(f"d{i:03d}"), "n": {"N": str(i)}} for i in range(n)]


def test_unprocessed_keys_are_asked_for_again_and_order_is_kept() -> None:
    stored = items(150)
    table = ThrottlingTable(stored, throttle=30, calls=1)
    keys = [dynamodb_items.inbox_key(f"d{i:03d}") for i in reversed(range(151))]  # one missing
    read = dynamodb_state_index.read_items(cast("DynamoDBClient", table), TABLE, keys)
    assert read == list(reversed(stored))
    assert table.requests[:3] == [100, 30, 51]  # a full batch, its unprocessed rest, the next


def test_keys_still_unprocessed_after_the_rounds_are_storage_weather() -> None:
    table = ThrottlingTable(items(3), throttle=3, calls=99)
    keys = [dynamodb_items.inbox_key(f"d{i:03d}") for i in range(3)]
    with pytest.raises(StorageUnavailable):
        dynamodb_state_index.read_items(cast("DynamoDBClient", table), TABLE, keys)
    assert len(table.requests) == 4


def _listed(client: DynamoDBClient, table: str, label: str, at: int, n: int) -> str:
    delivery_id = f"{label}-{n:03d}"
    client.put_item(
        TableName=table,
        Item={
            **dynamodb_items.inbox_key(delivery_id),
            "state_shard": {"S": dynamodb_items.state_shard(label, delivery_id)},
            "listed_at": {"N": str(at)},
        },
    )
    return delivery_id


def test_newest_merges_every_shard_of_every_label_newest_first(
    dynamodb: DynamoDBClient, table: str
) -> None:
    expected = []
    for n in range(12):  # spread over the shards by their ids
        label = ("completed", "failed", "open")[n % 3]
        expected.append((1000 + n, _listed(dynamodb, table, label, 1000 + n, n)))
    _listed(dynamodb, table, "ignored", 5000, 99)  # a label not asked for
    found = dynamodb_state_index.newest(
        dynamodb, table, labels=("completed", "failed", "open"), changed_before=10_000, batch=2
    )
    assert [(at, item["pk"]["S"]) for at, item in found] == list(reversed(expected))
    window = dynamodb_state_index.newest(
        dynamodb, table, labels=("failed",), changed_since=1004, changed_before=1010, batch=1
    )
    assert [at for at, _item in window] == [1007, 1004]


def test_count_reads_no_item_and_honours_the_window(dynamodb: DynamoDBClient, table: str) -> None:
    for n in range(9):
        _listed(dynamodb, table, "completed", 2000 + n * 100, n)
    assert dynamodb_state_index.count(dynamodb, table, label="completed", changed_before=9999) == 9
    in_window = dynamodb_state_index.count(
        dynamodb, table, label="completed", changed_since=2300, changed_before=2600
    )
    assert in_window == 3  # 2300, 2400, 2500
    assert dynamodb_state_index.count(dynamodb, table, label="open", changed_before=9999) == 0
    assert (
        dynamodb_state_index.count(
            dynamodb, table, label="completed", changed_since=3000, changed_before=3000
        )
        == 0
    )
