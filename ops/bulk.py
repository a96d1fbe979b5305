"""Bulk repair: requeue every failed delivery that matches, or redrive every dead letter.

One typed API for the CLI (``requeue --state failed``, ``redrive --all``) and the
console. Each call

* lists through the ``listing`` state index (its ``failed`` label only), a page at a
  time (never a scan), or receives the dead-letter queue;
* acts on each item with the per-item operations of :mod:`ops.requeue` (the
  conditional ``failed`` -> ``pending`` reset, then the work item), so a re-run
  changes nothing more: what was requeued is no longer failed;
* touches at most ``limit`` items unless ``yes``: over it, nothing changes and
  :class:`BulkLimitExceeded` says how many match; a dry run reports it instead;
* returns a :class:`BulkResult`: how many matched, changed, and why the others
  did not change.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from functions.core import tracing, work_trace
from functions.core.adapters.work_queue import SEND_BATCH_LIMIT, SqsWorkQueue
from functions.core.errors import StorageUnavailable
from functions.core.models import InboxItem, State, WorkItem
from ops import requeue
from ops.inbox import inbox_in_state, show_inbox
from ops.target import OperatorError, Target

# How many items one call may touch without ``yes``.
DEFAULT_LIMIT: Final = 100
# How many ids a result lists per outcome (the counts are always whole).
LISTED_IDS: Final = 100
# Resets between two sends of work items: one SQS batch.
_SEND_CHUNK: Final = SEND_BATCH_LIMIT
# Per-item requests in flight at once: each is a round trip of its own (boto3 clients
# are thread-safe; botocore keeps 10 connections per client).
CONCURRENCY: Final = 8


class NotChanged(StrEnum):
    """Why a matched delivery was not requeued."""

    ALREADY_REQUEUED = "already_requeued"  # pending again: requeued since the listing
    # Failed again after an operator's requeue inside the window: running the same
    # command again changes nothing; a --since after that requeue takes it again.
    REQUEUED_IN_WINDOW = "requeued_in_window"
    STATE_MOVED = "state_moved"  # processing, completed or ignored since the listing
    MISSING = "missing"  # its item expired since the listing
    EXPIRED = "expired"  # its TTL has passed: it never runs again (TTL deletes it)
    NO_WORK_ITEM = "no_work_item"  # it has no package: there is nothing to run
    # Reset to pending but SQS refused its work item: the reconciler re-enqueues it.
    UNSENT = "unsent"


class BulkLimitExceeded(OperatorError):
    """More items match than one call may touch without ``yes``; nothing was changed."""

    def __init__(self, operation: str, matched: int, limit: int, *, narrow: str = "") -> None:
        self.matched = matched
        self.limit = limit
        super().__init__(
            f"{matched} item(s) match, more than the {limit} one {operation} may touch;"
            f" nothing was changed. Run again with --yes to {operation} all of them"
            + (f", or narrow the match ({narrow})" if narrow else "")
        )


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What one bulk call did (or, in a dry run, would do).

    Attributes:
        matched: items the listing found (failed deliveries in the window with the
            reason; or dead letters received).
        changed: items requeued or redriven (in a dry run: that would be).
        not_changed: why the other matched items were not changed, with counts.
        changed_ids: the first :data:`LISTED_IDS` changed ids.
        not_changed_ids: per reason, the first :data:`LISTED_IDS` ids.
        needs_yes: more match than ``limit`` (a dry run's warning; a real run refuses).
    """

    operation: str
    dry_run: bool
    limit: int
    matched: int
    changed: int
    not_changed: dict[str, int]
    changed_ids: list[str]
    not_changed_ids: dict[str, list[str]]
    needs_yes: bool = False
    filters: dict[str, Any] = field(default_factory=dict)

    @property
    def unchanged(self) -> int:
        return self.matched - self.changed

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "dry_run": self.dry_run,
            "limit": self.limit,
            "needs_yes": self.needs_yes,
            "filters": self.filters,
            "matched": self.matched,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "not_changed": dict(sorted(self.not_changed.items())),
            "changed_ids": self.changed_ids,
            "not_changed_ids": dict(sorted(self.not_changed_ids.items())),
            "ids_truncated": self.changed > len(self.changed_ids)
            or any(n > len(self.not_changed_ids.get(r, [])) for r, n in self.not_changed.items()),
        }


