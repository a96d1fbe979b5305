"""In-memory fakes of the processing ports (claims, effects, queue, metrics, packages).

Each fake keeps the same state the DynamoDB/SQS adapter would, so unit tests assert
on state; ``tests/unit/test_claim.py`` and ``test_effects.py`` run the same contract
against the fakes and the real adapters (moto) to keep them honest.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from functions.core.claim import Claim, ClaimAttempt, ClaimLost, ClaimStatus
from functions.core.effects import EffectRecord, EffectStatus
from functions.core.models import InboxItem, State, UnsentWork, WorkItem


@dataclass
class Clock:
    value: int = 1_760_000_000

    def now(self) -> int:
        return self.value

    def advance(self, seconds: int) -> None:
        self.value += seconds


@dataclass
class FakeClaims:
    """The inbox's processing state; ``owners`` holds the lease owner tokens."""

    items: dict[str, InboxItem] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)

    def add(self, item: InboxItem) -> None:
        self.items[item.delivery_id] = item

    def claim(self, delivery_id: str, *, owner: str, now: int, lease_seconds: int) -> ClaimAttempt:
        item = self.items.get(delivery_id)
        if item is None:
            return ClaimAttempt(ClaimStatus.MISSING)
        free = item.state is State.PENDING or (
            item.state is State.PROCESSING and (item.lease_until or 0) <= now
        )
        if not free:
            if item.state is State.COMPLETED:
                return ClaimAttempt(ClaimStatus.COMPLETED)
            if item.state is State.PROCESSING:
                return ClaimAttempt(ClaimStatus.LEASED, lease_until=item.lease_until)
            return ClaimAttempt(ClaimStatus.CLOSED)
        lease = now + lease_seconds
        self.items[delivery_id] = dataclasses.replace(
            item,
            state=State.PROCESSING,
            lease_until=lease,
            attempts=item.attempts + 1,
            state_changed_at=now,
        )
        self.owners[delivery_id] = owner
        return ClaimAttempt(
            ClaimStatus.CLAIMED,
            claim=Claim(delivery_id, owner, lease, item.attempts + 1, item.expires_at),
        )

    def _finish(self, claim: Claim, now: int, state: State, **changes: Any) -> None:
        item = self.items.get(claim.delivery_id)
        if (
            item is None
            or item.state is not State.PROCESSING
            or self.owners.get(claim.delivery_id) != claim.owner
        ):
            raise ClaimLost()
        self.owners.pop(claim.delivery_id)
        self.items[claim.delivery_id] = dataclasses.replace(
            item, state=state, lease_until=None, state_changed_at=now, **changes
        )

    def complete(self, claim: Claim, *, now: int) -> None:
        self._finish(claim, now, State.COMPLETED, completed_at=now)

    def release(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(claim, now, State.PENDING, last_error=error_code)

    def fail(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(claim, now, State.FAILED, last_error=error_code)

    # RecoveryStore
    def get(self, delivery_id: str) -> InboxItem | None:
        return self.items.get(delivery_id)

    def stale_pending(self, *, changed_before: int, page_size: int) -> list[InboxItem]:
        return [
            i
            for i in self.items.values()
            if i.state is State.PENDING and i.state_changed_at < changed_before
        ]

    def expired_leases(self, *, now: int, page_size: int) -> list[InboxItem]:
        return [
            i
            for i in self.items.values()
            if i.state is State.PROCESSING and (i.lease_until or 0) <= now
        ]

    def touch_pending(self, item: InboxItem, *, now: int) -> bool:
        current = self.items.get(item.delivery_id)
        if (
            current is None
            or current.state is not State.PENDING
            or current.state_changed_at != item.state_changed_at
        ):
            return False
        self.items[item.delivery_id] = dataclasses.replace(current, state_changed_at=now)
        return True

    def release_expired(self, item: InboxItem, *, now: int) -> bool:
        current = self.items.get(item.delivery_id)
        if (
            current is None
            or current.state is not State.PROCESSING
            or current.lease_until != item.lease_until
            or (current.lease_until or 0) > now
        ):
            return False
        self.owners.pop(item.delivery_id, None)
        self.items[item.delivery_id] = dataclasses.replace(
            current,
            state=State.PENDING,
            lease_until=None,
            state_changed_at=now,
            last_error="lease_expired",
        )
        return True


@dataclass
class FakeEffects:
    records: dict[tuple[str, str], EffectRecord] = field(default_factory=dict)

    def get(self, delivery_id: str, name: str) -> EffectRecord | None:
        return self.records.get((delivery_id, name))

    def record_intent(
        self, delivery_id: str, name: str, *, key: str, now: int, expires_at: int
    ) -> bool:
        if (delivery_id, name) in self.records:
            return False
        self.records[(delivery_id, name)] = EffectRecord(
            delivery_id, name, EffectStatus.INTENT, key, now
        )
        return True

    def record_done(self, delivery_id: str, name: str, *, now: int) -> None:
        record = self.records[(delivery_id, name)]
        self.records[(delivery_id, name)] = dataclasses.replace(
            record, status=EffectStatus.DONE, done_at=now, flagged_at=None
        )

    def uncertain(self, *, intended_before: int, page_size: int) -> list[EffectRecord]:
        return [
            r
            for r in self.records.values()
            if r.status is EffectStatus.INTENT
            and r.intent_at < intended_before
            and r.flagged_at is None
        ]

    def flag(self, record: EffectRecord, *, now: int) -> bool:
        current = self.records.get((record.delivery_id, record.name))
        if current is None or current.status is EffectStatus.DONE or current.flagged_at:
            return False
        self.records[(record.delivery_id, record.name)] = dataclasses.replace(
            current, flagged_at=now
        )
        return True


@dataclass
class FakeQueue:
    """``refuse`` holds delivery ids whose batch entries the queue refuses."""

    sent: list[tuple[WorkItem, int]] = field(default_factory=list)
    visibility: list[tuple[str, int]] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    batches: list[int] = field(default_factory=list)  # the size of each batch sent

    def send(self, work: WorkItem, *, delay_seconds: int = 0) -> None:
        self.sent.append((work, delay_seconds))

    def send_batch(self, works: Sequence[WorkItem]) -> list[UnsentWork]:
        self.batches.append(len(works))
        refused = [w for w in works if w.delivery_id in self.refuse]
        self.sent += [(w, 0) for w in works if w.delivery_id not in self.refuse]
        return [UnsentWork(w, reason="InternalError") for w in refused]

    def change_visibility(self, receipt_handle: str, *, seconds: int) -> None:
        self.visibility.append((receipt_handle, seconds))

    def dead_letter(self, body: str) -> None:
        self.dead.append(body)


@dataclass
class FakeMetrics:
    counts: Counter[str] = field(default_factory=Counter)

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value
