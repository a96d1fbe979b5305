"""The in-memory DynamoDB answers as moto does: the same requests to both, compared.

Each case sends one request (after the same set-up) to moto's DynamoDB (``mock_aws``,
a boto3 client) and to :class:`local.memory_dynamodb.MemoryDynamoDB`, and compares what
came back: the answer's data, or the error's code, its ``Item`` and its cancellation
reasons. The one place they differ on purpose (a Query page that reached its Limit) is
a case of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from infra.schema import TABLE, table_definition
from local.memory_dynamodb import MemoryDynamoDB

T = "parity"
_WHOLE_REQUEST = ("transact_write_items", "batch_get_item")  # tables named inside
Request = tuple[str, dict[str, Any]]


def _key(pk: str, sk: str = "inbox") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _item(pk: str, sk: str = "inbox", **attributes: Any) -> dict[str, Any]:
    return {**_key(pk, sk), **attributes}


@pytest.fixture
def both() -> Iterator[Callable[[str, dict[str, Any]], tuple[Any, Any]]]:
    with mock_aws():
        moto = boto3.client("dynamodb", region_name="eu-west-1")
        moto.create_table(**table_definition(T))
        memory = MemoryDynamoDB()
        memory.create_table(**table_definition(T))
        for client in (moto, memory):
            client.update_time_to_live(
                TableName=T,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TABLE.ttl_attribute},
            )

        def send(operation: str, request: dict[str, Any]) -> tuple[Any, Any]:
            answers = []
            for client in (moto, memory):
                try:
                    table = {} if operation in _WHOLE_REQUEST else {"TableName": T}
                    answers.append(_normal(getattr(client, operation)(**table, **request)))
                except ClientError as exc:
                    answers.append(_refusal(exc))
            return answers[0], answers[1]

        yield send


def _normal(value: Any) -> Any:
    """An answer without its metadata, sets in order (their order is not DynamoDB's)."""
    if isinstance(value, dict):
        return {
            k: sorted(v) if k in ("SS", "NS") else _normal(v)
            for k, v in value.items()
            # moto adds an empty ItemCollectionMetrics that DynamoDB sends only when asked
            if k not in ("ResponseMetadata", "ConsumedCapacity", "ItemCollectionMetrics")
        }
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _refusal(exc: ClientError) -> dict[str, Any]:
    response: dict[str, Any] = dict(exc.response)
    refusal: dict[str, Any] = {"code": response["Error"]["Code"]}
    if "Item" in response:
        refusal["item"] = _normal(response["Item"])
    if "CancellationReasons" in response:
        refusal["reasons"] = [
            {k: _normal(v) for k, v in reason.items() if k in ("Code", "Item")}
            for reason in response["CancellationReasons"]
        ]
    return refusal


def _same(send: Callable[[str, dict[str, Any]], tuple[Any, Any]], *requests: Request) -> None:
    for operation, request in requests:
        moto, memory = send(operation, request)
        assert memory == moto, (operation, request)


INBOX_PUT = {
    "ConditionExpression": "(attribute_not_exists(#pk))",
    "ExpressionAttributeNames": {"#pk": "pk"},
    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
}


def test_a_put_refused_by_its_existence_condition_returns_the_stored_item(both: Any) -> None:
    first = _item("d1", state={"S": "pending"}, attempts={"N": "0"})
    _same(
        both,
        ("put_item", {"Item": first, **INBOX_PUT}),
        ("put_item", {"Item": _item("d1", state={"S": "other"}), **INBOX_PUT}),
        ("get_item", {"Key": _key("d1"), "ConsistentRead": True}),
        ("get_item", {"Key": _key("missing")}),
    )


def test_a_refused_condition_without_all_old_carries_no_item(both: Any) -> None:
    _same(
        both,
        ("put_item", {"Item": _item("d1")}),
        ("put_item", {"Item": _item("d1"), "ConditionExpression": "attribute_not_exists(pk)"}),
    )


CLAIM = {
    "UpdateExpression": "SET #state = :processing, lease_owner = :owner, lease_until = :lease,"
    " attempts = if_not_exists(attempts, :zero) + :one",
    "ConditionExpression": "(attribute_exists(pk)) AND (#state = :pending OR"
    " (#state = :processing AND lease_until <= :now)) AND (#exp > :lease)",
    "ExpressionAttributeNames": {"#state": "state", "#exp": "expires_at"},
    "ReturnValues": "ALL_NEW",
    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
}


def _claim(owner: str, now: int, lease: int) -> dict[str, Any]:
    return {
        "Key": _key("d1"),
        **CLAIM,
        "ExpressionAttributeValues": {
            ":processing": {"S": "processing"},
            ":pending": {"S": "pending"},
            ":owner": {"S": owner},
            ":now": {"N": str(now)},
            ":lease": {"N": str(lease)},
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
        },
    }


def test_a_claim_takes_a_pending_item_refuses_a_live_lease_and_takes_an_expired_one(
    both: Any,
) -> None:
    _same(
        both,
        ("update_item", _claim("a", 100, 160)),  # no item: attribute_exists refuses
        ("put_item", {"Item": _item("d1", state={"S": "pending"}, expires_at={"N": "1000"})}),
        ("update_item", _claim("a", 100, 160)),
        ("update_item", _claim("b", 120, 180)),  # the lease lives
        ("update_item", _claim("b", 160, 220)),  # it ran out
        ("update_item", _claim("c", 990, 1050)),  # past the TTL
    )


def test_updates_return_what_return_values_asks(both: Any) -> None:
    for returned in ("ALL_NEW", "ALL_OLD", "UPDATED_NEW", "UPDATED_OLD", "NONE"):
        update = {
            "Key": _key(returned),
            "UpdateExpression": "SET a = :a, b = :b REMOVE c",
            "ExpressionAttributeValues": {":a": {"S": "x"}, ":b": {"N": "2.5"}},
            "ReturnValues": returned,
        }
        _same(
            both,
            ("put_item", {"Item": _item(returned, a={"S": "old"}, c={"BOOL": True})}),
            ("update_item", update),
        )


def test_add_and_delete_count_numbers_and_sets_once(both: Any) -> None:
    def add(ids: list[str], tokens: int, *, condition: str) -> Request:
        return (
            "update_item",
            {
                "Key": _key("day", "budget"),
                "UpdateExpression": "ADD #reserved :tokens, #open :ids",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#reserved": "reserved", "#open": "open"},
                "ExpressionAttributeValues": {":tokens": {"N": str(tokens)}, ":ids": {"SS": ids}},
                "ReturnValues": "ALL_NEW",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        )

    not_open = "attribute_not_exists(#open) OR NOT contains(#open, :id)"

    def with_id(request: Request, reservation: str) -> Request:
        operation, arguments = request
        values = {**arguments["ExpressionAttributeValues"], ":id": {"S": reservation}}
        return operation, {**arguments, "ExpressionAttributeValues": values}

    _same(
        both,
        with_id(add(["r1"], 10, condition=not_open), "r1"),
        with_id(add(["r1"], 10, condition=not_open), "r1"),  # resent: refused
        with_id(add(["r2"], -3, condition=not_open), "r2"),
        (
            "update_item",
            {
                "Key": _key("day", "budget"),
                "UpdateExpression": "DELETE #open :ids ADD #used :used",
                "ConditionExpression": "contains(#open, :id)",
                "ExpressionAttributeNames": {"#open": "open", "#used": "used"},
                "ExpressionAttributeValues": {
                    ":ids": {"SS": ["r1", "r2"]},
                    ":used": {"N": "4"},
                    ":id": {"S": "r1"},
                },
                "ReturnValues": "ALL_NEW",
            },
        ),  # the set emptied: the attribute goes
    )


def test_between_comparisons_and_in_hold_as_dynamodb_evaluates_them(both: Any) -> None:
    _same(both, ("put_item", {"Item": _item("d1", n={"N": "5"}, s={"S": "beta"})}))
    for condition in (
        "n BETWEEN :low AND :high",
        "s BETWEEN :a AND :z",
        "n IN (:low, :five)",
        "n <> :five",
        "missing <> :five",
        "missing < :five",
        "begins_with(s, :b)",
        "size(s) = :four",
        "attribute_type(n, :number)",
        "NOT (n = :five OR s = :a)",
    ):
        _same(
            both,
            (
                "update_item",
                {
                    "Key": _key("d1"),
                    "UpdateExpression": "SET hits = if_not_exists(hits, :zero) + :one",
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": {
                        k: val
                        for k, val in {
                            ":low": {"N": "1"},
                            ":high": {"N": "9"},
                            ":five": {"N": "5.0"},
                            ":a": {"S": "a"},
                            ":z": {"S": "z"},
                            ":b": {"S": "be"},
                            ":four": {"N": "4"},
                            ":number": {"S": "N"},
                            ":zero": {"N": "0"},
                            ":one": {"N": "1"},
                        }.items()
                        if k in condition or k in (":zero", ":one")
                    },
                    "ReturnValues": "UPDATED_NEW",
                },
            ),
        )


def _transaction(condition: str) -> Request:
    return (
        "transact_write_items",
        {
            "TransactItems": [
                {
                    "Put": {
                        "TableName": T,
                        "Item": _item("d2", state={"S": "pending"}),
                        "ConditionExpression": condition,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {
                    "Update": {
                        "TableName": T,
                        "Key": _key("d1"),
                        "UpdateExpression": "SET seen = :yes",
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeValues": {":yes": {"BOOL": True}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": T,
                        "Key": _key("d3"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        },
    )


def test_a_transaction_is_cancelled_whole_with_a_reason_per_action(both: Any) -> None:
    _same(
        both,
        _transaction("attribute_not_exists(pk)"),  # d1 missing: cancelled, nothing written
        ("get_item", {"Key": _key("d2")}),
        ("put_item", {"Item": _item("d1")}),
        _transaction("attribute_not_exists(pk)"),
        ("get_item", {"Key": _key("d2")}),
        ("get_item", {"Key": _key("d1")}),
        _transaction("attribute_not_exists(pk)"),  # d2 exists now: its Item comes back
    )


def _listed(pk: str, shard: str, at: int) -> dict[str, Any]:
    return _item(pk, state_shard={"S": shard}, listed_at={"N": str(at)}, body={"S": "x" * 10})


def test_index_queries_order_and_page_as_dynamodb(both: Any) -> None:
    rows = [_listed(f"d{n}", "open#00", 100 + n % 3) for n in range(7)]
    rows.append(_listed("other", "open#01", 100))
    rows.append(_item("unlisted"))
    _same(both, *(("put_item", {"Item": row}) for row in rows))
    query = {
        "IndexName": "listing",
        "KeyConditionExpression": "#shard = :shard AND #listed BETWEEN :since AND :last",
        "ExpressionAttributeNames": {"#shard": "state_shard", "#listed": "listed_at"},
        "ExpressionAttributeValues": {
            ":shard": {"S": "open#00"},
            ":since": {"N": "100"},
            ":last": {"N": "101"},
        },
    }
    moto_all, memory_all = both("query", query)
    assert memory_all == moto_all
    assert [i["pk"]["S"] for i in memory_all["Items"]] == ["d0", "d3", "d6", "d1", "d4"]
    count = both("query", {**query, "Select": "COUNT"})
    assert count[0] == count[1]
    for forward in (True, False):
        pages: list[list[Any]] = [[], []]
        for side in (0, 1):
            start = None
            while True:
                request = {**query, "Limit": 2, "ScanIndexForward": forward}
                if start is not None:
                    request["ExclusiveStartKey"] = start
                answer = both("query", request)[side]
                pages[side].extend(answer["Items"])
                start = answer.get("LastEvaluatedKey")
                if start is None:
                    break
        assert pages[1] == pages[0]


def test_a_table_query_projects_and_filters(both: Any) -> None:
    rows = [_item("received#00", f"{100 + n:010d}#d{n}", kind={"S": "outbox"}) for n in range(5)]
    _same(both, *(("put_item", {"Item": row}) for row in rows))
    _same(
        both,
        (
            "query",
            {
                "KeyConditionExpression": "#pk = :shard AND #sk BETWEEN :low AND :high",
                "ExpressionAttributeNames": {"#pk": "pk", "#sk": "sk"},
                "ExpressionAttributeValues": {
                    ":shard": {"S": "received#00"},
                    ":low": {"S": f"{101:010d}"},
                    ":high": {"S": f"{103:010d}~"},
                },
                "ProjectionExpression": "#sk",
                "ScanIndexForward": False,
            },
        ),
        (
            "query",
            {
                "KeyConditionExpression": "pk = :shard AND begins_with(sk, :prefix)",
                "FilterExpression": "sk <> :skip",
                "ExpressionAttributeValues": {
                    ":shard": {"S": "received#00"},
                    ":prefix": {"S": "00000001"},
                    ":skip": {"S": f"{102:010d}#d2"},
                },
            },
        ),
    )


def test_a_query_page_that_reached_its_limit_says_where_to_go_on_even_at_the_end(
    both: Any,
) -> None:
    """DynamoDB does not look ahead past the Limit; moto does. The store follows
    DynamoDB, so a reader must take an empty last page."""
    _same(both, ("put_item", {"Item": _item("p", "a")}))
    query = {
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "p"}},
        "Limit": 1,
    }
    moto, memory = both("query", query)
    assert memory["Items"] == moto["Items"]
    assert memory["LastEvaluatedKey"] == _key("p", "a")


def test_batch_get_returns_the_items_that_exist(both: Any) -> None:
    _same(
        both,
        ("put_item", {"Item": _item("a")}),
        ("put_item", {"Item": _item("b")}),
        (
            "batch_get_item",
            {
                "RequestItems": {
                    T: {"Keys": [_key("a"), _key("gone"), _key("b")], "ConsistentRead": True}
                }
            },
        ),
    )


def test_refusals_a_client_sees_before_anything_is_written(both: Any) -> None:
    big = _item("big", body={"S": "x" * (400 * 1024)})
    _same(
        both,
        ("put_item", {"Item": big}),  # over 400 KB
        ("put_item", {"Item": {"pk": {"S": "no-sort-key"}}}),
        (
            "update_item",
            {
                "Key": _key("a"),
                "UpdateExpression": "SET pk = :x",
                "ExpressionAttributeValues": {":x": {"S": "b"}},
            },
        ),
        (
            "update_item",
            {
                "Key": _key("a"),
                "UpdateExpression": "SET a = :x",
                "ExpressionAttributeValues": {":x": {"S": "b"}, ":unused": {"S": "c"}},
            },
        ),
        (
            "update_item",
            {"Key": _key("a"), "UpdateExpression": "SET a = :undefined"},
        ),
        (
            "update_item",
            {
                "Key": _key("a"),
                "UpdateExpression": "SET status = :x",
                "ExpressionAttributeValues": {":x": {"S": "b"}},
            },
        ),  # a reserved word
    )


def test_an_index_key_of_the_wrong_type_is_refused_as_dynamodb_does(both: Any) -> None:
    """moto stores it; DynamoDB refuses it, and so does the store."""
    moto, memory = both("put_item", {"Item": _item("a", state_shard={"N": "1"})})
    assert moto == {}
    assert memory == {"code": "ValidationException"}
