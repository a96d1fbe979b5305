"""The reconciler's use case: find work that fell through the cracks and put it back.

It looks at three lists of the ``by_state`` index:

* ``processing`` items whose lease ran out: their worker died (a lease outlives the
  worker's timeout). Back to ``pending``, then re-enqueued.
* ``pending`` items unchanged for longer than a threshold: their work item never
  reached the queue or was lost. Re-enqueued.
* effect intents older than a threshold: a retry of a ``pending`` delivery resolves
  them with the effect's own reconcile check, so that delivery is re-enqueued now;
  one whose delivery is over (failed, completed) is flagged for an operator.

Every action starts with a conditional write on what was listed, so a second
reconciler run (or a worker) that got there first makes it a no-op; a message sent
twice is harmless because a claim is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from functions.core import metric_names
from functions.core.clock import Clock
from functions.core.effects import EffectRecord
from functions.core.models import InboxItem, State, WorkItem
from functions.core.observability import logger
from functions.core.process import MetricsSink


class RecoveryStore(Protocol):
    """Port: the inbox as the reconciler sees it."""

    def get(self, delivery_id: str) -> InboxItem | None: ...

    def stale_pending(self, *, changed_before: int, limit: int) -> list[InboxItem]: ...

    def expired_leases(self, *, now: int, limit: int) -> list[InboxItem]: ...

    def touch_pending(self, item: InboxItem, *, now: int) -> bool: ...

    def release_expired(self, item: InboxItem, *, now: int) -> bool: ...


class UncertainEffects(Protocol):
    """Port: effect intents without a done record."""

    def uncertain(self, *, intended_before: int, limit: int) -> list[EffectRecord]: ...

    def flag(self, record: EffectRecord, *, now: int) -> bool: ...


class Enqueue(Protocol):
    def send(self, work: WorkItem, *, delay_seconds: int = 0) -> None: ...


@dataclass(frozen=True, slots=True)
class ReconcileConfig:
    pending_age_seconds: int
    effect_age_seconds: int
    limit: int = 200  # per list and run: a backlog is worked off over several runs


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    leases_requeued: int = 0
    pending_requeued: int = 0
    effects_requeued: int = 0
    effects_flagged: int = 0


def reconcile(
    *,
    store: RecoveryStore,
    effects: UncertainEffects,
    queue: Enqueue,
    clock: Clock,
    metrics: MetricsSink,
    config: ReconcileConfig,
) -> ReconcileReport:
    """One reconciler run."""
    now = clock.now()
    leases = 0
    for item in store.expired_leases(now=now, limit=config.limit):
        if _requeue(item, queue, store.release_expired(item, now=now)):
            leases += 1
    pending = 0
    for item in store.stale_pending(
        changed_before=now - config.pending_age_seconds, limit=config.limit
    ):
        if _requeue(item, queue, store.touch_pending(item, now=now)):
            pending += 1
    requeued = flagged = 0
    for record in effects.uncertain(
        intended_before=now - config.effect_age_seconds, limit=config.limit
    ):
        inbox = store.get(record.delivery_id)
        if inbox is not None and inbox.state is State.PROCESSING:
            continue  # a worker holds it, or the lease rule above will free it
        if inbox is not None and inbox.state is State.PENDING:
            if _requeue(inbox, queue, store.touch_pending(inbox, now=now)):
                requeued += 1
            continue
        if effects.flag(record, now=now):
            flagged += 1
            logger.warning(
                "effect outcome uncertain, operator needed",
                extra={"delivery_id": record.delivery_id, "effect": record.name},
            )
    for metric, value in (
        (metric_names.METRIC_RECONCILER_LEASES_REQUEUED, leases),
        (metric_names.METRIC_RECONCILER_PENDING_REQUEUED, pending),
        (metric_names.METRIC_RECONCILER_EFFECTS_REQUEUED, requeued),
        (metric_names.METRIC_RECONCILER_EFFECTS_FLAGGED, flagged),
    ):
        metrics.count(metric, value)
    return ReconcileReport(leases, pending, requeued, flagged)


def _requeue(item: InboxItem, queue: Enqueue, won: bool) -> bool:
    """Send the item's work item if our conditional write won."""
    work = item.work_item()
    if not won or work is None:
        return False
    queue.send(work)
    return True
