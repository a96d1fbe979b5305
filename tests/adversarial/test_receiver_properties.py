"""Properties of the receiver's answers, over arbitrary input (handler on in-memory fakes).

Each property runs 1,000 derandomized examples (``@settings(max_examples=1000, ...)``
on every one) and asserts afterwards that its check really ran that many times.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.core import accept, errors, wire
from functions.core.delivery import InvalidReason
from functions.core.models import Outcome
from functions.core.signature import RejectReason
from functions.receiver import handler
from tests.adversarial import fake_receiver, strategies
from tests.adversarial.strategies import NOW, REPRODUCIBLE, SignedBody

OUTCOMES = {o.value for o in Outcome}
REASONS = (
    {r.value for r in RejectReason}
    | {r.value for r in InvalidReason}
    | {accept.REASON_TOO_LARGE, accept.REASON_NOT_PROCESSED, accept.REASON_DIGEST_MISMATCH}
    | {handler.REASON_MALFORMED_EVENT, handler.REASON_MISCONFIGURED, handler.REASON_INTERNAL}
    | {errors.StorageUnavailable.code, errors.SigningSecretsUnavailable.code}
    | {"signing_secrets_malformed"}
)
# Every text a response can consist of: an input found inside it is not an echo.
VOCABULARY = " ".join(sorted(OUTCOMES | REASONS)) + ' {"outcome": "reason": null} application/json'


@pytest.fixture(autouse=True)
def _uninstall() -> Iterator[None]:
    yield
    handler.container_deps.reset()


def _well_formed(answer: fake_receiver.Answer, inputs: list[str]) -> None:
    """A fixed vocabulary in a fixed shape, no input echoed, one log line with no input."""
    assert set(answer.data) == {"outcome", "reason"}
    assert answer.data["outcome"] in OUTCOMES
    assert answer.data["reason"] is None or answer.data["reason"] in REASONS
    assert answer.status == accept.STATUS[Outcome(answer.data["outcome"])]
    assert answer.headers == {"Content-Type": "application/json"}
    (line,) = answer.logged
    assert (line["outcome"], line["reason"], line["status"]) == (
        answer.data["outcome"],
        answer.data["reason"],
        answer.status,
    )
    if answer.status in (401, 413) or answer.data["reason"] == handler.REASON_MALFORMED_EVENT:
        assert line["delivery_id"] is None  # unverified: the header is the caller's text
    raw = answer.body + json.dumps(answer.headers)
    # Values only: the keys are the logger's own field names, never input.
    logged = json.dumps([v for k, v in line.items() if k != "api_request_id"])
    for text in inputs:
        if len(text) >= 4 and text not in VOCABULARY:
            assert text not in raw
            assert text not in logged


def _parsed(body: bytes) -> tuple[bool, Any]:
    try:
        return True, json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False, None


def test_property_arbitrary_requests_get_a_fixed_4xx_and_touch_no_storage() -> None:
    receiver = fake_receiver.install(now=NOW)
    runs: list[int] = []

    @settings(REPRODUCIBLE, max_examples=1000, deadline=None)
    @given(strategies.hostile_events())
    def check(case: tuple[Any, list[str]]) -> None:
        runs.append(1)
        event, inputs = case
        answer = receiver.invoke(event)
        _well_formed(answer, inputs)
        assert answer.status in (400, 401, 413)
        assert receiver.inbox.calls == 0
        assert receiver.inbox.empty()

    check()
    assert len(runs) >= 1000


def test_property_a_request_changed_after_signing_is_401_and_touches_no_storage() -> None:
    receiver = fake_receiver.install(now=NOW)
    seen: set[str] = set()
    runs: list[int] = []

    @settings(REPRODUCIBLE, max_examples=1000, deadline=None)
    @given(strategies.tampered_events())
    def check(case: tuple[dict[str, Any], str]) -> None:
        runs.append(1)
        event, how = case
        seen.add(how)
        answer = receiver.invoke(event)
        headers = event["headers"]
        _well_formed(answer, [headers[wire.HEADER_DELIVERY], headers[wire.HEADER_SIGNATURE]])
        assert (answer.status, answer.data["reason"]) == (401, RejectReason.NO_MATCH)
        assert receiver.inbox.calls == 0
        assert receiver.inbox.empty()

    check()
    assert len(runs) >= 1000
    assert seen == set(strategies.TAMPERINGS)


def test_property_validly_signed_bodies_get_consistent_outcomes() -> None:
    receiver = fake_receiver.install(now=NOW)
    runs: list[int] = []

    @settings(REPRODUCIBLE, max_examples=1000, deadline=None)
    @given(strategies.signed_bodies())
    def check(case: SignedBody) -> None:
        runs.append(1)
        receiver.inbox.clear()
        answer = receiver.invoke(strategies.signed_event(case))
        _well_formed(answer, [])
        outcome, reason = answer.data["outcome"], answer.data["reason"]
        ok, data = _parsed(case.body)
        stored = receiver.inbox.stored(case.delivery_id)
        assert outcome in ("accepted", "ignored", "invalid")
        if case.clean:
            assert outcome == ("accepted" if case.event == "package.received" else "ignored")
        if outcome == "invalid":
            assert receiver.inbox.empty()
            assert reason in {r.value for r in InvalidReason}
            assert (reason == InvalidReason.NOT_JSON) is (not ok)
            if ok and not isinstance(data, dict):
                assert reason in (InvalidReason.NOT_OBJECT, InvalidReason.DUPLICATE_FIELD)
            return
        assert ok and isinstance(data, dict)
        assert data["delivery_id"] == case.delivery_id == case.delivery_id.lower()
        assert data["event"] == case.event
        assert stored is not None
        inbox, work = stored
        assert inbox.body_sha256 == hashlib.sha256(case.body).hexdigest()
        if outcome == "accepted":
            assert case.event == "package.received"
            assert (inbox.package_id, inbox.mcp_url) == (data["package_id"], data["mcp_url"])
            assert work is not None and work.mcp_url == data["mcp_url"]
        else:
            assert case.event != "package.received" and work is None

    check()
    assert len(runs) >= 1000


def test_property_injected_faults_are_503_only_where_storage_or_secrets_are_reached() -> None:
    healthy = fake_receiver.install(now=NOW)
    healthy_deps = handler.container_deps.get()
    faulty = fake_receiver.install(now=NOW)
    faulty_deps = handler.container_deps.get()
    faulty.inbox.fail = True
    runs: list[int] = []

    @settings(REPRODUCIBLE, max_examples=1000, deadline=None)
    @given(strategies.signed_bodies(), st.booleans())
    def check(case: SignedBody, secrets_fail: bool) -> None:
        runs.append(1)
        healthy.inbox.clear()
        faulty.secrets.fail = secrets_fail
        event = strategies.signed_event(case)
        handler.container_deps.set(healthy_deps)
        expected = healthy.invoke(event)
        handler.container_deps.set(faulty_deps)
        answer = faulty.invoke(event)
        _well_formed(answer, [])
        if secrets_fail:
            assert (answer.status, answer.data["reason"]) == (503, "signing_secrets_unavailable")
        elif expected.status == 400:
            assert answer.data == expected.data  # storage never reached
        else:
            assert (answer.status, answer.data["reason"]) == (503, "storage_unavailable")
        assert faulty.inbox.empty()

    check()
    assert len(runs) >= 1000


def test_property_a_second_attempt_is_a_duplicate_exactly_when_the_bytes_are_equal() -> None:
    receiver = fake_receiver.install(now=NOW)
    counter = [0]
    runs: list[int] = []

    @settings(REPRODUCIBLE, max_examples=1000, deadline=None)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        runs.append(1)
        delivery_id = strategies.fresh_id(counter)
        first = data.draw(strategies.signed_bodies(delivery_id=delivery_id))
        if data.draw(st.booleans()):
            second = first
        else:
            second = data.draw(strategies.signed_bodies(delivery_id=delivery_id))
        receiver.invoke(strategies.signed_event(first))
        stored = receiver.inbox.stored(first.delivery_id)
        quarantined = len(receiver.inbox.quarantined)
        # Sometimes the quarantine write fails: the conflict is then a 503, not a 409.
        receiver.inbox.fail_quarantine = quarantine_fails = data.draw(st.booleans())
        try:
            answer2 = receiver.invoke(strategies.signed_event(second, timestamp=NOW + 30))
        finally:
            receiver.inbox.fail_quarantine = False
        _well_formed(answer2, [])
        if stored is None or second.delivery_id != first.delivery_id:
            return  # the second attempt stands alone (the other properties cover it)
        assert receiver.inbox.stored(first.delivery_id) == stored  # the first write stands
        if second.body == first.body:
            assert (answer2.status, answer2.data["outcome"]) == (200, "duplicate")
        elif answer2.data["outcome"] == "invalid":
            assert len(receiver.inbox.quarantined) == quarantined
        elif quarantine_fails:
            assert (answer2.status, answer2.data["reason"]) == (503, "storage_unavailable")
            assert len(receiver.inbox.quarantined) == quarantined
        else:
            assert (answer2.status, answer2.data["outcome"]) == (409, "quarantined")
            assert len(receiver.inbox.quarantined) == quarantined + 1
            received_sha256 = hashlib.sha256(second.body).hexdigest()
            record = receiver.inbox.quarantined[(first.delivery_id, received_sha256)]
            assert record.stored_sha256 == stored[0].body_sha256

    check()
    assert len(runs) >= 1000
