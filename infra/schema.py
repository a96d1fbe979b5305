"""The table and the work queues as data: what the CDK stack and the emulator both create.

``infra/table.py`` and ``infra/queues.py`` build the constructs from it, the local
runtime (``local/aws_resources.py``) creates the same resources in the emulator, and the
infra tests compare the synthesized template with it, so the two cannot drift. No CDK
import here (as in :mod:`infra.environments`): the local runtime uses it without the CDK.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from functions.core import table_layout
from functions.core.retry_policy import RETRY_BASE_SECONDS, retry_schedule

if TYPE_CHECKING:
    from mypy_boto3_sqs.literals import QueueAttributeNameType


class AttributeType(StrEnum):
    STRING = "S"
    NUMBER = "N"


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    type: AttributeType


@dataclass(frozen=True, slots=True)
class KeySchema:
    partition: Key
    sort: Key

    def to_request(self) -> list[dict[str, str]]:
        """The ``KeySchema`` of a DynamoDB API request."""
        return [
            {"AttributeName": self.partition.name, "KeyType": "HASH"},
            {"AttributeName": self.sort.name, "KeyType": "RANGE"},
        ]


@dataclass(frozen=True, slots=True)
class GlobalIndex:
    name: str
    keys: KeySchema
    projection: str = "ALL"


@dataclass(frozen=True, slots=True)
class TableSchema:
    """Keys, sparse indexes, the stream's view and the TTL attribute of the one table."""

    keys: KeySchema
    indexes: tuple[GlobalIndex, ...]
    stream_view: str
    ttl_attribute: str

    def attributes(self) -> list[Key]:
        """Every key attribute of the table and its indexes, each once, in order."""
        found: dict[str, Key] = {}
        for keys in (self.keys, *(index.keys for index in self.indexes)):
            for key in (keys.partition, keys.sort):
                found.setdefault(key.name, key)
        return list(found.values())

    def create_table_request(self, table_name: str) -> dict[str, Any]:
        """``CreateTable`` arguments (on-demand); the TTL is a separate call."""
        return {
            "TableName": table_name,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [
                {"AttributeName": key.name, "AttributeType": key.type.value}
                for key in self.attributes()
            ],
            "KeySchema": self.keys.to_request(),
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": index.name,
                    "KeySchema": index.keys.to_request(),
                    "Projection": {"ProjectionType": index.projection},
                }
                for index in self.indexes
            ],
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": self.stream_view},
        }


TABLE: Final = TableSchema(
    keys=KeySchema(
        partition=Key(table_layout.TABLE_PARTITION_KEY, AttributeType.STRING),
        sort=Key(table_layout.TABLE_SORT_KEY, AttributeType.STRING),
    ),
    indexes=(
        GlobalIndex(
            name=table_layout.STATE_INDEX,
            keys=KeySchema(
                partition=Key(table_layout.STATE_INDEX_PARTITION_KEY, AttributeType.STRING),
                sort=Key(table_layout.STATE_INDEX_SORT_KEY, AttributeType.NUMBER),
            ),
            projection=table_layout.STATE_INDEX_PROJECTION,
        ),
    ),
    # The relay needs the new image of an outbox record, nothing of the old one.
    stream_view="NEW_IMAGE",
    ttl_attribute=table_layout.TTL_ATTRIBUTE,
)


def table_definition(table_name: str) -> dict[str, Any]:
    """``CreateTable`` arguments for the stack's table (on-demand, NEW_IMAGE stream)."""
    return TABLE.create_table_request(table_name)


# SQS refuses a larger maxReceiveCount.
SQS_MAX_RECEIVE_COUNT: Final = 1000


