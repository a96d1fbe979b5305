"""In-memory fakes of the ports: the receiver's inbox and secrets, the processing
claims, effects, queue and metrics, package records, and the workflows' step records,
objects, token budget and model spend.

Each fake keeps the same state the DynamoDB/SQS adapter would, and answers as it
does (a conditional write that finds its item changes nothing), so tests assert on
state; ``tests/unit/test_claim.py`` and ``test_effects.py`` run the same contract
against the fakes and the real adapters (moto) to keep them honest. The clock is
:class:`local.testkit.clock.FakeClock`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from functions.core import accept
from functions.core.claim import ITEM_EXPIRED, Claim, ClaimAttempt, ClaimLost, ClaimStatus
from functions.core.delivery import Delivery
from functions.core.errors import SigningSecretsUnavailable, StorageUnavailable
from functions.core.models import InboxItem, QuarantineRecord, State, UnsentWork, WorkItem
from functions.core.ports.approvals import ApprovalDecision, ApprovalRecord, Decision
from functions.core.ports.budget import BudgetDay
from functions.core.ports.effects import EffectRecord, EffectStatus
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.recovery import IntentCursor, IntentPage, OpenCursor, OpenPage
from functions.core.ports.steps import StepRecord, StepStatus, StoredResult
from functions.core.signature import SigningSecret
from functions.core.spend import ModelSpend

# --- The receiver's ports -------------------------------------------------------------


@dataclass
class FakeInbox:
    """:class:`functions.core.ports.inbox.InboxWriter` in memory, with countable calls.

    As the DynamoDB adapter: the inbox item and its outbox record are written together
    or not at all, and a quarantine record is kept once per conflicting digest.
    ``fail`` fails every write, ``fail_quarantine`` only the quarantine write.
    """

    inbox: dict[str, InboxItem] = field(default_factory=dict)
    outbox: dict[str, WorkItem] = field(default_factory=dict)
    quarantined: dict[tuple[str, str], QuarantineRecord] = field(default_factory=dict)
    calls: int = 0
    fail: bool = False
    fail_quarantine: bool = False

    def record(
        self,
        delivery: Delivery,
        work: WorkItem | None,
        *,
        body_sha256: str,
        received_at: int,
        expires_at: int,
    ) -> InboxItem | None:
        self.calls += 1
        if self.fail:
            raise StorageUnavailable()
        inbox = accept.inbox_item(
            delivery, work, body_sha256=body_sha256, received_at=received_at, expires_at=expires_at
        )
        if inbox.delivery_id in self.inbox:
            return self.inbox[inbox.delivery_id]
        self.inbox[inbox.delivery_id] = inbox
        if work is not None:
            self.outbox[work.delivery_id] = work
        return None

    def quarantine(self, record: QuarantineRecord) -> None:
        self.calls += 1
        if self.fail or self.fail_quarantine:
            raise StorageUnavailable()
        self.quarantined.setdefault((record.delivery_id, record.received_sha256), record)

    def stored(self, delivery_id: str) -> tuple[InboxItem, WorkItem | None] | None:
        """The inbox item and its work item, as one transaction wrote them."""
        inbox = self.inbox.get(delivery_id)
        return None if inbox is None else (inbox, self.outbox.get(delivery_id))

    def empty(self) -> bool:
        return not (self.inbox or self.outbox or self.quarantined)

    def clear(self) -> None:
        self.inbox.clear()
        self.outbox.clear()
        self.quarantined.clear()


@dataclass
class FakeSecrets:
    """:class:`functions.core.ports.secrets.SigningSecretSource` in memory; ``secrets``
    may change."""

    secrets: Sequence[str]
    calls: int = 0
    fail: bool = False

    def current(self) -> Sequence[SigningSecret]:
        self.calls += 1
        if self.fail:
            raise SigningSecretsUnavailable()
        return [SigningSecret.parse(s) for s in self.secrets]


# --- The processing ports -------------------------------------------------------------


_OPEN = (State.PENDING, State.PROCESSING)


@dataclass
class FakeClaims:
    """The inbox's processing state; ``owners`` holds the lease owner tokens."""

    items: dict[str, InboxItem] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    # Which failure a failed item is in: the owner token of the claim that failed it.
    failed_by: dict[str, str] = field(default_factory=dict)
    # Open items the state index does not list yet (as the receiver writes them): the
    # index's lists leave them out until the reconciler lists them (FakeReceivedLog).
    unlisted: set[str] = field(default_factory=set)
    # Where the reconciler's open pass resumes, as the table keeps it.
    cursor: OpenCursor | None = None

    def add(self, item: InboxItem, *, listed: bool = True) -> None:
        self.items[item.delivery_id] = item
        if not listed:
            self.unlisted.add(item.delivery_id)

    def claim(self, delivery_id: str, *, owner: str, now: int, lease_seconds: int) -> ClaimAttempt:
        item = self.items.get(delivery_id)
        if item is None:
            return ClaimAttempt(ClaimStatus.MISSING)
        lease = now + lease_seconds
        if not _free(item, now=now):
            if item.state is State.COMPLETED:
                return ClaimAttempt(ClaimStatus.COMPLETED)
            if item.state is State.PROCESSING:
                return ClaimAttempt(ClaimStatus.LEASED, lease_until=item.lease_until)
            return ClaimAttempt(ClaimStatus.CLOSED)
        if item.expires_at <= lease:
            return ClaimAttempt(ClaimStatus.EXPIRED)
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
            claim=Claim(
                delivery_id,
                owner,
                lease,
                item.attempts + 1,
                item.expires_at,
                transient_failures=item.transient_failures,
                retry_window_start=item.retry_window_start,
                work=item.work_item(),
            ),
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

    def complete(
        self, claim: Claim, *, now: int, effects_done: frozenset[str] = frozenset()
    ) -> None:
        self._finish(claim, now, State.COMPLETED, completed_at=now, effects_done=effects_done)

    def release(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(claim, now, State.PENDING, last_error=error_code)

    def release_transient(self, claim: Claim, *, now: int, error_code: str) -> None:
        item = self.items.get(claim.delivery_id)
        failures = (item.transient_failures if item else 0) + 1
        self._finish(claim, now, State.PENDING, last_error=error_code, transient_failures=failures)

    def give_back(self, claim: Claim, *, now: int) -> None:
        attempts = self.items[claim.delivery_id].attempts - 1
        self._finish(claim, now, State.PENDING, attempts=attempts)

    def fail(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(claim, now, State.FAILED, last_error=error_code)
        self.failed_by[claim.delivery_id] = claim.owner

    def defer(self, claim: Claim, *, now: int, error_code: str) -> None:
        attempts = self.items[claim.delivery_id].attempts - 1
        self._finish(
            claim, now, State.PENDING, last_error=error_code, attempts=attempts, reset_at=now
        )

    def park(self, claim: Claim, *, now: int, approval: str, deadline: int) -> None:
        attempts = self.items[claim.delivery_id].attempts - 1
        self._finish(
            claim,
            now,
            State.AWAITING_APPROVAL,
            attempts=attempts,
            approval=approval,
            approval_deadline=deadline,
        )

    def close_expired(self, delivery_id: str, *, now: int, lease_seconds: int) -> bool:
        item = self.items.get(delivery_id)
        if item is None or not _free(item, now=now) or item.expires_at > now + lease_seconds:
            return False
        self.owners.pop(delivery_id, None)
        self.unlisted.discard(delivery_id)  # (listed under failed)
        self.items[delivery_id] = dataclasses.replace(
            item,
            state=State.FAILED,
            lease_until=None,
            state_changed_at=now,
            last_error=ITEM_EXPIRED,
        )
        return True

    def reopen(self, delivery_id: str, *, now: int, failure: str | None = None) -> bool:
        item = self.items.get(delivery_id)
        if item is None or item.state is not State.FAILED or item.expires_at <= now:
            return False
        if failure is not None and self.failed_by.get(delivery_id) != failure:
            return False
        self.failed_by.pop(delivery_id, None)
        self.unlisted.discard(delivery_id)  # (reset_failed lists it open)
        self.items[delivery_id] = dataclasses.replace(
            item,
            state=State.PENDING,
            attempts=0,
            transient_failures=0,
            reset_at=now,
            state_changed_at=now,
        )
        return True

    # RecoveryStore
    def get(self, delivery_id: str) -> InboxItem | None:
        return self.items.get(delivery_id)

    def stale_pending(self, *, changed_before: int, page_size: int) -> Iterable[InboxItem]:
        return self._where(
            lambda i: i.state is State.PENDING and i.state_changed_at < changed_before
        )

    def expired_leases(self, *, now: int, page_size: int) -> Iterable[InboxItem]:
        return self._where(lambda i: i.state is State.PROCESSING and (i.lease_until or 0) <= now)

    def open_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
        """The listed open items by id (one shard), ``page_size`` at a time, lazily."""
        return _inbox_pages(
            lambda: {
                d: i
                for d, i in self.items.items()
                if d not in self.unlisted and i.state in (State.PENDING, State.PROCESSING)
            },
            start=start,
            page_size=page_size,
        )

    def open_cursor(self) -> OpenCursor | None:
        return self.cursor

    def save_open_cursor(self, cursor: OpenCursor | None) -> None:
        self.cursor = cursor

    def _where(self, keep: Callable[[InboxItem], bool]) -> list[InboxItem]:
        return [i for i in self.items.values() if i.delivery_id not in self.unlisted and keep(i)]

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


def _free(item: InboxItem, *, now: int) -> bool:
    """Open and held by no live worker."""
    return item.state is State.PENDING or (
        item.state is State.PROCESSING and (item.lease_until or 0) <= now
    )


@dataclass
class FakeReceivedLog:
    """The received log over :class:`FakeClaims`: every item's receipt, by received_at.

    ``fail_advance``: the next advances raise (a crash after the listing, before the
    watermark moved). ``fail_window``: reading the window of that (1-based) number
    raises (storage weather in the middle of a run)."""

    claims: FakeClaims
    mark: int | None = None
    windows: list[tuple[int, int]] = field(default_factory=list)
    fail_advance: int = 0
    fail_window: int | None = None

    def watermark(self) -> int | None:
        return self.mark

    def oldest(self, *, since: int | None = None) -> int | None:
        floor = since if since is not None else -1
        received = (i.received_at for i in self.claims.items.values())
        return min((at for at in received if at >= floor), default=None)

    def unlisted_open(self, *, since: int, before: int, page_size: int) -> list[InboxItem]:
        self.windows.append((since, before))
        if len(self.windows) == self.fail_window:
            raise StorageUnavailable("throttled")
        return sorted(
            (
                i
                for i in self.claims.items.values()
                if since <= i.received_at < before
                and i.state in (State.PENDING, State.PROCESSING)
                and i.delivery_id in self.claims.unlisted
            ),
            key=lambda i: (i.received_at, i.delivery_id),
        )

    def unlisted_open_pages(
        self, *, since: int, before: int, page_size: int
    ) -> Iterator[list[InboxItem]]:
        """A page per item (the adapter's pages hold receipts, most of them settled)."""
        for item in self.unlisted_open(since=since, before=before, page_size=page_size):
            yield [item]

    def list_open(self, item: InboxItem) -> bool:
        current = self.claims.items.get(item.delivery_id)
        if (
            current is None
            or current.state not in (State.PENDING, State.PROCESSING)
            or item.delivery_id not in self.claims.unlisted
        ):
            return False
        self.claims.unlisted.discard(item.delivery_id)
        return True

    def advance(self, watermark: int) -> None:
        if self.fail_advance:
            self.fail_advance -= 1
            raise StorageUnavailable()
        if self.mark is None or watermark > self.mark:
            self.mark = watermark


_K = TypeVar("_K", str, tuple[str, str])
_V = TypeVar("_V")


def _key_pages(
    listed: Callable[[], dict[_K, _V]], *, after: _K | None, page_size: int
) -> Iterator[tuple[list[_V], _K | None]]:
    """What ``listed`` holds after the key ``after``, in key order (one index shard),
    ``page_size`` at a time, each page read when asked for, as the store is then; with
    each page the key of its last entry while more follow (None: the end)."""
    while True:
        current = listed()
        keys = sorted(k for k in current if after is None or k > after)
        page = keys[:page_size]
        more = len(keys) > page_size
        yield [current[k] for k in page], page[-1] if more else None
        if not more:
            return
        after = page[-1]


def _inbox_pages(
    listed: Callable[[], dict[str, InboxItem]], *, start: OpenCursor | None, page_size: int
) -> Iterator[OpenPage]:
    after = None if start is None or start.after is None else start.after[1]
    for items, last in _key_pages(listed, after=after, page_size=page_size):
        yield OpenPage(items=items, resume=None if last is None else OpenCursor(0, (0, last)))


@dataclass
class FakeCursorWrites:
    """How the table answers a cursor save: ``lose_answers`` next saves are applied and
    then raise ``StorageUnavailable`` (the answer lost); ``saved`` counts those applied."""

    lose_answers: int = 0
    saved: int = 0

    def save(self, apply: Callable[[], None]) -> None:
        apply()
        self.saved += 1
        if self.lose_answers:
            self.lose_answers -= 1
            raise StorageUnavailable()


@dataclass
class FakeEffects:
    records: dict[tuple[str, str], EffectRecord] = field(default_factory=dict)
    # Where the reconciler's pass over the intents resumes, as the table keeps it.
    cursor: IntentCursor | None = None
    cursor_writes: FakeCursorWrites = field(default_factory=FakeCursorWrites)

    def get(self, delivery_id: str, name: str) -> EffectRecord | None:
        return self.records.get((delivery_id, name))

    def record_intent(
        self,
        delivery_id: str,
        name: str,
        *,
        key: str,
        now: int,
        expires_at: int,
        attempt: str = "",
    ) -> bool:
        current = self.records.get((delivery_id, name))
        if current is not None and current.status is not EffectStatus.NOT_APPLIED:
            return False
        self.records[(delivery_id, name)] = EffectRecord(
            delivery_id, name, EffectStatus.INTENT, key, now, attempt=attempt
        )
        return True

    def record_done(self, delivery_id: str, name: str, *, now: int) -> None:
        record = self.records[(delivery_id, name)]
        self.records[(delivery_id, name)] = dataclasses.replace(
            record, status=EffectStatus.DONE, done_at=now, flagged_at=None
        )

    def resolve_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        return self._resolve(delivery_id, name, EffectStatus.DONE, done_at=now)

    def resolve_not_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        return self._resolve(delivery_id, name, EffectStatus.NOT_APPLIED)

    def _resolve(self, delivery_id: str, name: str, status: EffectStatus, **changes: Any) -> bool:
        current = self.records.get((delivery_id, name))
        if current is None or current.status is not EffectStatus.INTENT:
            return False
        self.records[(delivery_id, name)] = dataclasses.replace(
            current, status=status, flagged_at=None, **changes
        )
        return True

    def uncertain(self, *, intended_before: int, page_size: int) -> list[EffectRecord]:
        pages = self.uncertain_pages(
            start=None, intended_before=intended_before, page_size=page_size
        )
        return [record for page in pages for record in page.items]

    def uncertain_pages(
        self, *, start: IntentCursor | None, intended_before: int, page_size: int
    ) -> Iterator[IntentPage]:
        """Unflagged intents by (delivery id, name) (one shard), a page at a time, lazily."""

        def listed() -> dict[tuple[str, str], EffectRecord]:
            return {
                key: r
                for key, r in self.records.items()
                if r.status is EffectStatus.INTENT
                and r.intent_at < intended_before
                and r.flagged_at is None
            }

        after = None if start is None or start.after is None else start.after[1:]
        for records, last in _key_pages(listed, after=after, page_size=page_size):
            resume = None if last is None else IntentCursor(0, (0, *last))
            yield IntentPage(items=records, resume=resume)

    def intent_cursor(self) -> IntentCursor | None:
        return self.cursor

    def save_intent_cursor(self, cursor: IntentCursor | None) -> None:
        self.cursor_writes.save(lambda: setattr(self, "cursor", cursor))

    def flag(self, record: EffectRecord, *, now: int) -> bool:
        current = self.records.get((record.delivery_id, record.name))
        if current is None or current.status is not EffectStatus.INTENT or current.flagged_at:
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
    dead: list[tuple[str, str]] = field(default_factory=list)  # (body, reason)
    dead_failures: list[str | None] = field(default_factory=list)  # each letter's failure
    refuse: set[str] = field(default_factory=set)
    batches: list[int] = field(default_factory=list)  # the size of each batch sent

    def send(self, work: WorkItem, *, delay_seconds: int = 0) -> None:
        self.sent.append((work, delay_seconds))

    def send_batch(self, works: Sequence[WorkItem]) -> list[UnsentWork]:
        self.batches.append(len(works))
        self.sent += [(w, 0) for w in works if w.delivery_id not in self.refuse]
        return [
            UnsentWork(w, reason="InternalError") for w in works if w.delivery_id in self.refuse
        ]

    def change_visibility(self, receipt_handle: str, *, seconds: int) -> None:
        self.visibility.append((receipt_handle, seconds))

    def dead_letter(self, body: str, *, reason: str, failure: str | None = None) -> None:
        self.dead.append((body, reason))
        self.dead_failures.append(failure)


@dataclass
class FakeMetrics:
    counts: Counter[str] = field(default_factory=Counter)
    durations: dict[str, list[float]] = field(default_factory=dict)

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value

    def seconds(self, name: str, value: float) -> None:
        self.durations.setdefault(name, []).append(value)


@dataclass
class FakeSteps:
    records: dict[tuple[str, str], StepRecord] = field(default_factory=dict)

    def get(self, delivery_id: str, name: str) -> StepRecord | None:
        return self.records.get((delivery_id, name))

    def start(self, delivery_id: str, name: str, *, now: int, expires_at: int) -> StepRecord | None:
        before = self.records.get((delivery_id, name))
        if before is not None and before.status is StepStatus.RECORDED:
            return before
        runs = 0 if before is None else before.runs
        self.records[(delivery_id, name)] = StepRecord(
            delivery_id, name, StepStatus.STARTED, runs + 1, now
        )
        return before

    def record_failed(self, delivery_id: str, name: str, *, run: int, now: int) -> bool:
        current = self.records.get((delivery_id, name))
        if current is None or current.status is not StepStatus.STARTED or current.runs != run:
            return False
        self.records[(delivery_id, name)] = dataclasses.replace(current, status=StepStatus.FAILED)
        return True

    def record_result(
        self, delivery_id: str, name: str, *, result: StoredResult, now: int
    ) -> StepRecord | None:
        current = self.records[(delivery_id, name)]
        if current.status is StepStatus.RECORDED:
            return current
        self.records[(delivery_id, name)] = dataclasses.replace(
            current, status=StepStatus.RECORDED, recorded_at=now, result=result
        )
        return None


@dataclass
class FakePackageRecords:
    """Package records; with ``claims``, only the claim's holder records (as the table's
    transaction checks). ``lose_answers``: that many next records are kept, then raise
    as a write whose answer was lost."""

    claims: FakeClaims | None = None
    records: dict[str, PackageRecord] = field(default_factory=dict)
    lose_answers: int = 0

    def get(self, delivery_id: str) -> PackageRecord | None:
        return self.records.get(delivery_id)

    def record(
        self, claim: Claim, record: PackageRecord, *, expires_at: int
    ) -> PackageRecord | None:
        if self.claims is not None:
            item = self.claims.items.get(claim.delivery_id)
            holding = self.claims.owners.get(claim.delivery_id) == claim.owner
            if item is None or item.state is not State.PROCESSING or not holding:
                raise ClaimLost()
        first = self.records.get(record.delivery_id)
        if first is not None:
            return first
        self.records[record.delivery_id] = record
        if self.lose_answers:
            self.lose_answers -= 1
            raise StorageUnavailable()
        return None

    def record_refetch(self, delivery_id: str, *, digest: str, now: int) -> None:
        kept = self.records.get(delivery_id)
        if kept is not None:
            self.records[delivery_id] = dataclasses.replace(
                kept, refetched_digest=digest, refetched_at=now
            )


@dataclass
class FakeObjects:
    objects: dict[str, bytes] = field(default_factory=dict)

    def put(self, key: str, body: bytes) -> None:
        self.objects[key] = body

    def get(self, key: str) -> bytes | None:
        return self.objects.get(key)


@dataclass
class FakeBudget:
    default_limit: int
    configured: int | None = None
    days: dict[str, BudgetDay] = field(default_factory=dict)
    opened: dict[str, set[str]] = field(default_factory=dict)  # the open ids of each day

    def reserve(self, day: str, tokens: int, *, reservation_id: str) -> bool:
        current = self.get(day)
        opened = self.opened.setdefault(day, set())
        if reservation_id in opened:
            return True
        if current.reserved + tokens > current.limit:
            return False
        opened.add(reservation_id)
        self.days[day] = dataclasses.replace(
            current, reserved=current.reserved + tokens, open_reservations=len(opened)
        )
        return True

    def settle(self, day: str, *, reservation_id: str, reserved: int, used: int) -> None:
        current = self.days.get(day)
        opened = self.opened.get(day, set())
        if current is not None and reservation_id in opened:
            opened.discard(reservation_id)
            self.days[day] = dataclasses.replace(
                current,
                reserved=current.reserved - reserved + used,
                used=current.used + used,
                open_reservations=len(opened),
            )

    def keep(self, day: str, *, reservation_id: str) -> None:
        opened = self.opened.get(day, set())
        opened.discard(reservation_id)
        if day in self.days:
            self.days[day] = dataclasses.replace(self.days[day], open_reservations=len(opened))

    def set_limit(self, day: str, tokens: int) -> None:
        self.configured = tokens
        self.days[day] = dataclasses.replace(self.get(day), limit=tokens)

    def get(self, day: str) -> BudgetDay:
        limit = self.default_limit if self.configured is None else self.configured
        return self.days.get(day) or BudgetDay(day=day, limit=limit, reserved=0, used=0)


# --- The approval gate -----------------------------------------------------------------


@dataclass
class FakeApprovals:
    """The approval records, deciding over :class:`FakeClaims` as the transaction does.

    ``lose_answers``: that many next decisions commit and then raise
    ``StorageUnavailable`` (the answer lost); ``fail_decisions``: that many raise it
    without committing. ``lose_requests`` does the same to the record's first put.
    """

    claims: FakeClaims
    records: dict[tuple[str, str], ApprovalRecord] = field(default_factory=dict)
    lose_answers: int = 0
    fail_decisions: int = 0
    lose_requests: int = 0
    # Where the reconciler's pass over the parked items resumes, as the table keeps it.
    cursor: OpenCursor | None = None
    cursor_writes: FakeCursorWrites = field(default_factory=FakeCursorWrites)

    def get(self, delivery_id: str, name: str) -> ApprovalRecord | None:
        return self.records.get((delivery_id, name))

    def request(self, record: ApprovalRecord, *, expires_at: int) -> bool:
        if (record.delivery_id, record.name) in self.records:
            return False
        self.records[(record.delivery_id, record.name)] = record
        if self.lose_requests:
            self.lose_requests -= 1
            raise StorageUnavailable()
        return True

    def decide(self, delivery_id: str, name: str, decision: Decision) -> bool:
        if self.fail_decisions:
            self.fail_decisions -= 1
            raise StorageUnavailable()
        record = self.records.get((delivery_id, name))
        item = self.claims.items.get(delivery_id)
        waiting = (
            item is not None and item.state is State.AWAITING_APPROVAL and item.approval == name
        )
        expired = item is not None and (item.approval_deadline or 0) <= decision.decided_at
        if record is None or record.decided is not None or not waiting or item is None:
            return False
        if decision.decision is ApprovalDecision.EXPIRED and not expired:
            return False
        # A person's decision: before the deadline, about the proposal the record holds.
        if decision.decision is not ApprovalDecision.EXPIRED and (
            record.deadline <= decision.decided_at
            or decision.proposal not in (None, record.proposal_digest())
        ):
            return False
        self.records[(delivery_id, name)] = dataclasses.replace(record, decided=decision)
        approved = decision.decision is ApprovalDecision.APPROVED
        self.claims.items[delivery_id] = dataclasses.replace(
            item,
            state=State.PENDING if approved else State.FAILED,
            last_error=item.last_error if approved else decision.decision.error_code,
            state_changed_at=decision.decided_at,
            approval=None,
            approval_deadline=None,
        )
        if self.lose_answers:
            self.lose_answers -= 1
            raise StorageUnavailable()
        return True

    def waiting(self, *, page_size: int) -> Iterable[InboxItem]:
        return list(self._parked().values())

    def waiting_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
        return _inbox_pages(self._parked, start=start, page_size=page_size)

    def waiting_cursor(self) -> OpenCursor | None:
        return self.cursor

    def save_waiting_cursor(self, cursor: OpenCursor | None) -> None:
        self.cursor_writes.save(lambda: setattr(self, "cursor", cursor))

    def waiting_since(self) -> int | None:
        return min((i.state_changed_at for i in self._parked().values()), default=None)

    def _parked(self) -> dict[str, InboxItem]:
        return {d: i for d, i in self.claims.items.items() if i.state is State.AWAITING_APPROVAL}


@dataclass
class FakeSpend:
    """The spend records as the table keeps them: sets of call ids and token sums.

    ``errors`` are raised, in order, by the next writes instead of writing;
    ``lost_answers`` next writes commit and then raise ``StorageUnavailable`` (their
    answer was lost).
    """

    calls: dict[str, set[str]] = field(default_factory=dict)
    refused: dict[str, set[str]] = field(default_factory=dict)
    answers: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    # The guardrail's calls, and their answers' (text units, tokens), apart.
    guardrail_calls: dict[str, set[str]] = field(default_factory=dict)
    guardrail_answers: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    errors: list[Exception] = field(default_factory=list)
    lost_answers: int = 0

    def _write(self, apply: Callable[[], object]) -> None:
        if self.errors:
            raise self.errors.pop(0)
        apply()
        if self.lost_answers:
            self.lost_answers -= 1
            raise StorageUnavailable()

    def sent(self, delivery_id: str, call_id: str, *, expires_at: int) -> None:
        self._write(lambda: self.calls.setdefault(delivery_id, set()).add(call_id))

    def not_run(self, delivery_id: str, call_id: str) -> None:
        self._write(lambda: self.refused.setdefault(delivery_id, set()).add(call_id))

    def answered(
        self, delivery_id: str, call_id: str, *, input_tokens: int, output_tokens: int
    ) -> None:
        answers = self.answers.setdefault(delivery_id, {})
        self._write(lambda: answers.setdefault(call_id, (input_tokens, output_tokens)))

    def guardrail_sent(self, delivery_id: str, call_id: str, *, expires_at: int) -> None:
        self._write(lambda: self.guardrail_calls.setdefault(delivery_id, set()).add(call_id))

    def guardrail_answered(
        self, delivery_id: str, call_id: str, *, text_units: int, tokens: int
    ) -> None:
        answers = self.guardrail_answers.setdefault(delivery_id, {})
        self._write(lambda: answers.setdefault(call_id, (text_units, tokens)))

    def get(self, delivery_id: str) -> ModelSpend | None:
        if delivery_id not in self.calls and delivery_id not in self.guardrail_calls:
            return None
        answers = self.answers.get(delivery_id, {})
        screened = self.guardrail_answers.get(delivery_id, {})
        refused = self.refused.get(delivery_id, set())
        return ModelSpend(
            model_calls=len(self.calls.get(delivery_id, set()) - refused),
            answered=len(answers),
            input_tokens=sum(tokens for tokens, _ in answers.values()),
            output_tokens=sum(tokens for _, tokens in answers.values()),
            guardrail_calls=len(self.guardrail_calls.get(delivery_id, set()) - refused),
            guardrail_answered=len(screened),
            guardrail_text_units=sum(units for units, _ in screened.values()),
            guardrail_tokens=sum(tokens for _, tokens in screened.values()),
        )
