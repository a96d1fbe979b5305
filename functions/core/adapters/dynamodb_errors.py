"""Which DynamoDB failures mean "try again later" (and nothing else)."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from functions.core.errors import StorageUnavailable

_RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)


def storage_error(exc: ClientError | BotoCoreError) -> Exception:
    """The domain error for a throttled or failing store, or ``exc`` itself when it
    says something else (a bug or a misconfiguration should surface as it is)."""
    if isinstance(exc, BotoCoreError):
        return StorageUnavailable()
    if exc.response.get("Error", {}).get("Code") in _RETRYABLE_CODES:
        return StorageUnavailable()
    error: Exception = exc
    return error