@dataclass(slots=True)
class Tally:
    """Outcomes as they come: whole counts, bounded id lists (every bulk operation's)."""

    changed: list[str] = field(default_factory=list)
    changed_count: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    reason_ids: dict[str, list[str]] = field(default_factory=dict)

    def change(self, delivery_id: str) -> None:
        self.changed_count += 1
        if len(self.changed) < LISTED_IDS:
            self.changed.append(delivery_id)

    def keep(self, delivery_id: str | None, why: str) -> None:
        reason = str(why)  # a StrEnum's value: plain keys in the result
        self.reasons[reason] += 1
        ids = self.reason_ids.setdefault(reason, [])
        if delivery_id is not None and len(ids) < LISTED_IDS:
            ids.append(delivery_id)


def requeue_matching(
    target: Target,
    *,
    now: int,
    state: State = State.FAILED,
    reason: str | None = None,
    since: int | None = None,
    until: int | None = None,
    limit: int = DEFAULT_LIMIT,
    yes: bool = False,
    dry_run: bool = True,
    page_size: int | None = None,
    concurrency: int = CONCURRENCY,
) -> BulkResult:
    """Requeue every delivery in ``state`` whose ``last_error`` is ``reason`` (any, if
    None) and whose state changed in ``[since, until)`` (epoch seconds; open ends).

    Only ``failed`` deliveries can be requeued. The match is listed first (the index),
    then each is reset with its own conditional update: one that changed meanwhile
    is counted under a :class:`NotChanged` reason, never overwritten. One that failed
    again after an operator requeued it inside the window is left alone
    (``requeued_in_window``), so the same command run twice requeues once.

    Raises:
        BulkLimitExceeded: not a dry run, not ``yes``, and more than ``limit`` match.
        OperatorError: the table or the queue cannot be reached.
    """
    if state is not State.FAILED:
        raise OperatorError(f"only failed deliveries can be requeued in bulk, not {state}")
    if limit < 1:
        raise OperatorError("the limit must be at least 1")
    matched = [
        item
        for item in _listing(target, state, since=since, until=until, page_size=page_size)
        if reason is None or item.last_error == reason
    ]
    matched.sort(key=lambda i: (i.state_changed_at, i.delivery_id))
    tally = Tally()
    to_requeue: list[InboxItem] = []
    for item in matched:
        if _requeued_in_window(item, since):
            tally.keep(item.delivery_id, NotChanged.REQUEUED_IN_WINDOW)
        else:
            to_requeue.append(item)
    needs_yes = len(to_requeue) > limit and not yes
    if needs_yes and not dry_run:
        raise BulkLimitExceeded(
            "requeue", len(to_requeue), limit, narrow="--reason, --since, --until"
        )
    with ThreadPoolExecutor(concurrency, thread_name_prefix="bulk-requeue") as pool:
        if dry_run:
            _preview(target, to_requeue, tally, pool, now=now)
        else:
            for start in range(0, len(to_requeue), _SEND_CHUNK):
                chunk = to_requeue[start : start + _SEND_CHUNK]
                _requeue_chunk(target, chunk, tally, pool, now=now)
    filters = {"state": state.value, "reason": reason, "since": since, "until": until}
    return bulk_result(
        "requeue",
        tally,
        matched=len(matched),
        dry_run=dry_run,
        limit=limit,
        needs_yes=needs_yes,
        filters=filters,
    )


def _requeued_in_window(item: InboxItem, since: int | None) -> bool:
    """An operator requeued it inside the window (any time, for an open window): the
    same command run again must not requeue what failed again since."""
    return item.requeued_at is not None and (since is None or item.requeued_at >= since)


def _listing(
    target: Target, state: State, *, since: int | None, until: int | None, page_size: int | None
) -> list[InboxItem]:
    try:
        return list(inbox_in_state(target, state, since=since, until=until, page_size=page_size))
    except StorageUnavailable as exc:
        raise OperatorError(f"DynamoDB: cannot list {state} deliveries ({exc})") from None


def _preview(
    target: Target, matched: list[InboxItem], tally: Tally, pool: Executor, *, now: int
) -> None:
    """Count what :func:`_requeue_chunk` would do with ``matched``, from fresh reads."""
    runnable: list[InboxItem] = []
    for item in matched:
        if item.work_item() is None:
            tally.keep(item.delivery_id, NotChanged.NO_WORK_ITEM)
        else:
            runnable.append(item)
    now_seen = pool.map(lambda item: show_inbox(target, item.delivery_id), runnable)
    for listed, current in zip(runnable, now_seen, strict=True):
        if current is not None and current.state is State.FAILED and current.expires_at > now:
            tally.change(listed.delivery_id)
        elif current is not None and current.state is State.FAILED:
            tally.keep(listed.delivery_id, NotChanged.EXPIRED)
        else:
            tally.keep(listed.delivery_id, _why_not(None if current is None else current.state))


