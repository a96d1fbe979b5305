"""The reconciler's use case: find work that fell through the cracks and put it back.

It looks at the received log first, then at three lists of the state index, in this order:

* receipts not yet looked at (after the watermark) and older than the received age
  (the pending age or the lease, whichever is shorter): the receiver does not list a
  new item in the index, so each one still open then is listed ``open`` here, and
  recovered at once by the two rules below if they apply. The watermark advances only
  past windows fully handled, so a run that stops (deadline, crash) leaves the rest to
  the next run, which looks again (listing is idempotent). First, because it is how a
  receipt whose relay message was lost is ever found: no backlog of open items may
  keep a run from it.
* the ``open`` items, page by page, each read once (eventually consistent: every action
  is a conditional write on what was read, so a stale read only costs a no-op):
  ``processing`` items whose lease ran out (their worker died; a lease outlives the
  worker's timeout) go back to ``pending`` and are re-enqueued; ``pending`` items
  unchanged for longer than a threshold (their work item never reached the queue or was
  lost) are re-enqueued. A cursor (:class:`OpenCursor`), persisted after each page,
  lets the next run continue the pass where this one stopped, so a backlog larger than
  one run can read is still covered, shard after shard, run after run.
* effect intents older than a threshold: a retry of a ``pending`` delivery resolves
  them with the effect's own reconcile check, so that delivery is re-enqueued now;
  one whose delivery is over (failed, completed) is flagged for an operator. Intents of
  deliveries a worker holds, or re-enqueued, stay listed: the pass resumes from a cursor
  of its own (:class:`IntentCursor`), so they do not keep every run from the rest.
* deliveries parked ``awaiting_approval`` (:func:`expire_approvals`, a pass of its
  own): one whose deadline has passed is denied by the timeout (``approval_expired``).
  Those not yet due stay parked: this pass too resumes from its cursor. The oldest wait
  is read from the list's first entries and reported for its alarm.

The three passes over the index share one loop (:func:`_work_off`): a cursor saved
after each page worked off, never before, so a run that stops inside a page (deadline,
crash) reads that page again next run and skips nothing; back at the start once the
pass is through.

Every action starts with a conditional write on what was listed, so a second
reconciler run (or a worker) that got there first makes it a no-op; a message sent
twice is harmless because a claim is idempotent.

A run pages through the lists, in that order, until its deadline (the Lambda's remaining
time less :data:`SAFETY_MARGIN_SECONDS`), which it checks before every page and every
write; then it stops and the next run continues where it stopped (the watermark, each
pass's cursor; what this run handled is no longer due: its write restarted the
item's clock or moved it, or it is harmless to do again). Work items whose
write won are sent :data:`SEND_BATCH_SIZE` at a time, always after the write: only the
run that won sends. An item the queue then refuses stays ``pending`` with its clock
restarted, so it is listed again, and re-enqueued, one pending age later.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, Protocol, TypeVar

from functions.core import metric_names, settings_table, table_layout, tracing, work_trace
from functions.core.approval import DECIDED_BY_TIMEOUT, DecideOutcome, decide, new_decision_token
from functions.core.clock import Clock
from functions.core.deadline import Deadline
from functions.core.models import InboxItem, State, WorkItem
from functions.core.observability import logger
from functions.core.ports.approvals import ApprovalDecision, ApprovalDecisions, Decision
from functions.core.ports.effects import EffectRecord
from functions.core.ports.metrics import ReconcilerMetrics
from functions.core.ports.queue import EnqueueBatch
from functions.core.ports.recovery import (
    ReceivedLog,
    ReceivedLogPart,
    RecoveryStore,
    UncertainEffects,
)

# Index items per query page. A page is one round trip, so a large one amortises it
# (DynamoDB ends a page at 1 MB anyway, some 2,000 inbox items); a page is read only
# once the one before is worked off, so a run that stops wastes at most one page read.
LIST_PAGE_SIZE: Final = 1000
# Won work items per send: SQS's SendMessageBatch maximum. Few are held unsent at any
# moment, so a crash between write and send hides few items for a pending age.
SEND_BATCH_SIZE: Final = 10
# Kept back from the Lambda's remaining time for the run's deadline: the item in hand,
# the last batch's send and the metrics flush fit in it many times over at normal
# latencies.
SAFETY_MARGIN_SECONDS: Final = 5.0
# The received log is looked at a window of this many seconds at a time; the watermark
# advances after each, so a run cut short keeps what it finished.
RECEIVED_WINDOW_SECONDS: Final = 60
# Each run looks again a little before its watermark (table_layout).
RECEIVED_OVERLAP_SECONDS: Final = table_layout.RECEIVED_LOG_OVERLAP_SECONDS

_T = TypeVar("_T")
_C = TypeVar("_C")
_T_co = TypeVar("_T_co", covariant=True)
_C_co = TypeVar("_C_co", covariant=True)


@dataclass(frozen=True, slots=True)
class ReconcileConfig:
    pending_age_seconds: int
    effect_age_seconds: int
    # A receipt older than this and still open is listed: the shorter of the pending age
    # and the lease, the first moment either rule could apply to it.
    received_age_seconds: int
    page_size: int = LIST_PAGE_SIZE  # tests page small to cross many page boundaries
    # How long a receipt lives (the inbox retention, its TTL): the received log is never
    # read further back than this, whatever it holds.
    retention_seconds: int = settings_table.INBOX_RETENTION_DAYS.default * 24 * 3600
    # Received log shards read at once; above 1, each shard keeps its own watermark.
    parallelism: int = settings_table.RECONCILE_PARALLELISM.default


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    leases_requeued: int = 0
    pending_requeued: int = 0
    effects_requeued: int = 0
    effects_flagged: int = 0
    received_listed: int = 0  # open receipts listed from the received log
    # Seconds from the received log's watermark to the run's time; None: the run's time
    # was spent before it read the watermark.
    received_lag_seconds: int | None = None
    requeues_unsent: int = 0  # written but refused by the queue: back after a pending age
    budget_spent: bool = False  # stopped before the lists' end: the next run continues
    approvals_expired: int = 0  # parked deliveries the timeout denied
    # How long the oldest delivery still waiting for a person has waited (0: none).
    approval_oldest_wait_seconds: int = 0


def reconcile(
    *,
    store: RecoveryStore,
    received: ReceivedLog,
    effects: UncertainEffects,
    queue: EnqueueBatch,
    clock: Clock,
    metrics: ReconcilerMetrics,
    config: ReconcileConfig,
    deadline: Deadline,
    approvals: ApprovalDecisions | None = None,
) -> ReconcileReport:
    """One reconciler run, until the lists are worked off or ``deadline`` has passed."""
    now = clock.now()  # one time for the run: what it touches is not listed again
    budget = _Budget(deadline)
    stale_before = now - config.pending_age_seconds
    pass_log = _received_side_by_side if config.parallelism > 1 else _received_pass
    log = pass_log(
        store, received, budget, now=now, stale_before=stale_before, config=config, queue=queue
    )
    listed = log.listed
    # Reported once the log is read, so that a later failure (the lists below) does
    # not hide how far the log got: its alarm reads a missing figure as behind.
    lag = None if log.watermark is None else now - log.watermark
    if lag is not None:
        metrics.seconds(metric_names.METRIC_RECONCILER_RECEIVED_LOG_LAG, lag)
    if log.error is not None:
        raise log.error
    with _Batch(queue) as leases, _Batch(queue) as pending:
        batches = (leases, pending)
        leases.count(log.sent[0], log.unsent[0])
        pending.count(log.sent[1], log.unsent[1])
        _open_pass(
            store, budget, now=now, stale_before=stale_before, batches=batches, config=config
        )
    with _Batch(queue) as requeued:
        flagged = _effects_pass(store, effects, budget, now=now, requeued=requeued, config=config)
    sweep = _approval_pass(approvals, metrics, now=now, budget=budget, config=config)
    for metric, value in (
        (metric_names.METRIC_APPROVALS_EXPIRED, sweep.expired),
        (metric_names.METRIC_RECONCILER_LEASES_REQUEUED, leases.sent),
        (metric_names.METRIC_RECONCILER_PENDING_REQUEUED, pending.sent),
        (metric_names.METRIC_RECONCILER_EFFECTS_REQUEUED, requeued.sent),
        (metric_names.METRIC_RECONCILER_EFFECTS_FLAGGED, flagged),
        (metric_names.METRIC_RECONCILER_RECEIVED_LISTED, listed),
    ):
        metrics.count(metric, value)
    return ReconcileReport(
        leases_requeued=leases.sent,
        pending_requeued=pending.sent,
        effects_requeued=requeued.sent,
        effects_flagged=flagged,
        received_listed=listed,
        received_lag_seconds=lag,
        requeues_unsent=leases.unsent + pending.unsent + requeued.unsent,
        budget_spent=budget.spent,
        approvals_expired=sweep.expired,
        approval_oldest_wait_seconds=sweep.oldest_wait_seconds,
    )


@dataclass(frozen=True, slots=True)
class ApprovalSweep:
    expired: int = 0
    oldest_wait_seconds: int = 0


def _approval_pass(
    approvals: ApprovalDecisions | None,
    metrics: ReconcilerMetrics,
    *,
    now: int,
    budget: _Budget,
    config: ReconcileConfig,
) -> ApprovalSweep:
    if approvals is None:  # (a reconciler wired without the gate's store)
        return ApprovalSweep()
    sweep = expire_approvals(approvals, now=now, budget=budget, page_size=config.page_size)
    if sweep.oldest_wait_seconds:
        # Only while something waits: its alarm reads no data as nothing waiting.
        metrics.seconds(metric_names.METRIC_APPROVAL_OLDEST_WAIT, sweep.oldest_wait_seconds)
    return sweep


def expire_approvals(
    approvals: ApprovalDecisions, *, now: int, budget: _Budget, page_size: int
) -> ApprovalSweep:
    """Deny, by the timeout, every parked delivery whose approval deadline has passed.

    Self-contained: it reads only the ``awaiting_approval`` label, page by page from
    where the last run stopped (its cursor, saved after each page worked off and back
    at the start once the pass is through), and stops before the next page or denial
    once ``budget`` is spent. Each denial is the decision's conditional transaction, so
    a person's decision a moment earlier wins, and a denial whose answer was lost is
    recognised by its token rather than counted twice or as a conflict. The oldest wait
    is read from the label's first entries, not from the part of the pass this run
    read: a pass that takes several runs still reports the longest wait every run.
    """
    expired = _expire_due(approvals, now=now, budget=budget, page_size=page_size)
    # Read even past the deadline: one key per shard fits the safety margin, and the
    # alarm must not go without its figure while a backlog spends every run's budget.
    since = approvals.waiting_since()
    oldest = 0 if since is None else max(now - since, 0)
    return ApprovalSweep(expired=expired, oldest_wait_seconds=oldest)


def _expire_due(approvals: ApprovalDecisions, *, now: int, budget: _Budget, page_size: int) -> int:
    """The pass itself: how many deliveries it denied."""
    expired = 0

    def due(item: InboxItem) -> bool:
        deadline = item.approval_deadline
        return item.approval is not None and deadline is not None and deadline <= now

    def deny(item: InboxItem) -> None:
        nonlocal expired
        assert item.approval is not None  # due() checked it
        timeout = Decision(ApprovalDecision.EXPIRED, DECIDED_BY_TIMEOUT, now, new_decision_token())
        if decide(approvals, item.delivery_id, item.approval, timeout).outcome is (
            DecideOutcome.APPLIED
        ):
            expired += 1
            with tracing.within(item.traceparent):
                logger.warning(
                    "approval expired: denied by the timeout",
                    extra={"delivery_id": item.delivery_id, "approval": item.approval},
                )

    pages = approvals.waiting_pages(start=approvals.waiting_cursor(), page_size=page_size)
    _work_off(budget, pages, due=due, work=deny, save=approvals.save_waiting_cursor)
    return expired


def _effects_pass(
    store: RecoveryStore,
    effects: UncertainEffects,
    budget: _Budget,
    *,
    now: int,
    requeued: _Batch,
    config: ReconcileConfig,
) -> int:
    """The uncertain intents from where the last run stopped (the cursor is saved after
    each page worked off, and back at the start once the pass is through); returns how
    many it flagged."""
    flagged = 0

    def settle(record: EffectRecord) -> None:
        nonlocal flagged
        flagged += _settle_intent(store, effects, record, now=now, requeued=requeued)

    pages = effects.uncertain_pages(
        start=effects.intent_cursor(),
        intended_before=now - config.effect_age_seconds,
        page_size=config.page_size,
    )
    # Every intent costs a read at least: each one counts as a write would.
    _work_off(budget, pages, due=lambda _record: True, work=settle, save=effects.save_intent_cursor)
    return flagged


def _settle_intent(
    store: RecoveryStore,
    effects: UncertainEffects,
    record: EffectRecord,
    *,
    now: int,
    requeued: _Batch,
) -> int:
    """Requeue the pending delivery of one uncertain intent, or flag the intent of one
    that is over for an operator; returns 1 if it flagged it."""
    inbox = store.get(record.delivery_id)
    if inbox is not None and inbox.state is State.PROCESSING:
        return 0  # a worker holds it, or the lease rule above will free it
    if inbox is not None and inbox.state is State.PENDING:
        if store.touch_pending(inbox, now=now):
            requeued.add(inbox)
        return 0
    if not effects.flag(record, now=now):
        return 0
    with tracing.within(None if inbox is None else inbox.traceparent):
        logger.warning(
            "effect outcome uncertain, operator needed",
            extra={"delivery_id": record.delivery_id, "effect": record.name},
        )
    return 1


def _open_pass(
    store: RecoveryStore,
    budget: _Budget,
    *,
    now: int,
    stale_before: int,
    batches: tuple[_Batch, _Batch],
    config: ReconcileConfig,
) -> None:
    """The open items from where the last run stopped; the cursor is saved after each
    page worked off, and back at the start once the pass is through."""
    _work_off(
        budget,
        store.open_pages(start=store.open_cursor(), page_size=config.page_size),
        due=lambda item: _due(item, now=now, stale_before=stale_before),
        work=lambda item: _recover(
            store, item, now=now, stale_before=stale_before, batches=batches
        ),
        save=store.save_open_cursor,
    )


class _Page(Protocol[_T_co, _C_co]):
    """A page of a pass over a list, and where the pass resumes after it (None: done)."""

    @property
    def items(self) -> Sequence[_T_co]: ...

    @property
    def resume(self) -> _C_co | None: ...


def _work_off(
    budget: _Budget,
    pages: Iterable[_Page[_T, _C]],
    *,
    due: Callable[[_T], bool],
    work: Callable[[_T], None],
    save: Callable[[_C | None], None],
) -> None:
    """A pass over a list, from where the last run stopped (``pages`` start at its saved
    cursor): the items ``due`` of each page are worked off, then the cursor is saved;
    back at the start once the pass is through. The deadline is looked at before each
    page and each item due but a page's first."""
    for page in budget.within(pages):
        handled = 0
        for item in page.items:
            if not due(item):
                continue  # nothing to write, so nothing to wait for
            # At least one per page read: a run that ends here every time still gets
            # through the page, one item a run (its cursor stays before the page).
            if handled and budget.spent_now():
                return  # the page is read again next run: what was done is no longer due
            work(item)
            handled += 1
        save(page.resume)
        if page.resume is None:
            return  # through: the next run starts over


