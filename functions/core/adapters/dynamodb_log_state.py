"""The received log's watermark item as its readers see it: how far the log was looked
at, and the largest shard count any deploy wrote with.

Its own module because two readers need the count: the received log (how many shards
to read) and the state index (how many keys of the completed listing; ``table_layout``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_requests

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

WATERMARK_ATTRIBUTE: Final = "received_before"  # epoch seconds: the log before it is looked at
_SHARDS: Final = table_layout.WATERMARK_SHARDS_ATTRIBUTE
_SHARDS_SEEN: Final = table_layout.WATERMARK_SHARDS_SEEN_ATTRIBUTE


@dataclass(frozen=True, slots=True)
class LogState:
    """The watermark item: how far the log was looked at, and over how many shards.

    Attributes:
        watermark: Every receipt before it has been looked at; None: never advanced.
        shards: Shards the log has been read with up to the watermark (the default
            count before any run recorded one: every earlier deploy wrote that many).
        shards_seen: The largest count a reconciler run was deployed with: receivers
            may have written that many.
    """

    watermark: int | None
    shards: int
    shards_seen: int

    @property
    def shards_to_read(self) -> int:
        return max(self.shards, self.shards_seen)


def read_state(client: DynamoDBClient, table: str) -> LogState:
    """The watermark item (consistent read)."""
    item = dynamodb_requests.get(client, table, dynamodb_items.watermark_key()) or {}
    mark = item.get(WATERMARK_ATTRIBUTE)
    default = table_layout.DEFAULT_RECEIVED_LOG_SHARDS
    shards = default if _SHARDS not in item else int(item[_SHARDS]["N"])
    seen = shards if _SHARDS_SEEN not in item else int(item[_SHARDS_SEEN]["N"])
    return LogState(
        watermark=None if mark is None else int(mark["N"]), shards=shards, shards_seen=seen
    )
