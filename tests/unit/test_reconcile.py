"""The reconciler's run on fakes: every listed item, batched sends, a deadline."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from functions.core import metric_names, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.deadline import Deadline
from functions.core.errors import StorageUnavailable
from functions.core.models import InboxItem, State, WorkItem
from functions.core.ports.approvals import ApprovalRecord
from functions.core.ports.effects import EffectRecord
from functions.core.ports.recovery import IntentCursor, OpenCursor, OpenPage
from functions.core.reconcile import (
    RECEIVED_OVERLAP_SECONDS,
    RECEIVED_WINDOW_SECONDS,
    SEND_BATCH_SIZE,
    ReconcileConfig,
    ReconcileReport,
    reconcile,
)
from local.testkit import builders
from local.testkit.clock import FakeClock, deadline_after_looks
from tests.fakes import (
    FakeApprovals,
    FakeClaims,
    FakeEffects,
    FakeMetrics,
    FakeQueue,
    FakeReceivedLog,
    FakeTable,
)

PENDING_AGE = 600
EFFECT_AGE = 1200
LEASE = 300
CONFIG = ReconcileConfig(
    pending_age_seconds=PENDING_AGE,
    effect_age_seconds=EFFECT_AGE,
    received_age_seconds=min(PENDING_AGE, LEASE),
)


def delivery(n: int) -> str:
    return f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}"


@dataclasses.dataclass
class World:
    clock: FakeClock = dataclasses.field(default_factory=FakeClock)
    claims: FakeClaims = dataclasses.field(default_factory=FakeClaims)
    effects: FakeEffects = dataclasses.field(default_factory=FakeEffects)
    queue: FakeQueue = dataclasses.field(default_factory=FakeQueue)
    metrics: FakeMetrics = dataclasses.field(default_factory=FakeMetrics)
    approvals: FakeApprovals | None = None
    received: FakeReceivedLog = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.received = FakeReceivedLog(self.claims)

    def pending(self, count: int, *, start: int = 0, listed: bool = True) -> None:
        """``count`` pending items, each past the pending age after one ``age()``;
        ``listed=False``: as the receiver writes them, known only by the received log."""
        for n in range(start, start + count):
            item = builders.inbox_item(delivery(n), received_at=self.clock.value)
            self.claims.add(item, listed=listed)

    def expired_lease(self, n: int) -> None:
        item = builders.inbox_item(delivery(n), received_at=self.clock.value)
        self.claims.add(
            dataclasses.replace(item, state=State.PROCESSING, lease_until=self.clock.value)
        )

    def age(self) -> None:
        self.clock.advance(PENDING_AGE + 1)

    def run(
        self, deadline: Deadline | None = None, *, config: ReconcileConfig = CONFIG
    ) -> ReconcileReport:
        return reconcile(
            store=self.claims,
            received=self.received,
            effects=self.effects,
            queue=self.queue,
            clock=self.clock,
            metrics=self.metrics,
            config=config,
            deadline=deadline or Deadline.never(),
            approvals=self.approvals,
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
    assert 0 < first.leases_requeued + first.pending_requeued < 43
    # Every won write is sent before the run ends, none held back for a later run.
    assert len(world.queue.sent) == first.leases_requeued + first.pending_requeued
    second = world.run()
    assert second.leases_requeued == 3 - first.leases_requeued
    assert second.pending_requeued == 40 - first.pending_requeued
    assert second.budget_spent is False
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(43)})


def test_reconcile_past_its_deadline_reads_nothing() -> None:
    class Lazy(FakeClaims):
        """Lists lazily, as the adapter does (a read may be a page query)."""

        read = 0

        def open_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
            for page in super().open_pages(start=start, page_size=page_size):
                self.read += 1
                yield page

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
        touched: list[str] = []  # noqa: RUF012 (one test's instance)

        def touch_pending(self, item: InboxItem, *, now: int) -> bool:
            if len(self.touched) == 6:
                raise StorageUnavailable("throttled")
            self.touched.append(item.delivery_id)
            return super().touch_pending(item, now=now)

    failing = FailingAt()
    world = World(claims=failing)
    world.pending(9)
    world.age()
    with pytest.raises(StorageUnavailable):
        world.run()
    assert world.sent_ids() == Counter(dict.fromkeys(failing.touched, 1))
    assert len(failing.touched) == 6


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


def test_a_lost_receipt_is_found_by_the_received_log_listed_and_requeued() -> None:
    world = World()
    world.pending(3, listed=False)  # their relay messages were lost
    world.age()
    report = world.run()
    assert (report.received_listed, report.pending_requeued) == (3, 3)
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(3)})
    assert world.claims.unlisted == set()  # listed open: later runs find them by the index
    world.age()
    again = world.run()
    assert (again.received_listed, again.pending_requeued) == (0, 3)


def test_only_receipts_older_than_the_received_age_are_looked_at() -> None:
    world = World()
    world.pending(2, listed=False)
    world.clock.advance(CONFIG.received_age_seconds - 1)
    world.pending(1, start=2, listed=False)
    world.clock.advance(2)  # the first two are older than the received age, not the third
    report = world.run()
    assert (report.received_listed, report.pending_requeued) == (2, 0)  # not stale yet
    assert world.claims.unlisted == {delivery(2)}
    assert world.received.mark == world.clock.value - CONFIG.received_age_seconds
    assert world.queue.sent == []


def test_an_expired_lease_found_by_the_received_log_is_released_and_requeued() -> None:
    world = World()
    item = builders.inbox_item(delivery(1), received_at=world.clock.value)
    world.claims.add(item, listed=False)
    claimed = world.claims.claim(delivery(1), owner="dead", now=world.clock.value, lease_seconds=60)
    assert claimed.claim is not None
    world.clock.advance(LEASE + 1)
    report = world.run()
    assert (report.received_listed, report.leases_requeued) == (1, 1)
    assert world.claims.items[delivery(1)].state is State.PENDING
    assert world.sent_ids() == Counter({delivery(1): 1})


def test_a_completed_receipt_in_the_window_is_not_listed() -> None:
    world = World()
    world.pending(2, listed=False)
    claimed = world.claims.claim(delivery(0), owner="w", now=world.clock.value, lease_seconds=60)
    assert claimed.claim is not None
    world.claims.complete(claimed.claim, now=world.clock.value)
    world.age()
    report = world.run()
    assert (report.received_listed, report.pending_requeued) == (1, 1)
    # Its completion listed it (as completed), not the run (as open).
    assert world.claims.items[delivery(0)].state is State.COMPLETED
    assert world.claims.unlisted == set()
    assert world.sent_ids() == Counter({delivery(1): 1})


def test_a_crash_before_the_watermark_moves_reads_the_window_again_safely() -> None:
    world = World()
    world.pending(4, listed=False)
    world.age()
    world.received.fail_advance = 1
    with pytest.raises(StorageUnavailable):
        world.run()
    # Listed and requeued before the crash; the won writes were sent.
    assert world.claims.unlisted == set()
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(4)})
    assert world.received.mark is None
    world.received.windows.clear()
    report = world.run()
    # The same receipts are looked at again, none listed or sent twice.
    assert world.received.windows[0][0] <= world.claims.items[delivery(0)].received_at
    assert (report.received_listed, report.pending_requeued) == (0, 0)
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(4)})
    assert world.received.mark == world.clock.value - CONFIG.received_age_seconds


def test_the_watermark_advances_by_whole_windows_and_a_run_looks_back_a_little() -> None:
    world = World()
    world.pending(1, listed=False)
    start = world.clock.value
    world.clock.advance(CONFIG.received_age_seconds + 3 * RECEIVED_WINDOW_SECONDS)
    # The deadline ends the run in its second window: only the first one counts as done.
    # (Looks: one before the log, two in the first window, the next in the second.)
    world.pending(1, start=1, listed=False)  # (young: not in any window yet)
    first = world.run(deadline_after_looks(3))
    assert first.budget_spent is True
    assert world.received.mark == start + RECEIVED_WINDOW_SECONDS
    # Each run reports how far behind it left the log: here one window past the start.
    assert first.received_lag_seconds == world.clock.value - (start + RECEIVED_WINDOW_SECONDS)
    world.received.windows.clear()
    caught_up = world.run()
    assert world.received.windows[0][0] == start + RECEIVED_WINDOW_SECONDS - (
        RECEIVED_OVERLAP_SECONDS
    )
    assert world.received.mark == world.clock.value - CONFIG.received_age_seconds
    assert caught_up.received_lag_seconds == CONFIG.received_age_seconds
    assert world.metrics.durations[metric_names.METRIC_RECONCILER_RECEIVED_LOG_LAG] == [
        first.received_lag_seconds,
        CONFIG.received_age_seconds,
    ]
    assert world.metrics.counts[metric_names.METRIC_RECONCILER_RECEIVED_LISTED] == 1


def test_a_failure_in_a_later_window_keeps_the_windows_the_run_finished() -> None:
    world = World()
    start = world.clock.value
    world.pending(1, listed=False)
    world.clock.advance(CONFIG.received_age_seconds + 3 * RECEIVED_WINDOW_SECONDS)
    world.received.fail_window = 3
    with pytest.raises(StorageUnavailable):
        world.run()
    # Two windows were worked off before the third failed: the next run starts there.
    assert world.received.mark == start + 2 * RECEIVED_WINDOW_SECONDS
    assert world.claims.unlisted == set()
    world.received.windows.clear()
    world.received.fail_window = None
    again = world.run()
    assert world.received.windows[0][0] == start + 2 * RECEIVED_WINDOW_SECONDS - (
        RECEIVED_OVERLAP_SECONDS
    )
    assert again.received_listed == 0  # listed once, by the run that failed later
    assert world.received.mark == world.clock.value - CONFIG.received_age_seconds


def test_an_empty_log_sets_the_watermark_to_the_received_age() -> None:
    world = World()
    world.run()
    assert world.received.mark == world.clock.value - CONFIG.received_age_seconds


def test_a_first_run_cut_short_counts_its_lag_from_the_oldest_receipt() -> None:
    world = World()
    world.pending(3, listed=False)
    oldest = world.clock.value
    world.clock.advance(CONFIG.received_age_seconds + 3 * RECEIVED_WINDOW_SECONDS)
    report = world.run(deadline_after_looks(3))  # inside its first window: no watermark
    assert (report.budget_spent, world.received.mark) == (True, None)
    assert report.received_lag_seconds == world.clock.value - oldest


def test_a_run_that_never_reaches_the_received_log_reports_no_lag() -> None:
    # No figure rather than a stale one: the lag alarm reads missing data as behind.
    world = World()
    report = world.run(Deadline.after(0))
    assert report.received_lag_seconds is None
    assert metric_names.METRIC_RECONCILER_RECEIVED_LOG_LAG not in world.metrics.durations


def test_a_run_cut_short_after_a_watermark_counts_its_lag_from_the_saved_watermark() -> None:
    world = World()
    world.run()  # an empty log: the watermark is set at the received age
    mark = world.received.mark
    assert mark is not None
    # Received just before the watermark: the look-back window finds it, and the run
    # ends inside that first window, before it saves a watermark of its own.
    late = builders.inbox_item(delivery(0), received_at=mark - RECEIVED_OVERLAP_SECONDS // 2)
    world.claims.add(late, listed=False)
    world.clock.advance(CONFIG.received_age_seconds + 3 * RECEIVED_WINDOW_SECONDS)
    report = world.run(deadline_after_looks(2))
    assert (report.budget_spent, world.received.mark) == (True, mark)
    assert world.received.windows == [
        (mark - RECEIVED_OVERLAP_SECONDS, mark - RECEIVED_OVERLAP_SECONDS + RECEIVED_WINDOW_SECONDS)
    ]
    assert report.received_listed == 1
    # From the watermark itself, not from where the run looked back to.
    assert report.received_lag_seconds == world.clock.value - mark


def test_an_empty_log_reports_the_received_age_as_its_lag() -> None:
    world = World()
    assert world.run().received_lag_seconds == CONFIG.received_age_seconds


def test_a_failure_after_the_log_is_read_still_reports_its_lag() -> None:
    class Failing(FakeEffects):
        def intent_cursor(self) -> IntentCursor | None:
            raise StorageUnavailable("throttled")

    world = World(effects=Failing())
    with pytest.raises(StorageUnavailable):
        world.run()
    assert world.metrics.durations[metric_names.METRIC_RECONCILER_RECEIVED_LOG_LAG] == [
        CONFIG.received_age_seconds
    ]


def test_receipts_the_log_recovers_are_sent_before_the_pass_over_the_open_items() -> None:
    class Watched(FakeClaims):
        """Notes what the queue held when the open pass read its first page."""

        sent_before_open: list[str] | None = None

        def open_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
            for page in super().open_pages(start=start, page_size=page_size):
                if self.sent_before_open is None:
                    self.sent_before_open = [w.delivery_id for w, _ in world.queue.sent]
                yield page

    watched = Watched()
    world = World(claims=watched)
    world.pending(3, listed=False)  # lost relay messages, known only by the log
    world.age()
    world.clock.advance(CONFIG.received_age_seconds)
    report = world.run()
    assert report.received_listed == 3
    # Not held back for a batch of ten until a long open pass is through.
    assert sorted(watched.sent_before_open or []) == [delivery(n) for n in range(3)]


def test_a_receipt_stamped_in_1970_does_not_send_the_first_run_walking_from_it() -> None:
    world = World()
    malformed = builders.inbox_item(delivery(99), received_at=0)
    world.claims.add(malformed, listed=False)
    world.pending(2, listed=False)
    world.age()
    report = world.run(deadline_after_looks(40))  # a few windows' worth, not 56 years'
    assert world.sent_ids() == Counter({delivery(0): 1, delivery(1): 1})
    assert report.received_lag_seconds == CONFIG.received_age_seconds
    floor = world.clock.value - CONFIG.retention_seconds
    assert min(since for since, _ in world.received.windows) >= floor


def test_a_watermark_older_than_the_retention_is_read_on_from_the_retention() -> None:
    world = World()
    world.received.advance(1_000)  # a reconciler that was off for longer than items live
    world.age()
    world.run(deadline_after_looks(10))
    floor = world.clock.value - CONFIG.retention_seconds
    assert world.received.windows[0][0] == floor
    assert world.received.mark is not None
    assert floor < world.received.mark < world.clock.value - CONFIG.received_age_seconds


# --- the effects and approval passes resume where the last run stopped ------------------

PAGE = 5
SMALL_PAGES = dataclasses.replace(CONFIG, page_size=PAGE)
# A pass over a label looks at the deadline once per page, at least one (maybe empty) per
# index shard, and once more at its end; the received log's pass looks once.
LOOKS_BEFORE_EFFECTS = 1 + (table_layout.STATE_INDEX_SHARDS + 1)
LOOKS_BEFORE_APPROVALS = LOOKS_BEFORE_EFFECTS + (table_layout.STATE_INDEX_SHARDS + 1)
HELD = 40  # stay listed run after run: only read, nothing to write
DUE = 10  # listed after them


class Looked(FakeClaims):
    """Counts the reads of each inbox item: how often the effects pass looked at it."""

    def __init__(self, table: FakeTable | None = None) -> None:
        super().__init__(table)
        self.reads: Counter[str] = Counter()

    def get(self, delivery_id: str) -> InboxItem | None:
        self.reads[delivery_id] += 1
        return super().get(delivery_id)


def watch_reads(world: World) -> Looked:
    """The world's claims from now on counting their reads."""
    looked = Looked(world.claims.table)
    world.claims = looked
    return looked


