"""The reconciler's run on fakes: every listed item, batched sends, a deadline."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator

import pytest

from functions.core.deadline import Deadline
from functions.core.errors import StorageUnavailable
from functions.core.models import InboxItem, State
from functions.core.reconcile import SEND_BATCH_SIZE, ReconcileConfig, ReconcileReport, reconcile
from local.testkit import builders
from local.testkit.clock import FakeClock, deadline_after_looks
from tests.fakes import FakeClaims, FakeEffects, FakeMetrics, FakeQueue

PENDING_AGE = 600
EFFECT_AGE = 1200
CONFIG = ReconcileConfig(pending_age_seconds=PENDING_AGE, effect_age_seconds=EFFECT_AGE)


def delivery(n: int) -> str:
    return f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}"


@dataclasses.dataclass
class World:
    clock: FakeClock = dataclasses.field(default_factory=FakeClock)
    claims: FakeClaims = dataclasses.field(default_factory=FakeClaims)
    effects: FakeEffects = dataclasses.field(default_factory=FakeEffects)
    queue: FakeQueue = dataclasses.field(default_factory=FakeQueue)
    metrics: FakeMetrics = dataclasses.field(default_factory=FakeMetrics)

    def pending(self, count: int, *, start: int = 0) -> None:
        """``count`` pending items, each past the pending age after one ``age()``."""
        for n in range(start, start + count):
            self.claims.add(builders.inbox_item(delivery(n), received_at=self.clock.value))

    def expired_lease(self, n: int) -> None:
        item = builders.inbox_item(delivery(n), received_at=self.clock.value)
        self.claims.add(
            dataclasses.replace(item, state=State.PROCESSING, lease_until=self.clock.value)
        )

    def age(self) -> None:
        self.clock.advance(PENDING_AGE + 1)

    def run(self, deadline: Deadline | None = None) -> ReconcileReport:
        return reconcile(
            store=self.claims,
            effects=self.effects,
            queue=self.queue,
            clock=self.clock,
            metrics=self.metrics,
            config=CONFIG,
            deadline=deadline or Deadline.never(),
        )

    def sent_ids(self) -> Counter[str]:
        return Counter(work.delivery_id for work, _ in self.queue.sent)


def test_reconcile_requeues_every_stale_item_in_one_run() -> None:
    world = World()
    world.pending(10_005)  # far more than a fixed per-run limit would take
    world.age()
    report = world.run()
    assert (report.pending_requeued, report.budget_spent) == (10_005, False)
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(10_005)})
    assert world.queue.batches == [SEND_BATCH_SIZE] * 1000 + [5]


def test_reconcile_stops_at_its_deadline_and_the_next_run_continues() -> None:
    world = World()
    for n in range(3):
        world.expired_lease(n)
    world.pending(40, start=3)
    world.age()
    first = world.run(deadline_after_looks(25))
    assert first.budget_spent is True
    assert first.leases_requeued == 3
    assert 0 < first.pending_requeued < 40
    # Every won write is sent before the run ends, none held back for a later run.
    assert len(world.queue.sent) == 3 + first.pending_requeued
    second = world.run()
    assert (second.leases_requeued, second.pending_requeued) == (0, 40 - first.pending_requeued)
    assert second.budget_spent is False
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(43)})


def test_reconcile_past_its_deadline_reads_nothing() -> None:
    class Lazy(FakeClaims):
        """Lists lazily, as the adapter does (a read may be a page query)."""

        read = 0

        def stale_pending(self, *, changed_before: int, page_size: int) -> Iterator[InboxItem]:
            for item in super().stale_pending(changed_before=changed_before, page_size=page_size):
                self.read += 1
                yield item

    lazy = Lazy()
    world = World(claims=lazy)
    world.pending(5)
    world.age()
    assert world.run(Deadline.after(0)) == ReconcileReport(budget_spent=True)
    assert lazy.read == 0


def test_reconcile_refused_sends_come_back_after_the_pending_age() -> None:
    world = World()
    world.pending(30)
    world.age()
    world.queue.refuse = {delivery(4), delivery(17)}
    report = world.run()
    assert (report.pending_requeued, report.requeues_unsent) == (28, 2)
    world.queue.refuse = set()
    # Touched before the send: not listed again until it ages once more.
    assert world.run().pending_requeued == 0
    world.age()
    assert world.run().pending_requeued == 30
    assert world.sent_ids()[delivery(4)] == 1


def test_reconcile_error_mid_batch_still_sends_the_won_writes() -> None:
    class FailingAt(FakeClaims):
        def touch_pending(self, item: InboxItem, *, now: int) -> bool:
            if item.delivery_id == delivery(6):
                raise StorageUnavailable("throttled")
            return super().touch_pending(item, now=now)

    world = World(claims=FailingAt())
    world.pending(9)
    world.age()
    with pytest.raises(StorageUnavailable):
        world.run()
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(6)})


def test_reconcile_requeues_pending_deliveries_of_uncertain_effects_in_batches() -> None:
    world = World()
    for n in range(12):
        world.effects.record_intent(
            delivery(n), "notify", key="k", now=world.clock.value, expires_at=0
        )
    world.clock.advance(EFFECT_AGE + 1)
    world.pending(12)  # released again just now: young for the pending list
    report = world.run()
    assert (report.pending_requeued, report.effects_requeued) == (0, 12)
    assert world.queue.batches == [SEND_BATCH_SIZE, 2]
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(12)})