def _requeue_chunk(
    target: Target, chunk: list[InboxItem], tally: Tally, pool: Executor, *, now: int
) -> None:
    """Reset each delivery of ``chunk`` (conditionally), then send their work in one batch."""
    runnable: list[tuple[InboxItem, WorkItem]] = []
    for item in chunk:
        work = item.work_item()
        if work is None:
            tally.keep(item.delivery_id, NotChanged.NO_WORK_ITEM)
        else:
            runnable.append((item, work))
    outcomes = pool.map(lambda pair: requeue.reopen(target, pair[0].delivery_id, now=now), runnable)
    reopened: list[WorkItem] = []
    for (item, work), outcome in zip(runnable, outcomes, strict=True):
        if outcome.moved:
            reopened.append(work)
        elif outcome.expired:
            tally.keep(item.delivery_id, NotChanged.EXPIRED)
        else:
            tally.keep(item.delivery_id, _why_not(outcome.refused_in))
    if not reopened:
        return
    queue = SqsWorkQueue(client=target.sqs, queue_url=target.work_queue_url)
    try:
        requeue_span = tracing.SPAN_OPERATOR_PREFIX + "requeue"
        with work_trace.resending(requeue_span, reopened, attributes={"bulk": True}) as traced:
            unsent = {u.work.delivery_id for u in queue.send_batch(traced)}
    except StorageUnavailable:
        raise OperatorError(
            f"SQS: {len(reopened)} delivery(ies) are pending but their work items could not"
            f" be sent ({tally.changed_count} requeued before them); the reconciler"
            " re-enqueues them within 30 minutes"
        ) from None
    for work in reopened:
        if work.delivery_id in unsent:
            tally.keep(work.delivery_id, NotChanged.UNSENT)
        else:
            tally.change(work.delivery_id)


def _why_not(state: State | None) -> NotChanged:
    if state is None:
        return NotChanged.MISSING
    if state is State.PENDING:
        return NotChanged.ALREADY_REQUEUED
    return NotChanged.STATE_MOVED


def redrive_all(
    target: Target,
    *,
    now: int,
    limit: int = DEFAULT_LIMIT,
    yes: bool = False,
    dry_run: bool = True,
) -> BulkResult:
    """Redrive the dead-letter queue (:func:`ops.requeue.redrive`), at most ``limit``
    letters unless ``yes``.

    The bound is checked against SQS's estimate of the queue's depth before anything
    is received; a dry run receives (at most ``limit`` letters unless ``yes``), says
    what each would come to, and leaves every letter on the queue.

    Raises:
        BulkLimitExceeded: not a dry run, not ``yes``, and the queue holds more than
            ``limit`` letters.
    """
    if limit < 1:
        raise OperatorError("the limit must be at least 1")
    depth = requeue.dead_letter_count(target)
    needs_yes = depth > limit and not yes
    if needs_yes and not dry_run:
        raise BulkLimitExceeded("redrive", depth, limit)
    report = requeue.redrive(target, now=now, max_messages=None if yes else limit, dry_run=dry_run)
    tally = Tally()
    for delivery_id, outcome in report.outcomes:
        if outcome is requeue.RedriveOutcome.MOVED and delivery_id is not None:
            tally.change(delivery_id)  # (a malformed letter has no id, and is never moved)
        else:
            tally.keep(delivery_id, outcome.value)
    return bulk_result(
        "redrive",
        tally,
        matched=len(report.outcomes),
        dry_run=dry_run,
        limit=limit,
        needs_yes=needs_yes,
        filters={},
    )


def bulk_result(
    operation: str,
    tally: Tally,
    *,
    matched: int,
    dry_run: bool,
    limit: int,
    needs_yes: bool,
    filters: dict[str, Any],
) -> BulkResult:
    return BulkResult(
        operation=operation,
        dry_run=dry_run,
        limit=limit,
        matched=matched,
        changed=tally.changed_count,
        not_changed=dict(tally.reasons),
        changed_ids=tally.changed,
        not_changed_ids=tally.reason_ids,
        needs_yes=needs_yes,
        filters=filters,
    )