def intents_backlog(world: World) -> None:
    """HELD intents of deliveries a worker holds, then DUE of deliveries that failed: an
    operator's case each, flagged once the pass reaches it."""
    for n in range(HELD + DUE):
        world.effects.record_intent(
            delivery(n), "notify", key="k", now=world.clock.value, expires_at=0
        )
        held = n < HELD
        item = builders.inbox_item(
            delivery(n),
            received_at=world.clock.value,
            state=State.PROCESSING if held else State.FAILED,
            lease_until=world.clock.value + 10 * EFFECT_AGE if held else None,
        )
        # Not listed open: the open pass reads one empty page before this pass.
        world.claims.add(item, listed=False)
    world.clock.advance(EFFECT_AGE + 1)
    world.received.advance(world.clock.value)  # the received log is read up to now


def flagged(world: World) -> set[str]:
    return {d for (d, _), r in world.effects.records.items() if r.flagged_at is not None}


def test_an_intent_backlog_larger_than_a_run_is_worked_off_over_runs_none_starved() -> None:
    looked = Looked()
    world = World(claims=looked)
    intents_backlog(world)
    runs = 0
    while flagged(world) != {delivery(n) for n in range(HELD, HELD + DUE)} and runs < 30:
        runs += 1
        report = world.run(deadline_after_looks(8), config=SMALL_PAGES)
        assert report.budget_spent is True or runs > 1  # no run reads the whole backlog
    # Every run went on from where the last one stopped: the failed deliveries past the
    # first run's reach were reached, each intent looked at once and flagged once.
    assert 1 < runs < 30
    assert world.metrics.counts[metric_names.METRIC_RECONCILER_EFFECTS_FLAGGED] == DUE
    # Each run read its last page's first record and stopped: read again by the next.
    assert set(looked.reads) == {delivery(n) for n in range(HELD + DUE)}
    assert max(looked.reads.values()) <= 2
    assert sum(looked.reads.values()) <= HELD + DUE + runs


