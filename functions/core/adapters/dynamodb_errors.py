"""What a DynamoDB failure means: weather (try again later), a refused condition, or a bug.

The only module that knows DynamoDB's error codes. They come in two shapes: a single
request's ``Error.Code`` (``ConditionalCheckFailedException``, ``ThrottlingException``),
and a cancelled transaction's ``CancellationReasons``, one per action, spelled
differently (``ConditionalCheckFailed``, ``ThrottlingError``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from functions.core.adapters.dynamodb_items import Item
from functions.core.errors import StorageUnavailable

_CONDITION_FAILED: Final = "ConditionalCheckFailedException"
_TRANSACTION_CANCELLED: Final = "TransactionCanceledException"
_CONDITION_FAILED_REASON: Final = "ConditionalCheckFailed"
_CONFLICT_REASON: Final = "TransactionConflict"
_NO_REASON: Final = "None"  # an action that did not cause the cancellation

# Codes that mean "try again later". The SDK has already retried those it knows (see
# the client's retry config), so reaching here means the retry budget is spent.
_RETRYABLE_CODES: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",  # a single write met an ongoing transaction
        "TransactionInProgressException",
    }
)
# Refused for capacity, or an internal error after which the write may have happened.
_THROTTLING_CODES: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
# The same weather as the reason a transaction was cancelled.
_RETRYABLE_REASONS: Final = frozenset(
    {"ThrottlingError", "ProvisionedThroughputExceeded", _CONFLICT_REASON}
)


@dataclass(frozen=True, slots=True)
class ConditionFailed:
    """A write's condition was false; nothing was written.

    Attributes:
        stored: the item as it was (asked for with ``ReturnValuesOnConditionCheckFailure
            = ALL_OLD``); None when not asked for or when no item exists.
    """

    stored: Item | None


def condition_failed(exc: ClientError, *, action: int = 0) -> ConditionFailed | None:
    """The refused condition ``exc`` reports, or None when it reports something else.

    Args:
        exc: the error of a single write, or of a transaction.
        action: for a transaction, the index of the action whose condition is meant;
            it must be the only reason for the cancellation.
    """
    code = _code(exc)
    if code == _CONDITION_FAILED:
        return ConditionFailed(_item(exc.response.get("Item")))
    reasons = _cancellation_reasons(exc)
    if len(reasons) <= action or reasons[action].get("Code") != _CONDITION_FAILED_REASON:
        return None
    return ConditionFailed(_item(reasons[action].get("Item")))


def is_throttled(exc: ClientError | BotoCoreError) -> bool:
    """True when the request was refused for capacity (throttled, a transaction cancelled
    only for throttling or conflicts) or its answer never came (a connection or read
    error after which the write may or may not have happened): trying again later can
    succeed, and a write that did happen is refused by its own condition."""
    if isinstance(exc, BotoCoreError):
        return isinstance(exc, HTTPClientError | BotocoreConnectionError)
    return _code(exc) in _THROTTLING_CODES or (
        _code(exc) == _TRANSACTION_CANCELLED and _is_retryable(exc)
    )


def is_transaction_conflict(exc: ClientError) -> bool:
    """True when a transaction was cancelled because another one held one of its items."""
    return any(r.get("Code") == _CONFLICT_REASON for r in _cancellation_reasons(exc))


def storage_error(exc: ClientError | BotoCoreError) -> Exception:
    """The domain error for a throttled or failing store, or ``exc`` itself when it
    says something else (a bug or a misconfiguration should surface as it is)."""
    if isinstance(exc, BotoCoreError) or _is_retryable(exc):
        return StorageUnavailable()
    error: Exception = exc
    return error


def _is_retryable(exc: ClientError) -> bool:
    if _code(exc) in _RETRYABLE_CODES:
        return True
    # A cancelled transaction is weather only when every action that caused it is.
    causes = {r.get("Code") for r in _cancellation_reasons(exc)} - {_NO_REASON, None}
    return bool(causes) and causes <= _RETRYABLE_REASONS


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _cancellation_reasons(exc: ClientError) -> Sequence[Mapping[str, object]]:
    if _code(exc) != _TRANSACTION_CANCELLED:
        return []
    reasons = exc.response.get("CancellationReasons")
    return list(reasons) if isinstance(reasons, list) else []


def _item(value: object) -> Item | None:
    """The stored item an error carries (``ALL_OLD``), or None when it carries none.

    botocore's stubs know no DynamoDB item in an error response; it is the same
    attribute-value map that a read returns.
    """
    return cast("Item", value) if isinstance(value, dict) and value else None
