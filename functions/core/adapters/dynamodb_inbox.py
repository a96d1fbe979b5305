"""The inbox in DynamoDB: one transaction per new delivery, no read for a duplicate.

The only module that knows how the receiver talks to DynamoDB. Provider errors it
recognises become :class:`StorageUnavailable` here, in one place; anything else
propagates unchanged (it is a bug or a misconfiguration, not weather).
"""

from __future__ import annotations

import time
from typing import Any, Final

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items as items
from functions.core.errors import StorageUnavailable
from functions.core.models import InboxItem, QuarantineRecord, WorkItem

# Why each write is conditional:
# - inbox put, "absent": the inbox item is the receipt; writing it only when no item
#   holds this delivery id is what makes acceptance exactly-once across attempts.
# - quarantine put, "absent": the first sighting of a conflicting body is the evidence;
#   a retry of that same forgery must not overwrite its time.
_ABSENT: Final = "attribute_not_exists(#pk)"
_ABSENT_NAMES: Final = {"#pk": table_layout.TABLE_PARTITION_KEY}
# The outbox put is unconditional: the inbox condition already decides for the pair,
# and a transaction is all-or-nothing.

# Codes that mean "try again later"; the SDK has already retried them (see the
# client's retry config), so reaching here means the budget is spent.
_TRANSIENT_ERRORS: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionInProgressException",
    }
)
_TRANSIENT_REASONS: Final = frozenset(
    {"ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict"}
)
_CONDITION_FAILED: Final = "ConditionalCheckFailed"
# Two attempts of one delivery may overlap (contract section 1); DynamoDB then cancels
# one transaction with TransactionConflict. Re-running it a moment later lets it see the
# winner's item and answer "duplicate" instead of a 503 and a sender retry.
_CONFLICT_ATTEMPTS: Final = 3
_CONFLICT_BACKOFF_SECONDS: Final = 0.02


class DynamoDbInbox:
    """:class:`functions.core.accept.InboxWriter` on the single table."""

    def __init__(self, client: Any, table_name: str) -> None:
        """Args:
        client: a boto3 DynamoDB client (low-level), configured with bounded retries.
        table_name: the stack's table.
        """
        self._client = client
        self._table = table_name

    def record(self, inbox: InboxItem, work: WorkItem | None) -> InboxItem | None:
        """Put the inbox item and its outbox record in one transaction, if new.

        Returns:
            None when written, else the stored inbox item (from the cancellation
            reason's ``ALL_OLD`` image: no second read).

        Raises:
            StorageUnavailable: throttled, failed or still conflicting; nothing written.
        """
        transact: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": items.inbox_to_item(inbox),
                    "ConditionExpression": _ABSENT,
                    "ExpressionAttributeNames": _ABSENT_NAMES,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        ]
        if work is not None:
            outbox = items.outbox_to_item(work, created_at=inbox.received_at)
            transact.append({"Put": {"TableName": self._table, "Item": outbox}})
        for attempt in range(1, _CONFLICT_ATTEMPTS + 1):
            try:
                self._client.transact_write_items(TransactItems=transact)
            except ClientError as exc:
                existing = _existing_inbox(exc)
                if existing is not None:
                    return existing
                if _is_conflict(exc) and attempt < _CONFLICT_ATTEMPTS:
                    time.sleep(_CONFLICT_BACKOFF_SECONDS * attempt)
                    continue
                if _is_transient(exc):
                    raise StorageUnavailable() from exc
                raise
            except (HTTPClientError, BotocoreConnectionError) as exc:
                raise StorageUnavailable() from exc
            return None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def quarantine(self, record: QuarantineRecord) -> None:
        """Put the quarantine record unless this conflicting digest is already kept.

        Raises:
            StorageUnavailable: throttled or failed.
        """
        try:
            self._client.put_item(
                TableName=self._table,
                Item=items.quarantine_to_item(record),
                ConditionExpression=_ABSENT,
                ExpressionAttributeNames=_ABSENT_NAMES,
            )
        except ClientError as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return  # already quarantined by an earlier attempt of this forgery
            if _is_transient(exc):
                raise StorageUnavailable() from exc
            raise
        except (HTTPClientError, BotocoreConnectionError) as exc:
            raise StorageUnavailable() from exc


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _reasons(exc: ClientError) -> list[dict[str, Any]]:
    if _error_code(exc) != "TransactionCanceledException":
        return []
    reasons = exc.response.get("CancellationReasons")
    return list(reasons) if isinstance(reasons, list) else []


def _existing_inbox(exc: ClientError) -> InboxItem | None:
    """The stored inbox item when the transaction failed only on its condition."""
    reasons = _reasons(exc)
    if not reasons or reasons[0].get("Code") != _CONDITION_FAILED:
        return None
    old = reasons[0].get("Item")
    if not old:
        # ALL_OLD was asked for; an empty image would mean the condition failed on an
        # item that does not exist, which DynamoDB does not do. Treat it as transient.
        return None
    return items.inbox_from_item(old)


def _is_conflict(exc: ClientError) -> bool:
    return any(r.get("Code") == "TransactionConflict" for r in _reasons(exc))


def _is_transient(exc: ClientError) -> bool:
    """True for the weather we know; anything else is a bug or misconfiguration."""
    if _error_code(exc) in _TRANSIENT_ERRORS:
        return True
    codes = {r.get("Code") for r in _reasons(exc)} - {"None", None}
    return bool(codes) and codes <= _TRANSIENT_REASONS