def test_an_effects_pass_stopped_mid_page_keeps_its_cursor_before_the_page() -> None:
    world = World()
    intents_backlog(world)
    first = watch_reads(world)
    # The run stops inside a later page: looks before this pass (the received log, the
    # open pass's empty page per shard), one per page read and per record after a page's
    # first.
    world.run(deadline_after_looks(LOOKS_BEFORE_EFFECTS + 2 * PAGE), config=SMALL_PAGES)
    assert world.effects.cursor is not None
    # Then its process died: nothing more written. The next run reads that page again,
    # and not what the pages before it held.
    looked = watch_reads(world)
    world.run(config=SMALL_PAGES)
    everything = {delivery(n) for n in range(HELD + DUE)}
    assert set(first.reads) | set(looked.reads) == everything
    assert len(set(first.reads) & set(looked.reads)) < PAGE  # the page stopped in, if any
    assert set(looked.reads) != everything
    assert flagged(world) == {delivery(n) for n in range(HELD, HELD + DUE)}
    assert world.metrics.counts[metric_names.METRIC_RECONCILER_EFFECTS_FLAGGED] == DUE
    assert world.effects.cursor is None  # through: back at the start


def test_an_effects_pass_crashed_mid_page_skips_nothing_of_the_page() -> None:
    class Crashing(FakeEffects):
        flags = 0

        def flag(self, record: EffectRecord, *, now: int) -> bool:
            self.flags += 1
            if self.flags == 3:
                raise RuntimeError("the run's process died")
            return super().flag(record, now=now)

    world = World(effects=Crashing())
    intents_backlog(world)
    # The third failed delivery's intent crashes the run, in whichever page it is.
    with pytest.raises(RuntimeError):
        world.run(config=SMALL_PAGES)
    assert len(flagged(world)) == 2
    world.run(config=SMALL_PAGES)
    assert flagged(world) == {delivery(n) for n in range(HELD, HELD + DUE)}
    # Each flagged once; the run that died reported nothing.
    assert world.metrics.counts[metric_names.METRIC_RECONCILER_EFFECTS_FLAGGED] == DUE - 2


