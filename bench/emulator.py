"""What one ``TransactWriteItems`` costs in moto as the table grows, with and without
the local stack's copy-free transaction path (:mod:`local.aws_emulator`).

``python -m bench.emulator`` prints a table of medians (ms) at 200, 1,000 and 4,000
items; the table has its stream enabled, as the stack's does. In-process (mock_aws),
so only moto's own work is measured, not HTTP.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import TYPE_CHECKING, Any

import boto3
from moto import mock_aws

from local.aws_emulator import moto_patches
from local.aws_resources import create_table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

SIZES = (200, 1000, 4000)
SAMPLES = 9


def _transaction(table: str) -> list[TransactWriteItemTypeDef]:
    delivery_id = str(uuid.uuid4())
    return [
        {
            "Put": {
                "TableName": table,
                "Item": {"pk": {"S": delivery_id}, "sk": {"S": "inbox"}, "state": {"S": "x"}},
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        {"Put": {"TableName": table, "Item": {"pk": {"S": delivery_id}, "sk": {"S": "outbox"}}}},
    ]


def measure() -> dict[int, tuple[float, float]]:
    """Median ms per transaction at each size: (moto's copying path, the copy-free one).

    The table is filled through the copy-free path (the items are the same either
    way; filling through moto's own path would take minutes), then both are timed.
    """
    medians: dict[int, tuple[float, float]] = {}
    marker = object()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "bench")
        moto_patches.install_fast_transactions()
        users: list[Any] = moto_patches.fast_path_users
        written = 0
        for size in SIZES:
            users.append(marker)
            while written < size:
                client.transact_write_items(TransactItems=_transaction("bench"))
                written += 2
            fast = _time(client)
            users.remove(marker)
            copying = _time(client)
            written += 4 * SAMPLES
            medians[size] = (copying, fast)
    return medians


def _time(client: DynamoDBClient) -> float:
    samples = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        client.transact_write_items(TransactItems=_transaction("bench"))
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    print("| items in the table | moto's path (ms) | copy-free path (ms) |")
    print("| ---: | ---: | ---: |")
    for size, (copying, fast) in measure().items():
        print(f"| {size:,} | {copying:.1f} | {fast:.1f} |")


if __name__ == "__main__":
    main()
