"""DynamoDB's refusals as the boto3 client raises them: botocore ``ClientError``s with
the service's codes, messages and extra fields (``Item``, ``CancellationReasons``)."""

from __future__ import annotations

from typing import Any, Final

from botocore.exceptions import ClientError

from local.memory_dynamodb.values import Item

CONDITION_FAILED_MESSAGE: Final = "The conditional request failed"


def _error(operation: str, code: str, message: str, **extra: Any) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        "message": message,
        **extra,
    }
    return ClientError(response, operation)  # type: ignore[arg-type]


def validation(operation: str, message: str) -> ClientError:
    return _error(operation, "ValidationException", message)


def resource_not_found(operation: str) -> ClientError:
    return _error(operation, "ResourceNotFoundException", "Requested resource not found")


def condition_failed(operation: str, item: Item | None) -> ClientError:
    """A refused condition; ``item`` is the stored item when the request asked for it
    (``ReturnValuesOnConditionCheckFailure=ALL_OLD``) and one exists."""
    extra = {"Item": item} if item is not None else {}
    return _error(operation, "ConditionalCheckFailedException", CONDITION_FAILED_MESSAGE, **extra)


def transaction_cancelled(reasons: list[dict[str, Any]]) -> ClientError:
    """A cancelled transaction: one reason per action, in the request's order."""
    codes = ", ".join(str(reason["Code"]) for reason in reasons)
    return _error(
        "TransactWriteItems",
        "TransactionCanceledException",
        f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
        CancellationReasons=reasons,
    )