def test_a_lost_answer_on_the_intent_cursor_save_skips_nothing() -> None:
    world = World()
    intents_backlog(world)
    first = watch_reads(world)
    world.effects.cursor_writes.lose_answers = 1
    with pytest.raises(StorageUnavailable):
        world.run(config=SMALL_PAGES)
    # The save was applied: the next run goes on after the page it was made for.
    assert world.effects.cursor is not None
    assert 0 < len(first.reads) <= PAGE  # one page read, then its save's answer lost
    looked = watch_reads(world)
    world.run(config=SMALL_PAGES)
    assert sorted(set(looked.reads) | set(first.reads)) == [delivery(n) for n in range(HELD + DUE)]
    assert not set(looked.reads) & set(first.reads)
    assert flagged(world) == {delivery(n) for n in range(HELD, HELD + DUE)}
    assert world.effects.cursor is None


def parked_backlog(world: World) -> FakeApprovals:
    """HELD deliveries parked with a day to go, then DUE whose deadline has passed."""
    approvals = FakeApprovals(world.claims)
    world.approvals = approvals
    now = world.clock.value
    for n in range(HELD + DUE):
        deadline = now + (86_400 if n < HELD else -1)
        item = builders.inbox_item(
            delivery(n),
            received_at=now - 3600,
            state=State.AWAITING_APPROVAL,
            state_changed_at=now - 3600 + n,
            approval="alert",
            approval_deadline=deadline,
        )
        world.claims.add(item)
        record = ApprovalRecord(
            delivery(n), "alert", {}, requested_at=now - 3600 + n, deadline=deadline
        )
        assert approvals.request(record, expires_at=0)
    world.received.advance(now)  # the received log is read up to now
    return approvals


