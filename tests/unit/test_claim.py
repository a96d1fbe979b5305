"""The claim contract, run against the DynamoDB adapter over the in-memory store (the fake)
and over moto."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from functions.core import table_layout
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.claim import ClaimLost, ClaimStatus, new_owner_token
from functions.core.models import InboxItem, State
from local.testkit import builders
from tests.fakes import FakeClaims

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

NOW = 1_760_000_000
LEASE = 300
DELIVERY = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"


def pending(delivery_id: str = DELIVERY, **changes: Any) -> InboxItem:
    return builders.inbox_item(
        delivery_id, received_at=NOW - 10, **{"expires_at": NOW + 30 * 86400, **changes}
    )


@dataclass
class Subject:
    store: Any
    seed: Callable[[InboxItem], object]
    read: Callable[[str], InboxItem]
    raw: Callable[[str], dynamodb_items.Item] | None = None


@pytest.fixture(params=["fake", "dynamodb"])
def subject(request: pytest.FixtureRequest) -> Subject:
    if request.param == "fake":
        fake = FakeClaims()
        return Subject(fake, fake.add, lambda d: fake.items[d])
    table = request.getfixturevalue("table")
    client: DynamoDBClient = request.getfixturevalue("dynamodb")

    def raw(delivery_id: str) -> dynamodb_items.Item:
        return client.get_item(TableName=table, Key=dynamodb_items.inbox_key(delivery_id))["Item"]

    return Subject(
        DynamoDbClaims(client=client, table_name=table),
        lambda item: seed_listed(client, table, item),
        lambda d: dynamodb_items.inbox_from_item(raw(d)),
        raw,
    )


def seed_listed(client: DynamoDBClient, table: str, item: InboxItem) -> None:
    """Put the item as listed in the state index: an open one as the reconciler lists
    it (the receiver does not), so the recovery lists see it."""
    client.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(item))
    if item.state in dynamodb_items.OPEN_STATES:
        listed = transitions.apply(
            client, table, transitions.LIST_OPEN, item.delivery_id, now=0, listed=item.received_at
        )
        assert listed.moved


def claim(subject: Subject, *, now: int = NOW, owner: str | None = None) -> Any:
    return subject.store.claim(
        DELIVERY, owner=owner or new_owner_token(), now=now, lease_seconds=LEASE
    )


def test_claim_pending_takes_a_lease_and_counts_an_attempt(subject: Subject) -> None:
    subject.seed(pending())
    attempt = claim(subject)
    assert attempt.status is ClaimStatus.CLAIMED
    assert attempt.claim.attempts == 1
    assert attempt.claim.lease_until == NOW + LEASE
    assert attempt.claim.expires_at == NOW + 30 * 86400
    item = subject.read(DELIVERY)
    assert (item.state, item.attempts, item.lease_until) == (State.PROCESSING, 1, NOW + LEASE)
    assert item.state_changed_at == NOW
    if subject.raw is not None:
        # Still listed as open, with the same index key: the claim wrote no index entry.
        raw = subject.raw(DELIVERY)
        assert raw[table_layout.STATE_INDEX_PARTITION_KEY]["S"] == dynamodb_items.state_shard(
            table_layout.STATE_LABEL_OPEN, DELIVERY
        )
        assert raw[table_layout.STATE_INDEX_SORT_KEY] == {"N": str(pending().received_at)}


def test_an_unlisted_item_stays_unlisted_until_its_completion_lists_it(
    dynamodb: DynamoDBClient, table: str
) -> None:
    store = DynamoDbClaims(client=dynamodb, table_name=table)
    dynamodb.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(pending()))

    def raw() -> dynamodb_items.Item:
        key = dynamodb_items.inbox_key(DELIVERY)
        return dynamodb.get_item(TableName=table, Key=key)["Item"]

    attempt = store.claim(DELIVERY, owner="w", now=NOW, lease_seconds=LEASE)
    assert attempt.claim is not None
    assert not dynamodb_items.is_listed(raw())  # the claim writes no index entry
    assert list(store.expired_leases(now=NOW + LEASE, page_size=10)) == []  # (not listed)
    store.complete(attempt.claim, now=NOW + 1)
    assert raw()[table_layout.STATE_INDEX_PARTITION_KEY]["S"] == dynamodb_items.state_shard(
        table_layout.STATE_LABEL_COMPLETED, DELIVERY
    )
    assert raw()[table_layout.STATE_INDEX_SORT_KEY] == {"N": str(NOW + 1)}


def test_claim_leased_by_a_live_worker_does_not_burn_an_attempt(subject: Subject) -> None:
    subject.seed(pending())
    claim(subject)
    second = claim(subject, now=NOW + LEASE - 1)
    assert second.status is ClaimStatus.LEASED
    assert second.lease_until == NOW + LEASE
    assert subject.read(DELIVERY).attempts == 1


def test_claim_after_lease_expiry_takes_over_and_fences_the_old_holder(subject: Subject) -> None:
    subject.seed(pending())
    first = claim(subject).claim
    second = claim(subject, now=NOW + LEASE).claim
    assert second.attempts == 2
    with pytest.raises(ClaimLost):
        subject.store.complete(first, now=NOW + LEASE + 1)
    with pytest.raises(ClaimLost):
        subject.store.release(first, now=NOW + LEASE + 1, error_code="transient")
    subject.store.complete(second, now=NOW + LEASE + 2)
    item = subject.read(DELIVERY)
    assert (item.state, item.completed_at, item.lease_until) == (
        State.COMPLETED,
        NOW + LEASE + 2,
        None,
    )


def test_claim_of_completed_delivery_says_completed(subject: Subject) -> None:
    subject.seed(pending())
    subject.store.complete(claim(subject).claim, now=NOW + 1)
    assert claim(subject, now=NOW + 2).status is ClaimStatus.COMPLETED
    assert subject.read(DELIVERY).attempts == 1
    if subject.raw is not None:
        # Listed under completed since its completion (the open label no longer has it).
        raw = subject.raw(DELIVERY)
        assert raw[table_layout.STATE_INDEX_PARTITION_KEY]["S"].startswith("completed#")
        assert raw[table_layout.STATE_INDEX_SORT_KEY] == {"N": str(NOW + 1)}
        assert dynamodb_items.EFFECTS_DONE not in raw


def test_complete_marks_the_repeatable_effects_the_attempt_applied(subject: Subject) -> None:
    subject.seed(pending())
    subject.store.complete(
        claim(subject).claim, now=NOW + 1, effects_done=frozenset({"archive", "copy"})
    )
    item = subject.read(DELIVERY)
    assert item.state is State.COMPLETED
    assert item.effects_done == {"archive", "copy"}


def test_release_returns_to_pending_with_last_error(subject: Subject) -> None:
    subject.seed(pending())
    subject.store.release(claim(subject).claim, now=NOW + 5, error_code="mcp_unavailable")
    item = subject.read(DELIVERY)
    assert (item.state, item.last_error, item.lease_until) == (
        State.PENDING,
        "mcp_unavailable",
        None,
    )
    assert item.state_changed_at == NOW + 5
    assert claim(subject, now=NOW + 6).claim.attempts == 2


def test_release_transient_counts_the_attempt_apart(subject: Subject) -> None:
    subject.seed(pending())
    first = claim(subject).claim
    assert (first.transient_failures, first.unexplained_attempts) == (0, 1)
    assert first.retry_window_start == NOW - 10  # the receipt
    subject.store.release_transient(first, now=NOW + 5, error_code="mcp_auth_failed")
    item = subject.read(DELIVERY)
    assert (item.state, item.last_error, item.lease_until, item.transient_failures) == (
        State.PENDING,
        "mcp_auth_failed",
        None,
        1,
    )
    second = claim(subject, now=NOW + 6).claim
    assert (second.attempts, second.transient_failures, second.unexplained_attempts) == (2, 1, 1)
    with pytest.raises(ClaimLost):
        subject.store.release_transient(first, now=NOW + 7, error_code="mcp_unavailable")
    assert subject.read(DELIVERY).transient_failures == 1


def test_claim_after_a_reset_starts_the_retry_window_at_the_reset(subject: Subject) -> None:
    subject.seed(pending(attempts=0, reset_at=NOW - 1))
    assert claim(subject).claim.retry_window_start == NOW - 1


def test_defer_returns_to_pending_and_gives_the_attempt_back(subject: Subject) -> None:
    subject.seed(pending())
    first = claim(subject).claim
    subject.store.defer(first, now=NOW + 5, error_code="budget_exhausted")
    item = subject.read(DELIVERY)
    assert (item.state, item.last_error, item.lease_until, item.attempts) == (
        State.PENDING,
        "budget_exhausted",
        None,
        0,
    )
    if subject.raw is not None:
        shard = subject.raw(DELIVERY)[table_layout.STATE_INDEX_PARTITION_KEY]["S"]
        assert shard == dynamodb_items.state_shard(table_layout.STATE_LABEL_OPEN, DELIVERY)
    # Any number of waits leaves the attempt count where it was.
    for wait in range(1, 4):
        subject.store.defer(
            claim(subject, now=NOW + 10 * wait).claim,
            now=NOW + 10 * wait + 1,
            error_code="budget_exhausted",
        )
    assert subject.read(DELIVERY).attempts == 0
    # Nor does the wait use the retry horizon: it starts again after the last wait.
    assert claim(subject, now=NOW + 50).claim.retry_window_start == NOW + 31
    with pytest.raises(ClaimLost):
        subject.store.defer(first, now=NOW + 100, error_code="budget_exhausted")


def test_fail_is_final(subject: Subject) -> None:
    subject.seed(pending())
    held = claim(subject).claim
    subject.store.fail(held, now=NOW + 5, error_code="package_not_found")
    item = subject.read(DELIVERY)
    assert (item.state, item.last_error) == (State.FAILED, "package_not_found")
    assert claim(subject, now=NOW + LEASE * 2).status is ClaimStatus.CLOSED
    with pytest.raises(ClaimLost):
        subject.store.complete(held, now=NOW + 6)
    if subject.raw is not None:
        raw = subject.raw(DELIVERY)
        assert raw[table_layout.STATE_INDEX_PARTITION_KEY]["S"] == dynamodb_items.state_shard(
            table_layout.STATE_LABEL_FAILED, DELIVERY
        )
        assert raw[table_layout.STATE_INDEX_SORT_KEY] == {"N": str(NOW + 5)}


def test_claim_of_unknown_delivery_is_missing(subject: Subject) -> None:
    assert claim(subject).status is ClaimStatus.MISSING


def test_owner_tokens_are_unique_and_long() -> None:
    tokens = {new_owner_token() for _ in range(100)}
    assert len(tokens) == 100
    assert all(len(token) == 32 for token in tokens)


def test_expired_leases_and_release_expired_once(subject: Subject) -> None:
    subject.seed(pending())
    subject.seed(pending("11111111-1111-4111-8111-111111111111"))
    claim(subject)
    subject.store.claim(
        "11111111-1111-4111-8111-111111111111", owner="x", now=NOW + 100, lease_seconds=LEASE
    )
    expired = list(subject.store.expired_leases(now=NOW + LEASE, page_size=10))
    assert [i.delivery_id for i in expired] == [DELIVERY]
    assert subject.store.release_expired(expired[0], now=NOW + LEASE) is True
    # A second reconciler run holding the same listing loses the condition.
    assert subject.store.release_expired(expired[0], now=NOW + LEASE) is False
    item = subject.read(DELIVERY)
    assert (item.state, item.last_error, item.attempts) == (State.PENDING, "lease_expired", 1)


def test_touch_pending_wins_once_per_listing(subject: Subject) -> None:
    subject.seed(pending())
    stale = list(subject.store.stale_pending(changed_before=NOW, page_size=10))
    assert [i.delivery_id for i in stale] == [DELIVERY]
    assert list(subject.store.stale_pending(changed_before=NOW - 10, page_size=10)) == []
    assert subject.store.touch_pending(stale[0], now=NOW) is True
    assert subject.store.touch_pending(stale[0], now=NOW) is False
    assert subject.read(DELIVERY).state_changed_at == NOW


def test_recovery_lists_read_every_item_page_by_page(subject: Subject) -> None:
    ids = [f"11111111-1111-4111-8111-{n:012d}" for n in range(40)]
    for delivery_id in ids:
        subject.seed(pending(delivery_id))
    for delivery_id in ids[:12]:
        subject.store.claim(delivery_id, owner="dead", now=NOW, lease_seconds=LEASE)
    stale = subject.store.stale_pending(changed_before=NOW, page_size=3)
    assert sorted(i.delivery_id for i in stale) == ids[12:]
    expired = subject.store.expired_leases(now=NOW + LEASE, page_size=2)
    assert sorted(i.delivery_id for i in expired) == ids[:12]


def test_recovery_lists_query_one_page_at_a_time(dynamodb: DynamoDBClient, table: str) -> None:
    store = DynamoDbClaims(client=dynamodb, table_name=table)
    for n in range(40):
        seed_listed(dynamodb, table, pending(f"11111111-1111-4111-8111-{n:012d}"))
    queries: list[int] = []
    dynamodb.meta.events.register(
        "provide-client-params.dynamodb.Query", lambda params, **_: queries.append(params["Limit"])
    )
    stale = iter(store.stale_pending(changed_before=NOW, page_size=3))
    assert queries == []  # listing reads nothing until asked
    next(stale)
    assert queries == [3]


def test_reopen_gives_a_failed_delivery_a_fresh_budget_and_nothing_else(subject: Subject) -> None:
    subject.seed(pending(state=State.FAILED, attempts=5, last_error="mcp_unavailable"))
    assert subject.store.reopen(DELIVERY, now=NOW + 5)
    item = subject.read(DELIVERY)
    assert (item.state, item.attempts, item.last_error) == (State.PENDING, 0, "mcp_unavailable")
    assert item.state_changed_at == NOW + 5
    assert not subject.store.reopen(DELIVERY, now=NOW + 6)  # pending: nothing to reopen
    claim(subject, now=NOW + 7)
    assert not subject.store.reopen(DELIVERY, now=NOW + 8)  # processing: untouched
    assert subject.read(DELIVERY).state is State.PROCESSING


def test_claim_refuses_an_item_whose_ttl_passes_before_its_lease_ends(subject: Subject) -> None:
    # TTL deletes the delivery's effect records late and in any order: an attempt on an
    # expired item could find "no record" and apply a done effect again.
    subject.seed(pending(expires_at=NOW + LEASE))
    assert claim(subject).status is ClaimStatus.EXPIRED
    item = subject.read(DELIVERY)
    assert (item.state, item.attempts) == (State.PENDING, 0)  # nothing counted, nothing held
    assert claim(subject, now=NOW - 1).status is ClaimStatus.CLAIMED  # the lease fits


def test_claim_refuses_an_abandoned_lease_past_the_ttl(subject: Subject) -> None:
    subject.seed(pending(expires_at=NOW + 2 * LEASE))
    assert claim(subject).status is ClaimStatus.CLAIMED
    # The lease ran out, and the TTL passed: not taken over, and not "leased" either.
    assert claim(subject, now=NOW + 2 * LEASE).status is ClaimStatus.EXPIRED
    assert subject.read(DELIVERY).attempts == 1


def test_close_expired_fails_the_item_visibly_and_only_an_expired_free_one(
    subject: Subject,
) -> None:
    subject.seed(pending(expires_at=NOW + LEASE + 1))
    # The lease still fits: not closed.
    assert not subject.store.close_expired(DELIVERY, now=NOW, lease_seconds=LEASE)
    held = claim(subject)
    assert held.status is ClaimStatus.CLAIMED
    # A live worker holds it: its attempt ends on its own.
    assert not subject.store.close_expired(DELIVERY, now=NOW + 1, lease_seconds=LEASE)
    later = NOW + LEASE + 1
    assert subject.store.close_expired(DELIVERY, now=later, lease_seconds=LEASE)
    item = subject.read(DELIVERY)
    assert (item.state, item.last_error, item.lease_until) == (State.FAILED, "item_expired", None)
    assert not subject.store.close_expired(DELIVERY, now=later, lease_seconds=LEASE)
    with pytest.raises(ClaimLost):  # the old holder records nothing over it
        subject.store.complete(held.claim, now=later)


def test_reopen_refuses_an_expired_delivery(subject: Subject) -> None:
    subject.seed(pending(state=State.FAILED, last_error="attempts_exhausted", expires_at=NOW))
    assert not subject.store.reopen(DELIVERY, now=NOW)
    assert subject.read(DELIVERY).state is State.FAILED
    assert subject.store.reopen(DELIVERY, now=NOW - 1)  # a second earlier it was not


def test_reopen_of_a_failure_reopens_that_failure_only(subject: Subject) -> None:
    subject.seed(pending())
    first = claim(subject, owner="first-attempt").claim
    subject.store.fail(first, now=NOW + 1, error_code="attempts_exhausted")
    assert subject.store.reopen(DELIVERY, now=NOW + 2, failure="first-attempt")
    second = claim(subject, now=NOW + 3, owner="second-attempt").claim
    subject.store.fail(second, now=NOW + 4, error_code="uncertain_effect")
    # The first failure's dead letter comes back: the delivery is in another failure now.
    assert not subject.store.reopen(DELIVERY, now=NOW + 5, failure="first-attempt")
    assert subject.read(DELIVERY).last_error == "uncertain_effect"
    assert subject.store.reopen(DELIVERY, now=NOW + 6, failure="second-attempt")
    assert subject.read(DELIVERY).state is State.PENDING
    # Reopened once: the same letter again finds it pending.
    assert not subject.store.reopen(DELIVERY, now=NOW + 7, failure="second-attempt")


def test_give_back_returns_the_claim_unrun_and_its_attempt(subject: Subject) -> None:
    subject.seed(pending(attempts=2, last_error="lease_expired"))
    held = claim(subject).claim
    assert held.attempts == 3
    subject.store.give_back(held, now=NOW + 1)
    item = subject.read(DELIVERY)
    assert (item.state, item.attempts, item.last_error, item.lease_until) == (
        State.PENDING,
        2,
        "lease_expired",
        None,
    )
    with pytest.raises(ClaimLost):  # given back once; the claim is over
        subject.store.give_back(held, now=NOW + 2)
