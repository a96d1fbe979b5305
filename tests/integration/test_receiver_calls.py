"""How many AWS calls each outcome costs, observed through botocore's event hooks."""

from __future__ import annotations

from typing import Any

import pytest

from local.testkit import builders, vectors
from tests.receiver_harness import Receiver

VECTORS = vectors.load_vectors()
NOW = VECTORS.now
SECRET = VECTORS.cases[0].secrets[0]
# DynamoDB calls per outcome in a warm container (the signing secrets already cached).
DYNAMODB_CALLS = {
    "accepted": ["TransactWriteItemsx1"],
    "ignored": ["TransactWriteItemsx1"],
    "duplicate": ["TransactWriteItemsx1"],
    "quarantined": ["PutItemx1", "TransactWriteItemsx1"],
    "rejected": [],
    "invalid": [],
}


def _warm(receiver: Receiver, secrets: list[str]) -> None:
    """Fill the secrets cache with one verified ping, then forget the calls it made."""
    ping = builders.signed_request(timestamp=NOW, secrets=secrets[0], event="ping")
    assert receiver.invoke(builders.event_for(ping)).outcome == "ignored"
    receiver.world.clear()
    receiver.calls.reset()


@pytest.mark.parametrize("case", VECTORS.cases, ids=lambda c: c.name)
def test_receiver_calls_per_vector_case_when_warm(receiver_factory: Any, case: Any) -> None:
    receiver = receiver_factory(case.secrets, now=NOW)
    _warm(receiver, case.secrets)

    response = receiver.invoke(builders.http_api_event(case.request.headers, case.request.body))

    assert response.outcome == case.request.expect_outcome
    assert receiver.calls.operations() == DYNAMODB_CALLS[response.outcome]


@pytest.mark.parametrize("sequence", VECTORS.sequences, ids=lambda s: s.name)
def test_receiver_calls_per_vector_sequence_step(receiver_factory: Any, sequence: Any) -> None:
    receiver = receiver_factory(sequence.secrets, now=NOW)
    _warm(receiver, sequence.secrets)

    for step in sequence.steps:
        receiver.calls.reset()
        response = receiver.invoke(builders.http_api_event(step.headers, step.body))
        assert response.outcome == step.expect_outcome
        assert receiver.calls.operations() == DYNAMODB_CALLS[response.outcome]


@pytest.mark.parametrize("case", VECTORS.cases, ids=lambda c: c.name)
def test_receiver_cold_container_touches_dynamodb_only_after_verification(
    receiver_factory: Any, case: Any
) -> None:
    receiver = receiver_factory(case.secrets, now=NOW)

    response = receiver.invoke(builders.http_api_event(case.request.headers, case.request.body))

    dynamodb = receiver.calls.count("dynamodb")
    secrets = receiver.calls.count("secretsmanager")
    if response.outcome in ("rejected", "invalid"):
        assert dynamodb == 0
    else:
        assert dynamodb == 1
    # Header-only failures (missing, malformed or stale) never fetch the secrets.
    header_only = response.reason in (
        "missing_signature_headers",
        "malformed_timestamp",
        "timestamp_out_of_tolerance",
    ) or (response.reason == "no_matching_signature" and "v1," not in str(case.request.headers))
    assert secrets == (0 if header_only else 1)


def test_receiver_too_large_body_costs_no_call_even_when_cold(receiver_factory: Any) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    request = builders.signed_request(timestamp=NOW, secrets=SECRET, padding="x" * 256 * 1024)

    response = receiver.invoke(builders.event_for(request))

    assert (response.status, response.outcome) == (413, "too_large")
    assert receiver.calls.count() == 0


def test_receiver_fetches_secrets_once_across_100_requests(receiver_factory: Any) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    outcomes: list[str] = []
    # Every one of these needs the secrets: 20 new, 20 retries, 40 wrongly signed, 20 invalid.
    for _ in range(20):
        first = builders.signed_request(timestamp=NOW, secrets=SECRET)
        retry = builders.signed_request(
            timestamp=NOW + 30, secrets=SECRET, delivery_id=first.delivery_id, attempt=2
        )
        forged = builders.signed_request(timestamp=NOW, secrets=builders.OTHER_SECRET)
        invalid = builders.signed_request(timestamp=NOW, secrets=SECRET, package_id=None)
        for request in (first, retry, forged, forged, invalid):
            outcomes.append(receiver.invoke(builders.event_for(request)).outcome)

    assert len(outcomes) == 100
    assert outcomes.count("accepted") == outcomes.count("duplicate") == 20
    assert outcomes.count("rejected") == 40
    assert outcomes.count("invalid") == 20
    assert receiver.calls.operations("secretsmanager") == ["GetSecretValuex1"]
    assert receiver.calls.operations("dynamodb") == ["TransactWriteItemsx40"]
    assert receiver.work_items() == 20


def test_receiver_repeated_quarantine_keeps_the_first_record(receiver_factory: Any) -> None:
    receiver = receiver_factory([SECRET], now=NOW)
    delivery_id = builders.new_delivery_id()
    original = builders.signed_request(timestamp=NOW, secrets=SECRET, delivery_id=delivery_id)
    forged = builders.signed_request(
        timestamp=NOW, secrets=SECRET, delivery_id=delivery_id, package_id="pkg_other"
    )
    assert receiver.invoke(builders.event_for(original)).outcome == "accepted"
    assert receiver.invoke(builders.event_for(forged)).outcome == "quarantined"
    first = receiver.of_kind("quarantine")
    receiver.clock.value = NOW + 60
    receiver.calls.reset()

    again = receiver.invoke(builders.event_for(forged))

    assert (again.status, again.outcome) == (409, "quarantined")
    assert receiver.calls.operations() == ["PutItemx1", "TransactWriteItemsx1"]
    assert receiver.of_kind("quarantine") == first  # same record, first time kept
    assert receiver.work_items() == 1