def expired(world: World) -> set[str]:
    return {d for d, i in world.claims.items.items() if i.last_error == "approval_expired"}


def test_a_parked_backlog_larger_than_a_run_is_worked_off_over_runs_none_starved() -> None:
    world = World()
    approvals = parked_backlog(world)
    runs = 0
    while expired(world) != {delivery(n) for n in range(HELD, HELD + DUE)} and runs < 30:
        runs += 1
        report = world.run(deadline_after_looks(8), config=SMALL_PAGES)
        # The longest wait is the whole backlog's, not only of what this run read.
        assert report.approval_oldest_wait_seconds == 3600
    assert 1 < runs < 30
    assert world.metrics.counts[metric_names.METRIC_APPROVALS_EXPIRED] == DUE
    decided = [r for r in approvals.records.values() if r.decided is not None]
    assert len(decided) == DUE
    assert all(world.claims.items[delivery(n)].approval for n in range(HELD))


def test_an_approval_pass_stopped_mid_page_then_a_lost_cursor_answer_skips_nothing() -> None:
    world = World()
    approvals = parked_backlog(world)
    # Only due ones: the pass's every page is a page of denials.
    for n in range(HELD):
        world.claims.expire(delivery(n))
    # Looks before this pass (the received log, the open and the effects passes' empty
    # page per shard), one per page read and per denial after a page's first: the run
    # stops inside a page.
    world.run(deadline_after_looks(LOOKS_BEFORE_APPROVALS + 4), config=SMALL_PAGES)
    assert approvals.cursor is not None
    first = len(expired(world))
    assert 0 < first < DUE
    approvals.cursor_writes.lose_answers = 1  # the next save: applied, its answer lost
    with pytest.raises(StorageUnavailable):
        world.run(config=SMALL_PAGES)
    lost = len(expired(world)) - first
    world.run(config=SMALL_PAGES)  # on from the saved cursor to the end
    assert approvals.cursor is None
    assert expired(world) == {delivery(n) for n in range(HELD, HELD + DUE)}
    assert sum(r.decided is not None for r in approvals.records.values()) == DUE
    # Each denied once; the run that lost its answer reported nothing.
    assert world.metrics.counts[metric_names.METRIC_APPROVALS_EXPIRED] == DUE - lost
    world.run(config=SMALL_PAGES)  # a pass over nothing: it starts over and ends
    assert approvals.cursor is None


