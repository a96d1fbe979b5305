"""The inbox in DynamoDB: one transaction per new delivery, no read for a duplicate.

The only module that knows how the receiver talks to DynamoDB. Weather (throttling,
a failing or unreachable service) becomes :class:`StorageUnavailable`, as
:mod:`~functions.core.adapters.dynamodb_errors` decides; anything else propagates
unchanged (it is a bug or a misconfiguration, not weather).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from functions.core import table_layout
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters import dynamodb_items as items
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.adapters.dynamodb_errors import (
    condition_failed,
    is_throttled,
    is_transaction_conflict,
    storage_error,
)
from functions.core.adapters.storage_retry import StorageRetry
from functions.core.delivery import Delivery
from functions.core.models import InboxItem, QuarantineRecord, WorkItem

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

# The inbox put's condition is the state machine's (``accept``). The outbox put is
# unconditional: the inbox condition already decides for the pair, and a transaction is
# all-or-nothing.
_QUARANTINE_ABSENT: Final[Condition] = (
    (
        "attribute_not_exists(#pk)",
        "the first sighting of a conflicting body is the evidence; a retry of that same"
        " forgery must not overwrite its time",
    ),
)
_QUARANTINE_NAMES: Final = {"#pk": table_layout.TABLE_PARTITION_KEY}
# Two attempts of one delivery may overlap (docs/contract.md, on concurrent attempts);
# DynamoDB then cancels one transaction for the conflict. Re-running it a moment later
# lets it see the winner's item and answer "duplicate" instead of a 503 and a sender
# retry.
_CONFLICT_ATTEMPTS: Final = 3
_CONFLICT_BACKOFF_SECONDS: Final = 0.02
_SPENT: Final = object()  # the retry budget's end


class DynamoDbInbox:
    """:class:`functions.core.ports.inbox.InboxWriter` on the single table."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        received_log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
        retry: StorageRetry | None = None,
    ) -> None:
        """Args:
        client: a boto3 DynamoDB client (low-level), configured with bounded retries.
        table_name: the stack's table.
        received_log_shards: partitions of the received log the outbox records spread
            over (the deploy setting).
        retry: how long a throttled receipt is tried again before it is refused.
        """
        self._client = client
        self._table = table_name
        self._shards = received_log_shards
        self._retry = retry or StorageRetry()

    def record(
        self,
        delivery: Delivery,
        work: WorkItem | None,
        *,
        body_sha256: str,
        received_at: int,
        expires_at: int,
    ) -> InboxItem | None:
        """Put the inbox item and its outbox record in one transaction, if new.

        Returns:
            None when written, else the stored inbox item (from the cancellation
            reason's ``ALL_OLD`` image: no second read).

        A transaction refused for capacity, or whose answer was lost, is tried again
        with jittered waits while the retry budget lasts: one that did commit is then
        refused by the inbox condition, and the stored item comes back (a duplicate of
        the same digest: 2xx, no second work item).

        Raises:
            StorageUnavailable: throttled, failed or still conflicting; nothing written.
        """
        inbox = items.accepted_to_item(
            delivery,
            work,
            body_sha256=body_sha256,
            received_at=received_at,
            expires_at=expires_at,
            traceparent=None if work is None else work.traceparent,
        )
        transact: list[TransactWriteItemTypeDef] = [
            {"Put": transitions.accept_put(self._table, inbox)}
        ]
        if work is not None:
            outbox = items.outbox_to_item(
                work, created_at=received_at, expires_at=expires_at, shards=self._shards
            )
            transact.append({"Put": {"TableName": self._table, "Item": outbox}})
        waits = self._retry.waits()
        conflicts = 0
        while True:
            try:
                self._client.transact_write_items(TransactItems=transact)
            except ClientError as exc:
                refused = condition_failed(exc, action=0)
                # ALL_OLD was asked for, so a refusal carries the stored item; without
                # one (which DynamoDB does not do) the error is handled as any other.
                if refused is not None and refused.stored is not None:
                    return items.inbox_from_item(refused.stored)
                if is_transaction_conflict(exc):
                    conflicts += 1
                    if conflicts < _CONFLICT_ATTEMPTS:
                        self._retry.sleep(_CONFLICT_BACKOFF_SECONDS * conflicts)
                        continue
                elif is_throttled(exc) and next(waits, _SPENT) is not _SPENT:
                    continue
                raise storage_error(exc) from exc
            except (HTTPClientError, BotocoreConnectionError) as exc:
                if is_throttled(exc) and next(waits, _SPENT) is not _SPENT:
                    continue
                raise storage_error(exc) from exc
            return None

    def quarantine(self, record: QuarantineRecord) -> None:
        """Put the quarantine record unless this conflicting digest is already kept.

        Raises:
            StorageUnavailable: throttled or failed.
        """
        try:
            self._client.put_item(
                TableName=self._table,
                Item=items.quarantine_to_item(record),
                ConditionExpression=condition_expression(_QUARANTINE_ABSENT),
                ExpressionAttributeNames=_QUARANTINE_NAMES,
            )
        except ClientError as exc:
            if condition_failed(exc) is not None:
                return  # already quarantined by an earlier attempt of this forgery
            raise storage_error(exc) from exc
        except (HTTPClientError, BotocoreConnectionError) as exc:
            raise storage_error(exc) from exc
