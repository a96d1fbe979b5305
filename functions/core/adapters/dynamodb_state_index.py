"""Listing the sparse ``by_state`` index: what the reconciler and operators look at."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_errors import storage_error

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


def query_shard(
    client: DynamoDBClient,
    table: str,
    *,
    shard: str,
    changed_before: int,
    expired_at: int | None = None,
    unflagged: bool = False,
    page_size: int | None = None,
) -> Iterator[dynamodb_items.Item]:
    """Items of one index shard that changed before ``changed_before``.

    Read lazily, one query page (``page_size`` items, or 1 MB) at a time.
    """
    arguments: dict[str, Any] = {
        "TableName": table,
        "IndexName": table_layout.STATE_INDEX,
        "KeyConditionExpression": "#shard = :shard AND #changed < :before",
        "ExpressionAttributeNames": {
            "#shard": table_layout.STATE_INDEX_PARTITION_KEY,
            "#changed": table_layout.STATE_INDEX_SORT_KEY,
        },
        "ExpressionAttributeValues": {
            ":shard": {"S": shard},
            ":before": {"N": str(changed_before)},
        },
    }
    if expired_at is not None:
        arguments["FilterExpression"] = "lease_until <= :now"
        arguments["ExpressionAttributeValues"][":now"] = {"N": str(expired_at)}
    if unflagged:
        arguments["FilterExpression"] = "attribute_not_exists(flagged_at)"
    if page_size is not None:
        arguments["Limit"] = page_size  # counted before the filter: a page may come back empty
    while True:
        try:
            response = client.query(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise storage_error(exc) from exc
        yield from response.get("Items", [])
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        arguments["ExclusiveStartKey"] = last


def query_index(
    client: DynamoDBClient,
    table: str,
    *,
    label: str,
    changed_before: int,
    unflagged: bool = False,
    page_size: int | None = None,
) -> Iterator[dynamodb_items.Item]:
    """Every item listed under ``label`` in the state index, older than ``changed_before``."""
    for shard in dynamodb_items.all_state_shards(label):
        yield from query_shard(
            client,
            table,
            shard=shard,
            changed_before=changed_before,
            unflagged=unflagged,
            page_size=page_size,
        )
