"""The in-memory DynamoDB's own rules: TTL on the caller's clock, the commit listener,
what moto cannot be compared on (tests/integration/test_memory_dynamodb_parity.py
compares the rest with moto)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from infra.schema import TABLE, table_definition
from local.memory_dynamodb import MemoryDynamoDB, Write

T = "t"


def _store(lag: float = 0.0) -> MemoryDynamoDB:
    store = MemoryDynamoDB(ttl_lag=lambda: lag)
    store.create_table(**table_definition(T))
    store.update_time_to_live(
        TableName=T,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TABLE.ttl_attribute},
    )
    return store


def _item(pk: str, expires_at: int | None = None) -> dict[str, dict[str, str]]:
    item = {"pk": {"S": pk}, "sk": {"S": "inbox"}}
    if expires_at is not None:
        item["expires_at"] = {"N": str(expires_at)}
    return item


def test_ttl_deletes_only_when_the_callers_clock_passes_the_time_and_its_lag() -> None:
    store = _store(lag=50)
    store.put_item(TableName=T, Item=_item("a", expires_at=100))
    store.put_item(TableName=T, Item=_item("b", expires_at=120))
    assert store.next_expiry() == 150
    assert store.sweep(149) == []
    deleted = store.sweep(170)
    assert [w.key["pk"]["S"] for w in deleted] == ["a", "b"]
    assert all(w.operation == "TTL" and w.new is None for w in deleted)
    assert store.items(T) == []


def test_an_item_whose_ttl_moved_is_deleted_at_its_new_time_only() -> None:
    store = _store()
    store.put_item(TableName=T, Item=_item("a", expires_at=100))
    store.update_item(
        TableName=T,
        Key=_item("a"),
        UpdateExpression="SET expires_at = :later",
        ExpressionAttributeValues={":later": {"N": "500"}},
    )
    assert store.sweep(200) == []
    assert store.next_expiry() == 500
    assert len(store.sweep(500)) == 1


def test_listeners_see_each_committed_write_and_no_refused_one() -> None:
    store = _store()
    seen: list[Write] = []
    store.listen(seen.append)
    store.put_item(TableName=T, Item=_item("a"), ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ClientError):
        store.put_item(TableName=T, Item=_item("a"), ConditionExpression="attribute_not_exists(pk)")
    store.delete_item(TableName=T, Key=_item("a"))
    assert [(w.operation, w.old is None, w.new is None) for w in seen] == [
        ("PutItem", True, False),
        ("DeleteItem", False, True),
    ]


def test_a_comparison_of_a_number_with_a_string_is_false_not_an_error() -> None:
    store = _store()
    store.put_item(TableName=T, Item={**_item("a"), "n": {"N": "5"}})
    with pytest.raises(ClientError) as refused:
        store.update_item(
            TableName=T,
            Key=_item("a"),
            UpdateExpression="SET hit = :a",
            ConditionExpression="n < :a",
            ExpressionAttributeValues={":a": {"S": "a"}},
        )
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_answers_copy_the_sets_the_caller_may_change() -> None:
    store = _store()
    store.put_item(TableName=T, Item={**_item("a"), "ids": {"SS": ["x"]}})
    got = store.get_item(TableName=T, Key=_item("a"))["Item"]
    got["ids"]["SS"].append("y")
    assert store.get_item(TableName=T, Key=_item("a"))["Item"]["ids"] == {"SS": ["x"]}
