"""Every hostile corpus case through the real handler against moto: answer and storage."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from functions.core import names
from functions.core.adapters import dynamodb_items as items
from functions.core.host_policy import HostPolicy
from functions.core.models import State
from tests.adversarial import corpus
from tests.adversarial.corpus import CORPUS, HostileCase
from tests.integration.receiver_harness import receiver_factory, world

__all__ = ["receiver_factory", "world"]  # fixtures

POLICY = HostPolicy(corpus.ALLOWED_HOSTS)
OUTCOMES = {"accepted", "duplicate", "ignored", "rejected", "invalid", "quarantined", "too_large"}


def test_hostile_corpus_has_at_least_fifty_named_cases() -> None:
    assert len(CORPUS) >= 50
    assert len({case.name for case in CORPUS}) == len(CORPUS)
    assert len({case.category for case in CORPUS}) >= 10


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_hostile_corpus_case(receiver_factory: Any, case: HostileCase) -> None:
    receiver = receiver_factory([corpus.SECRET], now=corpus.NOW)
    for earlier in case.before:
        assert receiver.invoke(earlier).outcome == "accepted"
    before = receiver.items()
    receiver.calls.reset()

    response = receiver.invoke(case.event)

    assert (response.status, response.outcome, response.reason) == (
        case.status,
        case.outcome,
        case.reason,
    )
    assert response.outcome in OUTCOMES
    assert response.content_type == "application/json"
    if case.before:  # nothing the hostile attempt did changed what was stored first
        assert receiver.items() == before
    if case.stores == corpus.NOTHING:
        assert receiver.items() == []
        assert receiver.calls.count("dynamodb") == 0
    else:
        _assert_stored(receiver, case)


def _assert_stored(receiver: Any, case: HostileCase) -> None:
    (stored,) = receiver.of_kind(names.KIND_INBOX)
    inbox = items.inbox_from_item(stored)
    assert inbox.body_sha256 == hashlib.sha256(case.body).hexdigest()
    # Never the body itself (the biggest string field of an item is far smaller).
    assert all(len(json.dumps(v)) < 1024 for v in stored.values())
    if case.stores == corpus.INBOX:
        assert inbox.state is State.IGNORED
        assert receiver.work_items() == 0
        return
    assert inbox.state is State.PENDING
    assert (inbox.package_id, inbox.mcp_url) == (case.package_id, case.mcp_url)
    (outbox,) = receiver.of_kind(names.KIND_OUTBOX)
    work = items.work_item_from_outbox(outbox)
    assert (work.delivery_id, work.package_id, work.mcp_url) == (
        inbox.delivery_id,
        case.package_id,
        case.mcp_url,
    )
    if case.mcp_allowed is not None:
        # The receiver keeps mcp_url as signed; the worker's policy decides where the
        # token may go (docs/security.md).
        assert POLICY.allows(inbox.mcp_url or "") is case.mcp_allowed