# --- the received log read shard by shard, side by side ---------------------------------

SIDE_BY_SIDE = dataclasses.replace(CONFIG, parallelism=4)
SHARDS = table_layout.DEFAULT_RECEIVED_LOG_SHARDS


def shard_of(delivery_id: str) -> int:
    name = dynamodb_items.received_log_shard(delivery_id, shards=SHARDS)
    return int(name.removeprefix(table_layout.RECEIVED_LOG_PREFIX))


def test_side_by_side_each_shard_keeps_its_own_watermark_and_the_shared_one_the_least() -> None:
    world = World()
    world.pending(40, listed=False)
    world.age()
    report = world.run(config=SIDE_BY_SIDE)
    assert (report.received_listed, report.pending_requeued) == (40, 40)
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(40)})
    end = world.clock.value - CONFIG.received_age_seconds
    assert sorted(world.received.windows_by_shard) == list(range(SHARDS))
    assert [world.received.shard_mark(n) for n in range(SHARDS)] == [end] * SHARDS
    assert world.received.mark == end
    assert report.received_lag_seconds == CONFIG.received_age_seconds


def test_side_by_side_reads_as_many_shards_at_once_as_the_setting_says() -> None:
    world = World()
    world.pending(16, listed=False)
    world.age()
    # Each shard's first read waits for three others: read one after another, the
    # barrier's timeout breaks it and the run fails.
    world.received.rendezvous = threading.Barrier(SIDE_BY_SIDE.parallelism, timeout=10)
    report = world.run(config=SIDE_BY_SIDE)
    assert report.received_listed == 16
    assert not world.received.rendezvous.broken


