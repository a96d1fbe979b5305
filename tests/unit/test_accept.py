"""The accept use case against in-memory fakes of its ports (no AWS, no moto)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest

from functions.core import wire
from functions.core.accept import STATUS, Acceptance, AcceptDelivery
from functions.core.models import InboxItem, Outcome, QuarantineRecord, State, WorkItem
from local.testkit import builders
from local.testkit.clock import FakeClock
from tests.fakes import FakeInbox, FakeSecrets

NOW = 1_764_687_845
RETENTION = 30 * 24 * 3600


@dataclass
class Harness:
    inbox: FakeInbox
    secrets: FakeSecrets
    clock: FakeClock
    accept: AcceptDelivery

    def __call__(self, request: builders.SignedRequest) -> Acceptance:
        headers = {k.lower(): v for k, v in request.headers.items()}
        return self.accept(headers, request.body)


def assert_unavailable(result: Acceptance, reason: str) -> None:
    """A 503: RelayLink retries it."""
    assert (result.outcome, result.status, result.reason) == (Outcome.UNAVAILABLE, 503, reason)


@pytest.fixture
def harness() -> Harness:
    inbox, secrets, clock = FakeInbox(), FakeSecrets([builders.SECRET]), FakeClock(NOW)
    accept = AcceptDelivery(inbox=inbox, secrets=secrets, clock=clock, retention_seconds=RETENTION)
    return Harness(inbox, secrets, clock, accept)


def test_accept_new_delivery_writes_inbox_and_work_item(harness: Harness) -> None:
    request = builders.signed_request(timestamp=NOW - 10)

    result = harness(request)

    assert (result.outcome, result.status, result.reason) == (Outcome.ACCEPTED, 202, None)
    assert result.delivery_id == request.delivery_id
    assert harness.inbox.inbox[request.delivery_id] == InboxItem(
        delivery_id=request.delivery_id,
        event="package.received",
        body_sha256=hashlib.sha256(request.body).hexdigest(),
        received_at=NOW,
        state=State.PENDING,
        expires_at=NOW + RETENTION,
        package_id=builders.PACKAGE_ID,
        mcp_url=builders.MCP_URL,
        state_changed_at=NOW,
    )
    assert harness.inbox.outbox[request.delivery_id] == WorkItem(
        request.delivery_id, "package.received", builders.PACKAGE_ID, builders.MCP_URL
    )
    assert harness.inbox.calls == 1


def test_accept_retry_with_new_signature_is_duplicate_and_adds_nothing(harness: Harness) -> None:
    first = builders.signed_request(timestamp=NOW)
    retry = builders.signed_request(timestamp=NOW + 40, delivery_id=first.delivery_id, attempt=2)
    assert first.headers["X-RelayLink-Signature"] != retry.headers["X-RelayLink-Signature"]
    harness(first)
    harness.clock.value = NOW + 40

    result = harness(retry)

    assert (result.outcome, result.status, result.reason) == (Outcome.DUPLICATE, 200, None)
    assert len(harness.inbox.outbox) == 1
    assert harness.inbox.inbox[first.delivery_id].received_at == NOW


def test_accept_same_id_other_bytes_is_quarantined_and_original_kept(harness: Harness) -> None:
    first = builders.signed_request(timestamp=NOW)
    forged = builders.signed_request(
        timestamp=NOW, delivery_id=first.delivery_id, package_id="pkg_forged"
    )
    harness(first)
    original = harness.inbox.inbox[first.delivery_id]

    result = harness(forged)

    assert (result.outcome, result.status) == (Outcome.QUARANTINED, 409)
    assert result.reason == "body_digest_mismatch"
    assert harness.inbox.inbox[first.delivery_id] == original
    assert list(harness.inbox.outbox.values()) == [original.work_item()]
    assert list(harness.inbox.quarantined.values()) == [
        QuarantineRecord(
            delivery_id=first.delivery_id,
            event="package.received",
            stored_sha256=hashlib.sha256(first.body).hexdigest(),
            received_sha256=hashlib.sha256(forged.body).hexdigest(),
            quarantined_at=NOW,
            expires_at=NOW + RETENTION,
        )
    ]


@pytest.mark.parametrize("event", ["ping", "package.archived"])
def test_accept_ping_and_unknown_events_are_recorded_without_work(
    harness: Harness, event: str
) -> None:
    request = builders.signed_request(timestamp=NOW, event=event)

    result = harness(request)

    assert (result.outcome, result.status) == (Outcome.IGNORED, 200)
    assert harness.inbox.inbox[request.delivery_id].state is State.IGNORED
    assert harness.inbox.inbox[request.delivery_id].package_id is None
    assert harness.inbox.outbox == {}


def test_accept_two_deliveries_of_one_package_are_both_accepted(harness: Harness) -> None:
    results = [harness(builders.signed_request(timestamp=NOW)) for _ in range(2)]
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.ACCEPTED]
    assert len(harness.inbox.outbox) == 2


def test_accept_oversized_body_is_refused_before_anything_else(harness: Harness) -> None:
    request = builders.signed_request(timestamp=NOW, padding="x" * wire.MAX_BODY_BYTES)
    result = harness(request)
    assert (result.outcome, result.status) == (Outcome.TOO_LARGE, 413)
    assert (harness.secrets.calls, harness.inbox.calls) == (0, 0)


def test_accept_body_of_exactly_the_limit_is_looked_at(harness: Harness) -> None:
    base = builders.signed_request(timestamp=NOW)
    pad = wire.MAX_BODY_BYTES - len(base.body) - len(',"padding":""')
    request = builders.signed_request(
        timestamp=NOW, delivery_id=base.delivery_id, padding="x" * pad
    )
    assert len(request.body) == wire.MAX_BODY_BYTES
    assert harness(request).outcome is Outcome.ACCEPTED


@pytest.mark.parametrize("timestamp", [NOW - 301, NOW + 301])
def test_accept_stale_request_is_rejected_without_fetching_secrets(
    harness: Harness, timestamp: int
) -> None:
    result = harness(builders.signed_request(timestamp=timestamp))
    assert (result.outcome, result.status, result.delivery_id) == (Outcome.REJECTED, 401, None)
    assert (harness.secrets.calls, harness.inbox.calls) == (0, 0)


def test_accept_wrong_secret_is_rejected_without_touching_storage(harness: Harness) -> None:
    first = builders.signed_request(timestamp=NOW)
    harness(first)
    forged_retry = builders.signed_request(
        timestamp=NOW, delivery_id=first.delivery_id, secrets=builders.OTHER_SECRET
    )
    calls_before = harness.inbox.calls

    result = harness(forged_retry)

    assert (result.outcome, result.reason, result.delivery_id) == (
        Outcome.REJECTED,
        "no_matching_signature",
        None,
    )
    assert harness.inbox.calls == calls_before


def test_accept_rotation_accepts_either_known_secret(harness: Harness) -> None:
    harness.secrets.secrets = [builders.SECRET, builders.OTHER_SECRET]
    for secret in (builders.SECRET, builders.OTHER_SECRET):
        assert harness(builders.signed_request(timestamp=NOW, secrets=secret)).outcome is (
            Outcome.ACCEPTED
        )


def test_accept_contract_violation_is_invalid_without_touching_storage(harness: Harness) -> None:
    request = builders.signed_request(timestamp=NOW, package_id=None)
    result = harness(request)
    assert (result.outcome, result.status, result.reason) == (
        Outcome.INVALID,
        400,
        "package_id_missing",
    )
    assert harness.inbox.calls == 0


def test_accept_package_id_that_no_fetch_could_carry_is_refused_at_once(
    harness: Harness,
) -> None:
    # JSON can spell a lone surrogate; stored, it would fail every fetch until the
    # delivery dead-lettered. Refused now, RelayLink's sender sees the 400.
    delivery_id = builders.new_delivery_id()
    body = builders.delivery_body(delivery_id, package_id="pkg_<x>").replace(b"<x>", b"\\ud800")
    result = harness(builders.signed_request(timestamp=NOW, delivery_id=delivery_id, body=body))
    assert (result.outcome, result.status, result.reason) == (
        Outcome.INVALID,
        400,
        "package_id_invalid",
    )
    assert harness.inbox.calls == 0


def test_accept_event_header_differing_from_body_is_invalid(harness: Harness) -> None:
    request = builders.signed_request(timestamp=NOW)
    headers = {k.lower(): v for k, v in request.headers.items()}
    headers[wire.HEADER_EVENT] = "ping"
    result = harness.accept(headers, request.body)
    assert (result.outcome, result.reason) == (Outcome.INVALID, "event_mismatch")


def test_accept_storage_unavailable_is_503(harness: Harness) -> None:
    harness.inbox.fail = True
    result = harness(builders.signed_request(timestamp=NOW))
    assert_unavailable(result, "storage_unavailable")


def test_accept_quarantine_write_failure_is_503(harness: Harness) -> None:
    first = builders.signed_request(timestamp=NOW)
    harness(first)
    harness.inbox.fail = True
    forged = builders.signed_request(timestamp=NOW, delivery_id=first.delivery_id, mcp_url="x")
    assert harness(forged).outcome is Outcome.UNAVAILABLE


def test_accept_secrets_unavailable_is_503_without_storage(harness: Harness) -> None:
    harness.secrets.fail = True
    result = harness(builders.signed_request(timestamp=NOW))
    assert_unavailable(result, "signing_secrets_unavailable")
    assert harness.inbox.calls == 0


def test_accept_every_outcome_has_a_status() -> None:
    assert set(STATUS) == set(Outcome)
    assert {o for o, s in STATUS.items() if 200 <= s < 300} == {
        Outcome.ACCEPTED,
        Outcome.DUPLICATE,
        Outcome.IGNORED,
    }