def _due(item: InboxItem, *, now: int, stale_before: int) -> bool:
    """Whether one of the two rules applies to the item as read."""
    if item.state is State.PROCESSING:
        return item.lease_until is not None and item.lease_until <= now
    return item.state is State.PENDING and item.state_changed_at < stale_before


def _recover(
    store: RecoveryStore,
    item: InboxItem,
    *,
    now: int,
    stale_before: int,
    batches: tuple[_Batch, _Batch],
) -> None:
    """The expired-lease and stale-pending rules for one item just listed."""
    leases, pending = batches
    if not _due(item, now=now, stale_before=stale_before):
        return
    if item.state is State.PROCESSING:
        if store.release_expired(item, now=now):
            leases.add(item)
    elif store.touch_pending(item, now=now):
        pending.add(item)


@dataclass
class _Progress:
    """How far the received log has been looked at, as this run knows it."""

    watermark: int | None = None


@dataclass
class _LogPass:
    """What a pass over the received log (or one shard of it) did."""

    listed: int = 0
    watermark: int | None = None  # how far it got (None: its time was spent first)
    sent: tuple[int, int] = (0, 0)  # work items re-enqueued: expired leases, stale pending
    unsent: tuple[int, int] = (0, 0)  # and refused by the queue
    error: Exception | None = None  # what ended a shard's pass, raised once all are done