def test_a_shard_that_cannot_be_read_holds_back_only_itself() -> None:
    world = World()
    world.pending(40, listed=False)
    world.age()
    stuck = {delivery(n) for n in range(40) if shard_of(delivery(n)) == 3}
    assert stuck and len(stuck) < 40
    world.received.fail_shard = 3
    with pytest.raises(StorageUnavailable):
        world.run(config=SIDE_BY_SIDE)
    end = world.clock.value - CONFIG.received_age_seconds
    marks = {n: world.received.shard_mark(n) for n in range(SHARDS)}
    assert marks.pop(3) is None
    assert set(marks.values()) == {end}
    # The others' receipts were listed and re-enqueued; the shared mark never passes the
    # window the stuck shard has not read.
    assert world.claims.unlisted == stuck
    assert world.sent_ids() == Counter({d: 1 for n in range(40) if (d := delivery(n)) not in stuck})
    assert world.received.mark is None
    world.received.fail_shard = None
    again = world.run(config=SIDE_BY_SIDE)
    # Read again from each mark (harmless: nothing is listed twice), the stuck shard's
    # receipts now too.
    assert (again.received_listed, again.pending_requeued) == (len(stuck), len(stuck))
    assert world.sent_ids() == Counter({delivery(n): 1 for n in range(40)})
    assert world.received.mark == end


def test_side_by_side_starts_each_shard_at_the_shared_mark_when_that_is_further() -> None:
    world = World()
    world.pending(8, listed=False)
    world.age()
    world.run(config=SIDE_BY_SIDE)
    first = world.received.shard_mark(0)
    assert first is not None
    # A deploy that reads every shard at once moves only the shared mark.
    world.clock.advance(3 * RECEIVED_WINDOW_SECONDS)
    world.run()
    shared = world.received.mark
    assert shared is not None and shared > first
    world.received.windows_by_shard.clear()
    world.run(config=SIDE_BY_SIDE)
    starts = {windows[0][0] for windows in world.received.windows_by_shard.values()}
    assert starts == {shared - RECEIVED_OVERLAP_SECONDS}


def test_side_by_side_reads_a_shard_a_raised_count_added_from_its_oldest_receipt() -> None:
    world = World()
    world.pending(8, listed=False)
    world.age()
    world.run(config=SIDE_BY_SIDE)
    shared = world.received.mark
    assert shared is not None
    # A receiver of a deploy with 16 shards wrote a receipt to a new shard, stamped
    # before the shared mark (its reconciler had not run yet).
    late = next(d for n in range(100, 200) if shard_of16(d := delivery(n)) >= SHARDS)
    item = builders.inbox_item(late, received_at=shared - 2 * RECEIVED_WINDOW_SECONDS)
    world.claims.table.raw.put_item(
        TableName=world.claims.table.name, Item=dynamodb_items.inbox_to_item(item)
    )
    assert item.package_id is not None and item.mcp_url is not None
    work = WorkItem(item.delivery_id, item.event, item.package_id, item.mcp_url)
    receipt = dynamodb_items.outbox_to_item(
        work, created_at=item.received_at, expires_at=item.expires_at, shards=2 * SHARDS
    )
    world.claims.table.raw.put_item(TableName=world.claims.table.name, Item=receipt)
    world.received = FakeReceivedLog(world.claims, shards=2 * SHARDS)
    report = world.run(config=SIDE_BY_SIDE)
    assert report.received_listed == 1
    assert late not in world.claims.unlisted
    assert world.received.mark == world.clock.value - CONFIG.received_age_seconds


def shard_of16(delivery_id: str) -> int:
    name = dynamodb_items.received_log_shard(delivery_id, shards=2 * SHARDS)
    return int(name.removeprefix(table_layout.RECEIVED_LOG_PREFIX))
