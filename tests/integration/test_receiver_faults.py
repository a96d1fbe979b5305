"""Storage faults and racing attempts: 503 with nothing half-written; one winner."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from moto.core.models import botocore_stubber

from functions.core import table_layout
from functions.core.adapters import storage_retry
from functions.core.metric_names import METRIC_RECEIPT_RETRIES
from functions.core.observability import logger
from local.testkit import botocore_hooks, builders
from tests.receiver_harness import Receiver, Response

NOW = 1_764_687_845
SECRET = builders.SECRET


def _send_new(receiver: Receiver) -> Response:
    """A new, correctly signed delivery."""
    return receiver.invoke(builders.event_for(builders.signed_request(timestamp=NOW)))


def _cancel_transactions(receiver: Receiver, reason: str, *, times: int | None = None) -> None:
    """The receiver's transactions are cancelled for ``reason`` on the inbox item's put."""
    botocore_hooks.inject_dynamodb_error(
        receiver.dynamodb,
        "TransactWriteItems",
        code="TransactionCanceledException",
        extra={"CancellationReasons": [{"Code": reason}, {"Code": "None"}]},
        times=times,
    )


def retries_counted(caplog: pytest.LogCaptureFixture) -> int:
    """The retries metric's count in the receiver's lines, as Lambda gets them (EMF)."""
    formatter = logger.registered_formatter
    lines = [json.loads(formatter.format(record)) for record in caplog.records]
    return sum(int(sum(line.get(METRIC_RECEIPT_RETRIES, []))) for line in lines)


def _retried_within_the_budget(
    receiver: Receiver, caplog: pytest.LogCaptureFixture, *, calls: int
) -> None:
    """The receipt's transaction was asked ``calls`` times, each retry counted and
    waited for (jittered, growing), and no wait went past the retry budget."""
    assert receiver.calls.operations("dynamodb") == [f"TransactWriteItemsx{calls}"]
    assert len(receiver.waiting.waits) == calls - 1
    assert retries_counted(caplog) == calls - 1
    assert receiver.waiting.elapsed <= storage_retry.BUDGET_SECONDS


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ProvisionedThroughputExceededException", 400),
        ("ThrottlingException", 400),
        ("RequestLimitExceeded", 400),
        ("InternalServerError", 500),
        ("ServiceUnavailable", 503),
    ],
)
def test_receiver_lasting_storage_fault_is_503_after_the_retry_budget_and_writes_nothing(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture, code: str, status: int
) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    botocore_hooks.inject_dynamodb_error(
        receiver.dynamodb, "TransactWriteItems", code=code, status=status
    )
    request = builders.signed_request(timestamp=NOW)

    response = receiver.invoke(builders.event_for(request))

    assert (response.status, response.outcome, response.reason) == (
        503,
        "unavailable",
        "storage_unavailable",
    )
    calls = receiver.calls.count("dynamodb")
    assert calls > 3  # more than botocore's own three attempts
    _retried_within_the_budget(receiver, caplog, calls=calls)
    # The budget ran out: one more wait would have passed it.
    assert receiver.waiting.elapsed > storage_retry.BUDGET_SECONDS - storage_retry.CAP_SECONDS
    assert receiver.items() == []


@pytest.mark.parametrize("reason", ["ThrottlingError", "ProvisionedThroughputExceeded"])
def test_receiver_lasting_throttled_transaction_is_503_and_writes_nothing(
    receiver_factory: Any, reason: str
) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    _cancel_transactions(receiver, reason)

    response = _send_new(receiver)

    assert (response.status, response.outcome) == (503, "unavailable")
    assert receiver.items() == []


@pytest.mark.parametrize(
    "throttled",
    [
        {"code": "ProvisionedThroughputExceededException"},
        {"code": "ThrottlingException"},
        {
            "code": "TransactionCanceledException",
            "extra": {"CancellationReasons": [{"Code": "ThrottlingError"}, {"Code": "None"}]},
        },
    ],
)
def test_receiver_rides_out_passing_throttling_and_accepts(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture, throttled: dict[str, Any]
) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    # Five refusals: more than botocore's own three attempts would ride out.
    botocore_hooks.inject_dynamodb_error(
        receiver.dynamodb, "TransactWriteItems", times=5, **throttled
    )

    response = _send_new(receiver)

    assert (response.status, response.outcome) == (202, "accepted")
    assert receiver.work_items() == 1
    calls = receiver.calls.count("dynamodb")
    _retried_within_the_budget(receiver, caplog, calls=calls)
    # Jittered and growing: no two waits alike, and none above the cap.
    waits = receiver.waiting.waits
    assert len(set(waits)) == len(waits)
    assert max(waits) <= storage_retry.CAP_SECONDS


def test_receiver_lost_answer_of_a_committed_receipt_is_a_duplicate_with_no_new_work(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    lost: list[int] = []

    def lose_the_answer(http_response: Any, **_: Any) -> None:
        # The transaction committed; its answer never reaches the receiver.
        if not lost:
            lost.append(1)
            raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    receiver.dynamodb.meta.events.register_first(
        "after-call.dynamodb.TransactWriteItems", lose_the_answer
    )

    response = _send_new(receiver)

    assert response.status == 200
    assert response.outcome == "duplicate"
    assert receiver.work_items() == 1
    assert len(receiver.of_kind(table_layout.KIND_INBOX)) == 1
    assert retries_counted(caplog) >= 1


def test_receiver_connection_failure_is_503(receiver_factory: Any) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    attempts: list[int] = []

    def refuse(request: Any, **_: Any) -> None:
        attempts.append(1)
        raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    receiver.dynamodb.meta.events.register_first("before-send.dynamodb.TransactWriteItems", refuse)

    response = _send_new(receiver)

    assert (response.status, response.outcome) == (503, "unavailable")
    assert len(attempts) > 3  # botocore's three, then the receiver's own retries
    assert receiver.waiting.elapsed <= storage_retry.BUDGET_SECONDS
    assert receiver.items() == []


def test_receiver_lasting_transaction_conflict_is_503_after_bounded_reruns(
    receiver_factory: Any,
) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    _cancel_transactions(receiver, "TransactionConflict")

    response = _send_new(receiver)

    assert (response.status, response.outcome) == (503, "unavailable")
    assert receiver.calls.operations("dynamodb") == ["TransactWriteItemsx3"]
    assert receiver.items() == []


def test_receiver_passing_transaction_conflict_is_rerun_and_accepted(
    receiver_factory: Any,
) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    _cancel_transactions(receiver, "TransactionConflict", times=1)

    response = _send_new(receiver)

    assert (response.status, response.outcome) == (202, "accepted")
    assert receiver.calls.operations("dynamodb") == ["TransactWriteItemsx2"]
    assert receiver.work_items() == 1


def test_receiver_unexpected_storage_error_is_503_without_its_message(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    botocore_hooks.inject_dynamodb_error(
        receiver.dynamodb, "TransactWriteItems", code="AccessDeniedException"
    )

    response = _send_new(receiver)

    assert (response.status, response.outcome, response.reason) == (
        503,
        "unavailable",
        "internal_error",
    )
    (failure,) = [r for r in caplog.records if r.getMessage() == "receiver failed unexpectedly"]
    assert failure.error_type == "ClientError"  # type: ignore[attr-defined]
    assert any("dynamodb_inbox.py" in frame for frame in failure.where)  # type: ignore[attr-defined]
    logged = " ".join(str(vars(r)) for r in caplog.records)
    assert "injected" not in logged  # the provider's message is not logged
    assert receiver.items() == []


def test_receiver_quarantine_write_fault_is_503_and_leaves_the_original(
    receiver_factory: Any,
) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    original = builders.signed_request(timestamp=NOW)
    forged = builders.signed_request(
        timestamp=NOW, delivery_id=original.delivery_id, package_id="pkg_forged"
    )
    assert receiver.invoke(builders.event_for(original)).outcome == "accepted"
    before = receiver.items()
    botocore_hooks.inject_dynamodb_error(
        receiver.dynamodb, "PutItem", code="ProvisionedThroughputExceededException", times=3
    )

    first = receiver.invoke(builders.event_for(forged))
    second = receiver.invoke(builders.event_for(forged))  # the sender's retry, fault gone

    assert (first.status, first.outcome) == (503, "unavailable")
    assert (second.status, second.outcome) == (409, "quarantined")
    after = receiver.items()
    assert [i for i in after if i["kind"]["S"] != "quarantine"] == before
    assert len(after) == len(before) + 1


def test_receiver_secrets_unavailable_is_503_and_touches_no_table(receiver_factory: Any) -> None:
    receiver = receiver_factory([SECRET], now=NOW)

    def refuse(request: Any, **_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://secretsmanager.us-east-1.amazonaws.com")

    receiver.secretsmanager.meta.events.register_first("before-send.secrets-manager", refuse)

    response = _send_new(receiver)

    assert (response.status, response.outcome, response.reason) == (
        503,
        "unavailable",
        "signing_secrets_unavailable",
    )
    assert receiver.calls.count("dynamodb") == 0


@pytest.mark.parametrize(
    "value", ["not json", "[]", '["not-a-secret"]', '{"a": 1}', '["whsec_!!"]', "[1]"]
)
def test_receiver_malformed_secret_value_is_503(receiver_factory: Any, value: str) -> None:
    receiver = receiver_factory([SECRET], now=NOW, secret_value=value)

    response = _send_new(receiver)

    assert (response.status, response.outcome) == (503, "unavailable")
    assert receiver.calls.count("dynamodb") == 0


def _serialize_moto(clients: list[Any], *, arrivals: threading.Barrier) -> None:
    """Let moto answer one DynamoDB request at a time, after all racers have arrived.

    moto's in-process backend is not thread-safe: measured on 100 unserialized races,
    3 gave two 202s and 15 crashed inside moto ("dictionary changed size during
    iteration"). DynamoDB itself serializes writes to one item, so the test does the
    same at the transport: each racer builds and sends its transaction concurrently
    (the barrier makes both be in flight together), then moto handles them in turn.
    """
    lock = threading.Lock()

    def one_at_a_time(request: Any, event_name: str, **kwargs: Any) -> Any:
        if event_name.endswith("TransactWriteItems"):
            arrivals.wait(timeout=10)
        with lock:
            response = botocore_stubber(event_name=event_name, request=request, **kwargs)
        botocore_hooks.divert_from_emulator(request)  # answered: moto's own hook must skip it
        return response

    for client in clients:
        client.meta.events.register_first("before-send.dynamodb", one_at_a_time)


def test_receiver_two_racing_attempts_make_one_work_item(receiver_factory: Any) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    first = builders.signed_request(timestamp=NOW)
    retry = builders.signed_request(timestamp=NOW + 20, delivery_id=first.delivery_id, attempt=2)
    _serialize_moto([receiver.dynamodb], arrivals=threading.Barrier(2))
    start = threading.Barrier(2)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def attempt(request: builders.SignedRequest) -> None:
        try:
            start.wait(timeout=10)
            statuses.append(receiver.invoke(builders.event_for(request)).status)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(r,)) for r in (first, retry)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    assert sorted(statuses) == [200, 202]
    assert receiver.work_items() == 1
    assert len(receiver.of_kind("inbox")) == 1
