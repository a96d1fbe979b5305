"""The bench's write meter (bench/write_units.py) on moto: what each kind of write costs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bench.write_units import Write, WriteMeter
from infra.schema import table_definition

TABLE = "metered"
REGION = "us-east-1"


@pytest.fixture
def metered() -> Iterator[tuple[Any, WriteMeter]]:
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        client = session.client("dynamodb")
        client.create_table(**table_definition(TABLE))
        reader = boto3.session.Session(region_name=REGION).client("dynamodb")
        meter = WriteMeter(reader, TABLE, lambda: "test")
        meter.register(session.events)
        yield session.client("dynamodb"), meter


def item(sk: str, padding: int = 0) -> dict[str, Any]:
    return {"pk": {"S": "d1"}, "sk": {"S": sk}, "pad": {"S": "x" * max(1, padding)}}


def rows(meter: WriteMeter) -> list[tuple[str, int]]:
    return [(w.label, w.table_wru + w.index_wru) for w in meter.writes]


def test_a_transactions_condition_check_is_billed_as_a_write_of_the_item_it_checks(
    metered: tuple[Any, WriteMeter],
) -> None:
    client, meter = metered
    client.put_item(TableName=TABLE, Item=item("inbox", padding=1500))  # 2 KB
    checked = {"TableName": TABLE, "Key": {"pk": {"S": "d1"}, "sk": {"S": "inbox"}}}
    client.transact_write_items(
        TransactItems=[
            {"ConditionCheck": {**checked, "ConditionExpression": "attribute_exists(pk)"}},
            {"Put": {"TableName": TABLE, "Item": item("package")}},
        ]
    )
    assert rows(meter)[1:] == [
        ("test: Transact ConditionCheck inbox (checked)", 4),  # 2 KB, doubled
        ("test: Transact Put package (new)", 2),
    ]
    assert all(isinstance(w, Write) and w.index_wru == 0 for w in meter.writes)


def test_a_single_conditional_update_costs_the_larger_image_once(
    metered: tuple[Any, WriteMeter],
) -> None:
    client, meter = metered
    client.put_item(TableName=TABLE, Item=item("inbox", padding=900))
    client.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "d1"}, "sk": {"S": "inbox"}},
        UpdateExpression="SET more = :more",
        ExpressionAttributeValues={":more": {"S": "y" * 200}},  # now over 1 KB
    )
    assert rows(meter) == [
        ("test: Put inbox (new)", 1),
        ("test: Update inbox (present -> present)", 2),
    ]
