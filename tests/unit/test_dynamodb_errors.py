"""The DynamoDB error translator: both error shapes, weather versus bugs."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_errors import (
    ConditionFailed,
    condition_failed,
    is_transaction_conflict,
    storage_error,
)
from functions.core.errors import StorageUnavailable

STORED: dynamodb_items.Item = {"pk": {"S": "d-1"}, "state": {"S": "completed"}}


def client_error(code: str, **fields: object) -> ClientError:
    # Untyped: botocore's stubs know no DynamoDB "Item" in an error response.
    response: Any = {"Error": {"Code": code, "Message": "m"}, **fields}
    return ClientError(response, "Operation")


def cancelled(*reasons: dict[str, Any]) -> ClientError:
    return client_error("TransactionCanceledException", CancellationReasons=list(reasons))


def test_condition_failed_of_a_single_write_carries_the_stored_item() -> None:
    exc = client_error("ConditionalCheckFailedException", Item=STORED)
    assert condition_failed(exc) == ConditionFailed(STORED)
    assert condition_failed(client_error("ConditionalCheckFailedException")) == ConditionFailed(
        None
    )


def test_condition_failed_of_a_transaction_action_carries_its_stored_item() -> None:
    exc = cancelled({"Code": "ConditionalCheckFailed", "Item": STORED}, {"Code": "None"})
    assert condition_failed(exc, action=0) == ConditionFailed(STORED)
    assert condition_failed(exc, action=1) is None
    assert condition_failed(exc, action=2) is None


def test_condition_failed_is_none_for_other_errors() -> None:
    assert condition_failed(client_error("ThrottlingException")) is None
    assert condition_failed(cancelled({"Code": "TransactionConflict"})) is None


def test_transaction_conflict_is_read_from_the_cancellation_reasons() -> None:
    assert is_transaction_conflict(cancelled({"Code": "TransactionConflict"}, {"Code": "None"}))
    assert not is_transaction_conflict(cancelled({"Code": "ThrottlingError"}))
    assert not is_transaction_conflict(client_error("TransactionConflictException"))


@pytest.mark.parametrize(
    "code",
    [
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
        "TransactionInProgressException",
    ],
)
def test_storage_error_translates_weather_codes(code: str) -> None:
    assert isinstance(storage_error(client_error(code)), StorageUnavailable)


@pytest.mark.parametrize("reason", ["ThrottlingError", "ProvisionedThroughputExceeded"])
def test_storage_error_translates_a_transaction_cancelled_by_weather(reason: str) -> None:
    exc = cancelled({"Code": reason}, {"Code": "None"})
    assert isinstance(storage_error(exc), StorageUnavailable)


def test_storage_error_keeps_a_transaction_cancelled_by_anything_else() -> None:
    for exc in (
        cancelled({"Code": "ValidationError"}, {"Code": "ThrottlingError"}),
        cancelled({"Code": "ConditionalCheckFailed"}, {"Code": "None"}),
        cancelled({"Code": "None"}),
        client_error("TransactionCanceledException"),
    ):
        assert storage_error(exc) is exc


@pytest.mark.parametrize("code", ["AccessDeniedException", "ValidationException"])
def test_storage_error_keeps_bugs_and_misconfiguration(code: str) -> None:
    exc = client_error(code)
    assert storage_error(exc) is exc


def test_storage_error_translates_an_unreachable_service() -> None:
    exc = EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
    assert isinstance(storage_error(exc), StorageUnavailable)
