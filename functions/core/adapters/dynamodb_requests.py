"""One request to the table, its errors translated: a read, or a conditional write.

A refused condition is an answer, not an error: :func:`conditional` returns it with
the stored item (when the request asked for it), and every other failure becomes
the domain error :func:`~functions.core.adapters.dynamodb_errors.storage_error` says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from functions.core.adapters.dynamodb_errors import condition_failed, storage_error
from functions.core.adapters.dynamodb_items import Item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import PutItemOutputTypeDef, UpdateItemOutputTypeDef


@dataclass(frozen=True, slots=True)
class Written:
    """What a conditional write did.

    Attributes:
        written: True when the condition held.
        item: when written, the ``Attributes`` the request asked for (``ReturnValues``);
            when refused, the stored item (``ReturnValuesOnConditionCheckFailure``).
            None when not asked for or when there is no item.
    """

    written: bool
    item: Item | None


def conditional(
    operation: Callable[..., PutItemOutputTypeDef | UpdateItemOutputTypeDef], **request: Any
) -> Written:
    """Call ``operation`` (e.g. ``client.update_item``) with ``request``.

    Raises:
        StorageUnavailable: throttled or failed; nothing written.
    """
    try:
        response = operation(**request)
    except ClientError as exc:
        refused = condition_failed(exc)
        if refused is not None:
            return Written(written=False, item=refused.stored)
        raise storage_error(exc) from exc
    except BotoCoreError as exc:
        raise storage_error(exc) from exc
    return Written(written=True, item=response.get("Attributes") or None)


def get(client: DynamoDBClient, table: str, key: Item) -> Item | None:
    """The item under ``key`` (a consistent read), or None."""
    try:
        response = client.get_item(TableName=table, Key=key, ConsistentRead=True)
    except (ClientError, BotoCoreError) as exc:
        raise storage_error(exc) from exc
    item: Item | None = response.get("Item")
    return item