def _received_pass(
    store: RecoveryStore,
    received: ReceivedLogPart,
    budget: _Budget,
    *,
    now: int,
    stale_before: int,
    config: ReconcileConfig,
    queue: EnqueueBatch,
) -> _LogPass:
    """The open receipts of ``received`` listed, and those due recovered and sent."""
    progress = _Progress()
    result = _LogPass()
    with _Batch(queue) as leases, _Batch(queue) as pending:
        for item in _list_received(received, budget, progress, now=now, config=config):
            result.listed += 1
            # Listed now, so later runs see it in the index; what is due already is
            # recovered in this run by the rules below.
            _recover(store, item, now=now, stale_before=stale_before, batches=(leases, pending))
        result.watermark = progress.watermark
    # (sent on leaving the block: what the log recovered goes out before the open pass)
    result.sent, result.unsent = (leases.sent, pending.sent), (leases.unsent, pending.unsent)
    return result


def _received_side_by_side(
    store: RecoveryStore,
    received: ReceivedLog,
    budget: _Budget,
    *,
    now: int,
    stale_before: int,
    config: ReconcileConfig,
    queue: EnqueueBatch,
) -> _LogPass:
    """Each shard of the log read by a pass of its own, ``config.parallelism`` at once,
    each moving its own watermark: a shard that fails or is slow holds back only itself.
    The shared watermark then moves to the least of theirs, so it never passes a window
    some shard has not read."""
    if budget.spent_now():
        return _LogPass()
    slices = received.slices()

    def one(log: ReceivedLogPart) -> _LogPass:
        try:
            return _received_pass(
                store, log, budget, now=now, stale_before=stale_before, config=config, queue=queue
            )
        except Exception as error:  # noqa: BLE001 (the other shards go on; raised after them)
            # Its own mark stays after its last window read; the shared one stays put.
            return _LogPass(error=error)

    workers = max(1, min(config.parallelism, len(slices)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="received") as pool:
        # Each in a copy of the run's context: its re-enqueues stay spans of the run.
        futures = [pool.submit(contextvars.copy_context().run, one, log) for log in slices]
        passes = [future.result() for future in futures]
    total = _LogPass(
        listed=sum(p.listed for p in passes),
        sent=(sum(p.sent[0] for p in passes), sum(p.sent[1] for p in passes)),
        unsent=(sum(p.unsent[0] for p in passes), sum(p.unsent[1] for p in passes)),
        error=next((p.error for p in passes if p.error is not None), None),
    )
    marks = [p.watermark for p in passes]
    if marks and all(mark is not None for mark in marks):
        total.watermark = min(mark for mark in marks if mark is not None)
        if total.error is None:
            received.advance(total.watermark)
    return total


def _list_received(
    received: ReceivedLogPart,
    budget: _Budget,
    progress: _Progress,
    *,
    now: int,
    config: ReconcileConfig,
) -> Iterator[InboxItem]:
    """The open receipts after the watermark and older than the received age, each
    listed by this run as it is yielded; the watermark advances past each window as soon
    as all its items were yielded (and so listed) before the deadline."""
    if budget.spent_now():
        return
    end = now - config.received_age_seconds
    # A receipt older than the retention has expired with its inbox item; one stamped
    # far in the past (a malformed record) must not send the run walking windows from
    # 1970 until its deadline.
    floor = now - config.retention_seconds
    mark = received.watermark()
    if mark is None:
        start = received.oldest(since=floor)
    else:
        start = max(mark - RECEIVED_OVERLAP_SECONDS, floor)
    # Without a watermark yet, nothing before the oldest receipt is left to look at.
    progress.watermark = start if mark is None else mark
    if start is None:  # nothing received yet: later receipts are all after the end
        received.advance(end)
        progress.watermark = end
        return
    while start < end:
        stop = min(start + RECEIVED_WINDOW_SECONDS, end)
        pages = received.unlisted_open_pages(since=start, before=stop, page_size=config.page_size)
        for page in budget.within(pages):
            for n, item in enumerate(page):
                # At least one listing per page read: a run that ends here every time
                # still gets through the window.
                if n and budget.spent_now():
                    break
                if received.list_open(item):
                    yield item
            if budget.spent:
                break
        if budget.spent:
            break
        # Every open item of the window is listed now: moving the watermark past it at
        # once keeps this window's work even if a later window ends the run in an error.
        if mark is None or stop > mark:
            received.advance(stop)
            progress.watermark = stop
        start = stop


@dataclass
class _Budget:
    deadline: Deadline
    spent: bool = False

    def within(self, items: Iterable[_T]) -> Iterator[_T]:
        """``items`` one by one until the deadline; after it not even the next is read
        (reading it may cost a page query)."""
        iterator = iter(items)
        while not self.spent:
            if self.deadline.remaining() <= 0:
                self.spent = True
                return
            try:
                item = next(iterator)
            except StopIteration:
                return
            yield item

    def spent_now(self) -> bool:
        """Whether the deadline has passed (and so the budget is spent)."""
        if not self.spent and self.deadline.remaining() <= 0:
            self.spent = True
        return self.spent


@dataclass
class _Batch:
    """Work items of won writes, sent :data:`SEND_BATCH_SIZE` at a time.

    Leaving the ``with`` block sends the rest, also when an error ends the run: a won
    write must not wait a pending age for want of its send.
    """

    queue: EnqueueBatch
    works: list[WorkItem] = field(default_factory=list)
    sent: int = 0
    unsent: int = 0

    def __enter__(self) -> _Batch:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.flush()

    def count(self, sent: int, unsent: int) -> None:
        """Add what another batch of the same kind sent (one line of the report)."""
        self.sent += sent
        self.unsent += unsent

    def add(self, item: InboxItem) -> None:
        work = item.work_item()
        if work is None:
            return
        self.works.append(work)
        if len(self.works) >= SEND_BATCH_SIZE:
            self.flush()

    def flush(self) -> None:
        works, self.works = self.works, []  # taken first: a failed send is not repeated
        if not works:
            return
        with work_trace.resending(tracing.SPAN_RECONCILER_REQUEUE, works) as traced:
            unsent = self.queue.send_batch(traced)
        for refused in unsent:
            with tracing.within(refused.work.traceparent):
                logger.warning(
                    "work item refused by the queue, re-enqueued after the pending age",
                    extra={"delivery_id": refused.work.delivery_id, "reason": refused.reason},
                )
        self.sent += len(works) - len(unsent)
        self.unsent += len(unsent)
