"""Every shared vector case and sequence through the real handler, against moto."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from functions.core import settings_table, table_layout, wire
from functions.core.adapters import dynamodb_items as items
from functions.core.models import State
from local.testkit import builders, vectors
from tests.receiver_harness import Receiver

VECTORS = vectors.load_vectors()
RETENTION_SECONDS = settings_table.INBOX_RETENTION_DAYS.default * 24 * 3600


def _assert_inbox(receiver: Receiver, step: vectors.VectorRequest) -> None:
    headers = {k.lower(): v for k, v in step.headers.items()}
    body = json.loads(step.body)
    (stored,) = receiver.of_kind(table_layout.KIND_INBOX)
    inbox = items.inbox_from_item(stored)
    assert inbox.delivery_id == headers[wire.HEADER_DELIVERY] == body["delivery_id"]
    assert inbox.event == body["event"]
    assert inbox.body_sha256 == hashlib.sha256(step.body).hexdigest()
    assert inbox.received_at == VECTORS.now
    assert inbox.expires_at == VECTORS.now + RETENTION_SECONDS
    assert inbox.attempts == 0
    # The body itself is never stored.
    assert all(step.body.decode() not in json.dumps(value) for value in stored.values())
    if step.expect_outcome == "accepted":
        assert inbox.state is State.PENDING
        assert (inbox.package_id, inbox.mcp_url) == (body["package_id"], body["mcp_url"])
    else:
        assert inbox.state is State.IGNORED


@pytest.mark.parametrize("case", VECTORS.cases, ids=lambda c: c.name)
def test_receiver_vector_case(receiver_factory: Any, case: vectors.VectorCase) -> None:
    receiver = receiver_factory(case.secrets, now=VECTORS.now)
    step = case.request

    response = receiver.invoke(builders.http_api_event(step.headers, step.body))

    assert (response.status, response.outcome) == (step.expect_status, step.expect_outcome)
    assert response.content_type == "application/json"
    expected_work = 1 if step.expect_outcome == "accepted" else 0
    assert receiver.work_items() == expected_work
    if step.expect_outcome in ("accepted", "ignored"):
        _assert_inbox(receiver, step)
        if expected_work:
            (outbox,) = receiver.of_kind(table_layout.KIND_OUTBOX)
            work = items.work_item_from_outbox(outbox)
            body = json.loads(step.body)
            assert (work.delivery_id, work.package_id, work.mcp_url) == (
                body["delivery_id"],
                body["package_id"],
                body["mcp_url"],
            )
    else:
        assert receiver.items() == []


@pytest.mark.parametrize("case", VECTORS.cases, ids=lambda c: c.name)
def test_receiver_vector_case_with_base64_body(
    receiver_factory: Any, case: vectors.VectorCase
) -> None:
    receiver = receiver_factory(case.secrets, now=VECTORS.now)
    step = case.request

    response = receiver.invoke(
        builders.http_api_event(step.headers, step.body, base64_encoded=True)
    )

    assert (response.status, response.outcome) == (step.expect_status, step.expect_outcome)


@pytest.mark.parametrize("sequence", VECTORS.sequences, ids=lambda s: s.name)
def test_receiver_vector_sequence(receiver_factory: Any, sequence: vectors.VectorSequence) -> None:
    receiver = receiver_factory(sequence.secrets, now=VECTORS.now)
    first_accepted: vectors.VectorRequest | None = None

    for number, step in enumerate(sequence.steps, start=1):
        response = receiver.invoke(builders.http_api_event(step.headers, step.body))
        assert (response.status, response.outcome) == (
            step.expect_status,
            step.expect_outcome,
        ), f"step {number}"
        if step.expect_outcome == "accepted" and first_accepted is None:
            first_accepted = step

    assert receiver.work_items() == sequence.expect_work_items
    inbox = [items.inbox_from_item(i) for i in receiver.of_kind(table_layout.KIND_INBOX)]
    assert len(inbox) == len({i.delivery_id for i in inbox}) == sequence.expect_work_items
    quarantined = [s for s in sequence.steps if s.expect_outcome == "quarantined"]
    records = [
        items.quarantine_from_item(i) for i in receiver.of_kind(table_layout.KIND_QUARANTINE)
    ]
    assert len(records) == len({hashlib.sha256(s.body).digest() for s in quarantined})
    for record, step in zip(records, quarantined, strict=True):
        assert first_accepted is not None
        original = hashlib.sha256(first_accepted.body).hexdigest()
        assert record.stored_sha256 == original
        assert record.received_sha256 == hashlib.sha256(step.body).hexdigest()
        assert record.quarantined_at == VECTORS.now
        # The original stays exactly as accepted.
        (kept,) = [i for i in inbox if i.delivery_id == record.delivery_id]
        assert kept.body_sha256 == original
        assert kept.state is State.PENDING