def max_receive_count_for(
    max_attempts: int,
    *,
    retry_horizon_seconds: int,
    retry_base_seconds: int = RETRY_BASE_SECONDS,
) -> int:
    """The work queue's redrive threshold: a backstop above the worker's own budget.

    The worker dead-letters a delivery itself (with its state recorded); the redrive
    must not fire first. Before that decision one message is received at most:

    * once per attempt that failed transiently and was retried: each waited its own
      back-off delay (a distinct attempt number) inside the horizon, so there are no
      more of them than retries in :func:`retry_schedule`;
    * ``max_attempts`` times for attempts of unknown outcome;
    * once for the deciding attempt;
    * plus ``max_attempts`` receives that found storage unavailable before they could
      claim (no attempt counted): a margin; a longer storage outage may still redrive
      a message, and the reconciler re-enqueues its still pending delivery.

    Never counted, because they never return the message itself: a message not started
    (no time left in its invocation, or its MCP server unreachable in its batch), a
    delivery another worker holds, or one waiting for the token budget; each is
    replaced by a fresh copy, whose receive count starts at 0.

    Raises:
        ValueError: the result exceeds what SQS accepts.
    """
    retries = len(retry_schedule(retry_horizon_seconds, retry_base_seconds)) - 1
    count = retries + max_attempts + 1 + max_attempts
    if count > SQS_MAX_RECEIVE_COUNT:
        raise ValueError(f"maxReceiveCount {count} exceeds SQS's {SQS_MAX_RECEIVE_COUNT}")
    return count


# SQS keeps a message at most 14 days.
SQS_MAX_RETENTION_SECONDS: Final = 14 * 86400
# An operator has at least this long to look at a dead letter and redrive it.
MIN_DEAD_LETTER_RETENTION_SECONDS: Final = 86400
# How late a delivery's first attempt may start after its receipt: the relay retries a
# stream record for up to 6 h, then the reconciler re-enqueues the item (its pending
# age is 30 min); a day covers both, and a reconciler that was down for hours.
LATE_START_SECONDS: Final = 86400


def worker_dead_letter_age(
    *, retry_horizon_seconds: int, max_attempts: int, visibility_timeout_seconds: int
) -> int:
    """Seconds after its receipt by which the worker has dead-lettered a delivery that no
    operator touched: its first attempt starts late (:data:`LATE_START_SECONDS`), known
    transient failures are retried only within the horizon, and each attempt that died
    (at most ``max_attempts``) is received again after the visibility timeout."""
    return LATE_START_SECONDS + retry_horizon_seconds + max_attempts * visibility_timeout_seconds


def dead_letter_retention_seconds(*, inbox_retention_seconds: int, dead_letter_age: int) -> int:
    """The dead-letter queue's retention: no dead letter outlives its inbox item.

    The worker sends a dead letter as a new message, kept from its own send; SQS's
    redrive keeps a message's first enqueue time. Either way a letter sent by
    ``dead_letter_age`` after the receipt is gone before the item's TTL, so a redrive
    finds the item (failed) to reopen, and never one whose TTL passed (its effect
    records may be deleted: the claim and the reopen refuse it). A letter sent later (an
    operator's requeue, a delivery waiting for the token budget) may outlive its item:
    the worker then finds it expired or missing and acknowledges it, counted.

    Raises:
        ValueError: less than :data:`MIN_DEAD_LETTER_RETENTION_SECONDS` would be left.
    """
    retention = min(SQS_MAX_RETENTION_SECONDS, inbox_retention_seconds - dead_letter_age)
    if retention < MIN_DEAD_LETTER_RETENTION_SECONDS:
        days = -(-(dead_letter_age + MIN_DEAD_LETTER_RETENTION_SECONDS) // 86400)
        raise ValueError(
            f"dead letters would be kept {max(retention, 0)} s, less than a day: keep inbox"
            f" items at least {days} days, or shorten the retry horizon or the attempts"
        )
    return retention


def work_queue_attributes(
    *, dead_letter_arn: str, max_receive_count: int, visibility_timeout_seconds: int | None = None
) -> dict[QueueAttributeNameType, str]:
    """``CreateQueue`` attributes of the work queue, as the SQS API takes them (the CDK
    writes the same redrive policy into the template)."""
    redrive = {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": str(max_receive_count)}
    attributes: dict[QueueAttributeNameType, str] = {
        "RedrivePolicy": json.dumps(redrive, separators=(",", ":"))
    }
    if visibility_timeout_seconds is not None:
        attributes["VisibilityTimeout"] = str(visibility_timeout_seconds)
    return attributes
