"""Two attempts of one delivery at once, on the real adapters (moto): the lease's owner
alone finishes a claim, and a step result recorded by one attempt is the other's too.

Both are races the simulator's default seeds rarely line up, so each is staged here
exactly: a worker whose lease ran out (nobody has claimed since) is still not some
other worker's to finish, and an attempt that read "no result" just before another
attempt recorded one must not start the paid call again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_steps import DynamoDbSteps
from functions.core.claim import Claim, ClaimLost, ClaimStatus
from functions.core.effects import EffectLedger
from functions.core.models import State
from functions.core.ports.steps import StepRecord, StepStatus
from functions.core.steps import StepStorage
from local.testkit import builders
from local.testkit.clock import FakeClock
from tests.fakes import FakeEffects, FakeMetrics

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

NOW = 1_760_000_000
LEASE = 300
DELIVERY = "0b6f3c2e-8d1a-4f5b-9c7e-3a2d1e0f4b6c"
EXPIRES_AT = NOW + 30 * 86400

# Every way an attempt leaves ``processing``: each must be the lease owner's alone.
FINISHES: dict[str, Callable[[DynamoDbClaims, Claim, int], None]] = {
    "complete": lambda store, claim, now: store.complete(claim, now=now),
    "complete_with_effects": lambda store, claim, now: store.complete(
        claim, now=now, effects_done=frozenset({"archive"})
    ),
    "release": lambda store, claim, now: store.release(claim, now=now, error_code="transient"),
    "release_transient": lambda store, claim, now: store.release_transient(
        claim, now=now, error_code="transient"
    ),
    "defer": lambda store, claim, now: store.defer(claim, now=now, error_code="budget"),
    "give_back": lambda store, claim, now: store.give_back(claim, now=now),
    "fail": lambda store, claim, now: store.fail(claim, now=now, error_code="permanent"),
    "park": lambda store, claim, now: store.park(
        claim, now=now, approval="alert", deadline=now + 3600
    ),
}


@pytest.fixture
def claims(dynamodb: DynamoDBClient, table: str) -> DynamoDbClaims:
    item = builders.inbox_item(DELIVERY, received_at=NOW - 10, expires_at=EXPIRES_AT)
    dynamodb.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(item))
    return DynamoDbClaims(client=dynamodb, table_name=table)


def _raw(dynamodb: DynamoDBClient, table: str) -> dynamodb_items.Item:
    return dynamodb.get_item(TableName=table, Key=dynamodb_items.inbox_key(DELIVERY))["Item"]


@pytest.mark.parametrize("finish", sorted(FINISHES))
def test_a_lapsed_lease_is_finished_by_its_owner_alone(
    finish: str, claims: DynamoDbClaims, dynamodb: DynamoDBClient, table: str
) -> None:
    attempt = claims.claim(DELIVERY, owner="worker-a", now=NOW, lease_seconds=LEASE)
    assert attempt.status is ClaimStatus.CLAIMED and attempt.claim is not None
    held = _raw(dynamodb, table)
    # The lease has run out and nobody has claimed since: a worker that is not the
    # owner (another container's attempt, under the same delivery and lease) may not
    # write the attempt's outcome.
    other = dataclasses.replace(attempt.claim, owner="worker-b")
    with pytest.raises(ClaimLost):
        FINISHES[finish](claims, other, NOW + LEASE + 60)
    assert _raw(dynamodb, table) == held  # nothing changed
    # The owner's own finish still lands: nobody took the delivery over.
    FINISHES[finish](claims, attempt.claim, NOW + LEASE + 61)
    assert dynamodb_items.inbox_from_item(_raw(dynamodb, table)).state is not State.PROCESSING


def test_a_lapsed_lease_taken_over_is_finished_by_the_new_owner_only(
    claims: DynamoDbClaims, dynamodb: DynamoDBClient, table: str
) -> None:
    first = claims.claim(DELIVERY, owner="worker-a", now=NOW, lease_seconds=LEASE).claim
    second = claims.claim(DELIVERY, owner="worker-b", now=NOW + LEASE, lease_seconds=LEASE).claim
    assert first is not None and second is not None
    # worker-a's lease ran out long ago (and worker-b's too, by now): neither the old
    # holder nor a third worker may finish it; only worker-b.
    late = NOW + 3 * LEASE
    for stranger in (first, dataclasses.replace(second, owner="worker-c")):
        with pytest.raises(ClaimLost):
            claims.fail(stranger, now=late, error_code="permanent")
    claims.complete(second, now=late)
    item = dynamodb_items.inbox_from_item(_raw(dynamodb, table))
    assert (item.state, item.completed_at) == (State.COMPLETED, late)


class _RivalRecordsAfterTheRead(DynamoDbSteps):
    """The step store, but between an attempt's first read of a step and its start,
    another attempt of the delivery runs the same step to its recorded result."""

    def __init__(self, rival: Callable[[], object], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rival: Callable[[], object] | None = rival

    def get(self, delivery_id: str, name: str) -> StepRecord | None:
        seen = super().get(delivery_id, name)
        rival, self._rival = self._rival, None
        if rival is not None:
            rival()
        return seen


def _ledger(steps: DynamoDbSteps) -> EffectLedger:
    return EffectLedger(
        DELIVERY,
        store=FakeEffects(),
        clock=FakeClock(NOW),
        expires_at=EXPIRES_AT,
        steps=StepStorage(records=steps, metrics=FakeMetrics()),
    )


def test_a_result_recorded_between_the_read_and_the_start_is_used_not_paid_again(
    dynamodb: DynamoDBClient, table: str
) -> None:
    calls: list[str] = []

    def model(who: str) -> Callable[[], object]:
        def call() -> object:
            calls.append(who)
            return {"summary": f"by {who}"}

        return call

    plain = DynamoDbSteps(client=dynamodb, table_name=table)
    racing = _RivalRecordsAfterTheRead(
        lambda: _ledger(plain).step("model", model("b")), client=dynamodb, table_name=table
    )
    # Attempt a read "no result", then attempt b recorded its own; a's start is refused
    # and a returns b's recorded result without calling the model.
    assert _ledger(racing).step("model", model("a")) == {"summary": "by b"}
    assert calls == ["b"]
    record = plain.get(DELIVERY, "model")
    assert record is not None
    assert (record.status, record.runs) == (StepStatus.RECORDED, 1)


def test_a_start_refused_for_a_recorded_result_returns_that_result(
    dynamodb: DynamoDBClient, table: str
) -> None:
    steps = DynamoDbSteps(client=dynamodb, table_name=table)
    assert _ledger(steps).step("model", lambda: "first") == "first"
    refused = steps.start(DELIVERY, "model", now=NOW + 1, expires_at=EXPIRES_AT)
    assert refused is not None
    assert refused.status is StepStatus.RECORDED
    assert refused.result is not None and refused.result.inline == '"first"'
    record = steps.get(DELIVERY, "model")
    assert record is not None
    assert (record.status, record.runs) == (StepStatus.RECORDED, 1)  # nothing written
