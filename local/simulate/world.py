"""The simulated world: a virtual clock, DynamoDB and SQS behind the core's ports.

Everything the core reaches through a port lives here, in memory, with the semantics
the production adapters give it (the conditions of :mod:`functions.core.adapters`'
writes, mirrored as :mod:`tests.fakes` mirrors them), and every call passes one
fault boundary (:meth:`World.call`): it may fail before it writes, commit and lose its
answer, commit and be sent again by the SDK (the second answer is the caller's), or
kill the process before or after it commits. Time is virtual: each call takes a few
milliseconds of it, a slow far side takes minutes, and an invocation that runs past its
timeout dies at its next call. TTL deletes a row at ``expires_at`` plus a lag drawn
per row (late, and in any order).

The world also keeps the truth the invariants need and the core cannot see: which far
side acted how often, how many model runs there were, which tokens were really spent;
and the mechanisms' history (:mod:`local.simulate.history`): each committed state write
with its writer, each message sent to the queue with its sender's role.
"""

from __future__ import annotations

import contextvars
import dataclasses
import heapq
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from functions.core import table_layout
from functions.core.accept import inbox_item
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters.dynamodb_budget import DAY_RETENTION_SECONDS
from functions.core.budget import DAY_SECONDS
from functions.core.claim import ITEM_EXPIRED, Claim, ClaimAttempt, ClaimLost, ClaimStatus
from functions.core.delivery import Delivery
from functions.core.errors import StorageUnavailable, TransientError
from functions.core.models import InboxItem, QuarantineRecord, State, UnsentWork, WorkItem
from functions.core.ports.budget import BudgetDay
from functions.core.ports.effects import EffectRecord, EffectStatus
from functions.core.ports.recovery import IntentCursor, IntentPage, OpenCursor, OpenPage
from functions.core.ports.steps import StepRecord, StepStatus, StoredResult
from local.simulate import faults
from local.simulate.faults import Fault, Killed, Kind
from local.simulate.history import History
from local.simulate.schedule import PORT_READ, PORT_WRITE, QUEUE_SEND, Rates, Schedule

T = TypeVar("T")

# 2026-01-01T00:00:00Z; each seed starts at a time of that day of its own.
EPOCH: Final = 1_767_225_600
CALL_SECONDS: Final = 0.01  # what one port call takes
TTL_LAG_SECONDS: Final = 2 * DAY_SECONDS  # TTL deletes within this long after expiry
WORK_RETENTION_SECONDS: Final = 4 * DAY_SECONDS  # infra/queues.py
DEAD_LETTER_RETENTION_SECONDS: Final = 14 * DAY_SECONDS
OPEN: Final = (State.PENDING, State.PROCESSING)
ATTEMPTS_EXHAUSTED: Final = "attempts_exhausted"  # the processor's code for it


def _expiry_checked(transition: transitions.Transition) -> bool:
    """Whether the real transition refuses an item past its ``expires_at``: the world
    applies the same rule, so a condition added there is simulated here."""
    return any(table_layout.TTL_ATTRIBUTE in part for part, _reason in transition.condition)


@dataclass(slots=True)
class Invocation:
    """One run of one process: its clock's skew, its end, whether it died."""

    role: str
    skew: int = 0
    ends_at: float = math.inf
    faulty: bool = True  # operators' calls draw no faults
    dead: bool = False
    # Marked dead letters in this batch: delivery id -> the failure they were sent for.
    marked: dict[str, int] = field(default_factory=dict)
    owners: list[str] = field(default_factory=list)  # the claim owners it ran as
    # The delivery whose step killed it (None: no claimed delivery's): the one running
    # at a kill, the one that took it past its timeout ("" for none) at a timeout.
    killer: str | None = None
    overrun: str | None = None


@dataclass(slots=True)
class Notes:
    """What one message's attempt has done so far, as the world needs to know it.

    A batch runs its messages concurrently (interleaved at their awaits), so these
    follow each message's task (a context variable), not the invocation.
    """

    owner: str | None = None  # the claim owner the attempt runs as
    delivery: str | None = None  # the delivery it claimed
    reservation_day: str | None = None  # the day of its last budget reservation


# The running message's notes; set afresh with each new claim owner, in that message's
# task (``asyncio.to_thread`` copies the context, so the same notes are seen there).
_NOTES: contextvars.ContextVar[Notes] = contextvars.ContextVar("simulated_attempt")


@dataclass(slots=True)
class Message:
    """One SQS message; ``receipt`` is its latest receipt handle."""

    message_id: str
    body: str
    visible_at: float
    sent_at: float
    receives: int = 0
    mark: str | None = None  # the worker's dead-letter reason (kept by an SQS redrive)
    generation: int = 0  # the failure the mark was written for
    receipt: str = ""
    # What else the worker's dead-letter call attached (a newer port may add some).
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class FarSide:
    """What one downstream system really did, per idempotency key."""

    name: str
    dedup: bool = True  # a request with a key it has acted on is not acted on again
    repeatable: bool = False  # acting twice is harmless (a put of the same bytes)
    outage: tuple[float, float] | None = None
    outage_seconds: float = 0.0  # how long a request hangs in the outage (a brownout)
    slow: tuple[float, float, float] | None = None  # (start, end, seconds per request)
    applied: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    definite_no: Counter[str] = field(default_factory=Counter)

    def act(self, key: str) -> None:
        self.requests[key] += 1
        if not (self.dedup and self.applied[key]):
            self.applied[key] += 1

    def refuse(self, key: str, *, definite: bool) -> None:
        self.requests[key] += 1
        if definite:
            self.definite_no[key] += 1

    def down(self, now: float) -> bool:
        return self.outage is not None and self.outage[0] <= now < self.outage[1]


@dataclass(slots=True)
class Truth:
    """What happened, as the core cannot see it (read by the invariants)."""

    accepted: set[str] = field(default_factory=set)  # an inbox item was written
    terminal: set[str] = field(default_factory=set)  # reached completed or failed once
    vanished: dict[str, str] = field(default_factory=dict)  # deleted by TTL while open
    model_runs: Counter[str] = field(default_factory=Counter)
    step_starts: Counter[str] = field(default_factory=Counter)
    consumed: Counter[str] = field(default_factory=Counter)  # tokens spent, by budget day
    refused_reservation: dict[str, int] = field(default_factory=dict)  # largest, by delivery
    failures: Counter[str] = field(default_factory=Counter)  # times each item failed
    unmarked_dead_letters: list[str] = field(default_factory=list)
    mark_mismatches: list[str] = field(default_factory=list)
    own_intent_doubts: list[str] = field(default_factory=list)
    sdk_retried: Counter[str] = field(default_factory=Counter)  # by site
    # The far side's (requests, definite "no"s) for an effect when its intent was written.
    at_intent: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    # Who heard a far side's last definite "not done", by (delivery, effect); and the
    # effects whose "not applied" could not be recorded (the write failed).
    heard_no: dict[tuple[str, str], str | None] = field(default_factory=dict)  # the owner
    finished: set[str] = field(default_factory=set)  # owners whose attempt ended recorded
    unrecorded_no: set[tuple[str, str]] = field(default_factory=set)
    # Far-side applications beyond the first: (effect, key, after the item's expiry).
    repeats: list[tuple[str, str, bool]] = field(default_factory=list)
    # Attempts, since the item's last reset, that died holding their claim while a
    # batch-mate's step ran (the invocation died of something not theirs).
    innocent_deaths: Counter[str] = field(default_factory=Counter)
    # Claim owners whose own claim write failed (a lost answer, an error): their claim
    # may stay held after their message ended, by their own fault.
    orphans: set[str] = field(default_factory=set)
    # Deliveries that ran out of attempts only because of such deaths.
    innocent_failures: list[str] = field(default_factory=list)


class World:
    """The in-memory world of one seed."""

    def __init__(self, seed: int, schedule: Schedule) -> None:
        self.rng = random.Random(f"world:{seed}")  # noqa: S311 (a reproducible simulation)
        self.schedule = schedule
        self._t: float = float(EPOCH + self.rng.randrange(DAY_SECONDS))
        self.started_at = self._t
        self.inv = Invocation("operator", faulty=False)
        _NOTES.set(Notes())
        # The processor's attempts, and how many a delivery may lose to batch-mates
        # before it runs alone (the truth about deliveries given up for attempts).
        self.max_attempts = 0
        self.lost_attempts_allowed = 0
        self.counts: Counter[str] = Counter()
        self.truth = Truth()
        self.history = History()  # the mechanisms' committed writes, in order
        # DynamoDB
        self.inbox: dict[str, InboxItem] = {}
        self.owners: dict[str, str] = {}
        self.failed_by: dict[str, str] = {}  # delivery id -> the claim owner that failed it
        self.unlisted: set[str] = set()
        self.outbox: dict[str, tuple[WorkItem, int]] = {}  # delivery id -> (work, received)
        self.effects: dict[tuple[str, str], EffectRecord] = {}
        self.intent_writers: dict[tuple[str, str], str | None] = {}
        self.steps: dict[tuple[str, str], StepRecord] = {}
        self.budget_days: dict[str, BudgetDay] = {}
        self.budget_open: dict[str, set[str]] = {}  # day -> its open reservations' ids
        self._reservation_seq = 0
        self.budget_limit = 0
        self.watermark: int | None = None
        self.open_cursor: OpenCursor | None = None  # where the reconciler's open pass resumes
        self.intent_cursor: IntentCursor | None = None  # where its effects pass resumes
        self._ttl: list[tuple[float, int, str, Any]] = []
        self._ttl_at: dict[tuple[str, Any], float] = {}
        self._ttl_seq = 0
        # The table's stream: outbox inserts the relay has not taken yet.
        self.stream: list[dict[str, Any]] = []
        # SQS
        self.work: dict[str, Message] = {}
        self.dead: dict[str, Message] = {}
        self._message_seq = 0
        self.max_receives = 0
        self.visibility_seconds = 0
        # Downstream systems, by effect (and "model", "mcp").
        self.far: dict[str, FarSide] = {}
        self._owner_seq = 0
        # Called after a worker's claim and its reads of effect and step records (the
        # run stages two attempts of one delivery at once there: Kind.OVERLAP).
        self.at_attempt_point: Callable[[str], None] | None = None

    # --- time, processes and faults --------------------------------------------

    @property
    def t(self) -> float:
        """The true time (virtual seconds)."""
        return self._t

    @t.setter
    def t(self, value: float) -> None:
        """Time passes; the step that takes the current process past its timeout is
        noted (its next call dies, whichever message makes it)."""
        inv = self.inv
        if self._t < inv.ends_at <= value and inv.overrun is None:
            inv.overrun = self.notes.delivery or ""
        self._t = value

    def now(self) -> int:
        """The current process's clock (skewed), in whole seconds."""
        return int(self.t + self.inv.skew)

    def monotonic(self) -> float:
        return self.t

    @property
    def notes(self) -> Notes:
        """The running attempt's notes (outside a worker's message: the process's)."""
        return _NOTES.get()

    def begin(self, role: str, *, skew: int, seconds: float, faulty: bool = True) -> Invocation:
        self.inv = Invocation(role, skew=skew, ends_at=self.t + seconds, faulty=faulty)
        _NOTES.set(Notes())
        return self.inv

    def alive(self) -> None:
        """Raise :class:`Killed` when the current process is dead or out of time."""
        inv = self.inv
        if inv.dead:
            raise Killed("dead")
        if self.t >= inv.ends_at:
            # The step that took the time kills, not the one that finds it gone.
            self._die(self.notes.delivery if inv.overrun is None else inv.overrun or None)
            self.counts[faults.TIMEOUTS] += 1
            raise Killed("timeout")

    def kill(self) -> None:
        self._die(self.notes.delivery)
        raise Killed("kill")

    def _die(self, killer: str | None) -> None:
        self.inv.dead = True
        self.inv.killer = killer

    def died_holding(self) -> list[str]:
        """After the current worker invocation died: the deliveries whose claims it
        still held when it did, each noted as an innocent death unless its own step
        was the one running."""
        inv = self.inv
        owners = set(inv.owners)
        held = sorted(
            delivery_id
            for delivery_id, owner in self.owners.items()
            if owner in owners and delivery_id in self.inbox
            and self.inbox[delivery_id].state is State.PROCESSING
        )  # fmt: skip
        for delivery_id in held:
            if delivery_id != inv.killer and self.owners[delivery_id] not in self.truth.orphans:
                self.truth.innocent_deaths[delivery_id] += 1
        return held

    def draw(self, site: str, rates: Rates, *, later: bool = False) -> Fault | None:
        return self.schedule.draw(site, rates, later=later) if self.inv.faulty else None

    def call(self, site: str, op: Callable[[], T], *, rates: Rates = PORT_WRITE) -> T:
        """One port call through its fault boundary."""
        self.alive()
        self.t += CALL_SECONDS
        fault = self.draw(site, rates)
        if fault is None:
            return op()
        kind = fault.kind
        if kind is Kind.ERROR:
            raise StorageUnavailable("throttled")
        if kind is Kind.KILL_BEFORE:
            self.kill()
        result = op()
        if kind is Kind.LOST_ANSWER:
            raise StorageUnavailable("answer_lost")
        if kind is Kind.SDK_RETRY:
            self.counts[faults.SDK_RETRIES] += 1
            self.truth.sdk_retried[site] += 1
            return op()
        if kind is Kind.KILL_AFTER:
            self.kill()
        return result

    def read(self, site: str, op: Callable[[], T]) -> T:
        return self.call(site, op, rates=PORT_READ)

    def new_reservation_id(self) -> str:
        """A reservation id that replays (the production one is random)."""
        self._reservation_seq += 1
        return f"reservation-{self._reservation_seq}"

    def new_owner(self) -> str:
        """A claim owner that replays; a new attempt, so new notes in its message's task."""
        self._owner_seq += 1
        owner = f"owner-{self._owner_seq}"
        _NOTES.set(Notes(owner=owner))
        self.inv.owners.append(owner)
        return owner

    # --- TTL -----------------------------------------------------------------------

    def expire_at(self, table: str, key: Any, expires_at: int) -> None:
        """Schedule a row's deletion by TTL: at ``expires_at`` plus a lag of its own."""
        if not expires_at or (table, key) in self._ttl_at:
            return
        when = expires_at + self.rng.uniform(0, TTL_LAG_SECONDS)
        self._ttl_at[(table, key)] = when
        self._ttl_seq += 1
        heapq.heappush(self._ttl, (when, self._ttl_seq, table, key))

    def next_expiry(self) -> float | None:
        return self._ttl[0][0] if self._ttl else None

    def sweep(self) -> None:
        """TTL's deletions due by now."""
        while self._ttl and self._ttl[0][0] <= self.t:
            _when, _seq, table, key = heapq.heappop(self._ttl)
            self._ttl_at.pop((table, key), None)
            self.counts[faults.EXPIRY] += 1
            if table == "inbox":
                item = self.inbox.pop(key, None)
                if item is not None and item.state in OPEN and key not in self.truth.terminal:
                    self.truth.vanished[key] = f"{item.state.value} ({item.last_error})"
                self.owners.pop(key, None)
                self.failed_by.pop(key, None)
                self.unlisted.discard(key)
            elif table == "outbox":
                self.outbox.pop(key, None)
            elif table == "effect":
                self.effects.pop(key, None)
            elif table == "step":
                self.steps.pop(key, None)
            elif table == "budget":
                self.budget_days.pop(key, None)
                self.budget_open.pop(key, None)

    # --- SQS -----------------------------------------------------------------------

    def enqueue(
        self,
        body: str,
        *,
        delay: float = 0,
        mark: str | None = None,
        generation: int = 0,
        sent_at: float | None = None,
        dead: bool = False,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        if not dead:
            self._note_enqueued(body)
        self._message_seq += 1
        message_id = f"m{self._message_seq}"
        queue = self.dead if dead else self.work
        queue[message_id] = Message(
            message_id,
            body,
            visible_at=self.t + delay,
            sent_at=self.t if sent_at is None else sent_at,
            mark=mark,
            generation=generation,
            attributes=dict(attributes or {}),
        )

    def _note_enqueued(self, body: str) -> None:
        delivery_id = _delivery_of(body)
        if delivery_id is None:
            return
        if self.inv.role == "reconciler":
            self._note_resent(delivery_id)
        self.history.note_enqueued(self.t, delivery_id, role=self.inv.role)

    def _note_resent(self, delivery_id: str) -> None:
        """The reconciler sends ``delivery_id`` again: note what lost its message, if
        anything did (the queue held no copy, its worker died holding it, an attempt
        died or lost its answer inside an effect), and how long its state had not moved."""
        copies = sorted(
            m.visible_at - self.t for m in self.work.values() if _delivery_of(m.body) == delivery_id
        )
        events = [e for e in self.history.states if e.delivery_id == delivery_id]
        if events and events[-1].transition == "touch_pending":
            events.pop()  # this run's own touch
        last = events[-1] if events else None
        why = ""
        if not copies:
            why = "its message was gone"
        elif last is not None and last.transition == "release_expired":
            why = "its worker died holding it"
        elif any(
            r.delivery_id == delivery_id and r.status is EffectStatus.INTENT
            for r in self.effects.values()
        ):
            why = "an attempt left an effect in doubt"
        unchanged = self.t - (last.at if last is not None else self.started_at)
        detail = ", ".join(f"{c:.0f}" for c in copies)
        self.history.reconciler_sends.append((self.t, delivery_id, why, unchanged, detail))

    def next_visible(self) -> float | None:
        return min((m.visible_at for m in self.work.values()), default=None)

    def receive(self, limit: int) -> list[Message]:
        """Up to ``limit`` visible messages, hidden for the visibility timeout; one past
        the queue's maxReceiveCount moves to the dead-letter queue instead (unmarked)."""
        for message in list(self.work.values()):
            if self.t - message.sent_at >= WORK_RETENTION_SECONDS:
                del self.work[message.message_id]  # SQS's retention ran out
        visible = sorted(
            (m for m in self.work.values() if m.visible_at <= self.t),
            key=lambda m: (m.visible_at, int(m.message_id[1:])),
        )
        taken: list[Message] = []
        for message in visible:
            if len(taken) == limit:
                break
            message.receives += 1
            if message.receives > self.max_receives:
                del self.work[message.message_id]
                self.dead[message.message_id] = message
                if message.mark is None:
                    work = WorkItem.from_json(message.body)
                    item = self.inbox.get(work.delivery_id)
                    state = "gone" if item is None else item.state.value
                    self.truth.unmarked_dead_letters.append(f"{work.delivery_id} ({state})")
                continue
            message.visible_at = self.t + self.visibility_seconds
            message.receipt = f"{message.message_id}/{message.receives}"
            taken.append(message)
        return taken

    def delete(self, message_ids: Iterable[str]) -> None:
        for message_id in message_ids:
            self.work.pop(message_id, None)

    def drop_old_dead_letters(self) -> None:
        for message in list(self.dead.values()):
            if self.t - message.sent_at >= DEAD_LETTER_RETENTION_SECONDS:
                del self.dead[message.message_id]

    # --- far sides -----------------------------------------------------------------

    def far_side(self, name: str) -> FarSide:
        return self.far.setdefault(name, FarSide(name))

    def refused(self, name: str, key: str, *, definite: bool) -> None:
        """Far side ``name`` did nothing for ``key`` (``definite``: and said so)."""
        self.far_side(name).refuse(key, definite=definite)
        if definite:
            self.truth.heard_no[(key.partition(":")[0], name)] = self.notes.owner

    def acted(self, name: str, key: str) -> None:
        """Far side ``name`` acted for ``key``: note an application beyond the first."""
        side = self.far_side(name)
        before = side.applied[key]
        side.act(key)
        if before and side.applied[key] > before:
            item = self.inbox.get(key.partition(":")[0])
            expired = item is None or item.expires_at <= self.t
            self.truth.repeats.append((name, key, expired))


def _delivery_of(body: str) -> str | None:
    try:
        return WorkItem.from_json(body).delivery_id
    except ValueError:
        return None


# --- the ports ---------------------------------------------------------------------


def _free(item: InboxItem, now: int) -> bool:
    """Open and held by no live worker (pending, or a lease that ran out)."""
    return item.state is State.PENDING or (
        item.state is State.PROCESSING and (item.lease_until or 0) <= now
    )


def _listed(world: World, item: InboxItem) -> bool:
    return item.delivery_id not in world.unlisted


class Inbox:
    """:class:`functions.core.ports.inbox.InboxWriter`: one transaction, inbox + outbox."""

    def __init__(self, world: World) -> None:
        self._w = world

    def record(
        self,
        delivery: Delivery,
        work: WorkItem | None,
        *,
        body_sha256: str,
        received_at: int,
        expires_at: int,
    ) -> InboxItem | None:
        w = self._w

        def put() -> InboxItem | None:
            existing = w.inbox.get(delivery.delivery_id)
            if existing is not None:
                return existing  # the condition refused it; ALL_OLD
            item = inbox_item(
                delivery, work, body_sha256=body_sha256, received_at=received_at,
                expires_at=expires_at,
            )  # fmt: skip
            w.inbox[item.delivery_id] = item
            w.history.note_state(
                w.t, item.delivery_id, transition="accept", from_state=None, to_state=item.state
            )
            w.unlisted.add(item.delivery_id)
            w.truth.accepted.add(item.delivery_id)
            w.expire_at("inbox", item.delivery_id, expires_at)
            if work is not None:
                w.outbox[work.delivery_id] = (work, received_at)
                w.expire_at("outbox", work.delivery_id, expires_at)
                w.stream.append({"work": work, "created_at": received_at, "expires": expires_at})
            return None

        return w.call("ddb.accept", put)

    def quarantine(self, record: QuarantineRecord) -> None:
        self._w.call("ddb.quarantine", lambda: None)


class Claims:
    """:class:`functions.core.ports.claims.ClaimStore` and the reconciler's ``RecoveryStore``."""

    _CLAIM_EXPIRY: Final = _expiry_checked(transitions.CLAIM)
    _RESET_EXPIRY: Final = _expiry_checked(transitions.RESET_FAILED)

    def __init__(self, world: World) -> None:
        self._w = world

    def claim(self, delivery_id: str, *, owner: str, now: int, lease_seconds: int) -> ClaimAttempt:
        w = self._w

        def update() -> ClaimAttempt:
            item = w.inbox.get(delivery_id)
            if item is None:
                return ClaimAttempt(ClaimStatus.MISSING)
            lease = now + lease_seconds
            if not _free(item, now):
                if item.state is State.COMPLETED:
                    return ClaimAttempt(ClaimStatus.COMPLETED)
                if item.state is State.PROCESSING:
                    return ClaimAttempt(ClaimStatus.LEASED, lease_until=item.lease_until)
                return ClaimAttempt(ClaimStatus.CLOSED)
            if self._CLAIM_EXPIRY and item.expires_at <= lease:
                # Free, but the whole lease does not end before the TTL.
                return ClaimAttempt(ClaimStatus.EXPIRED)
            w.inbox[delivery_id] = dataclasses.replace(
                item,
                state=State.PROCESSING,
                lease_until=lease,
                attempts=item.attempts + 1,
                state_changed_at=now,
            )
            w.owners[delivery_id] = owner
            w.history.note_state(
                w.t, delivery_id, transition="claim", from_state=item.state,
                to_state=State.PROCESSING, writer=owner, now=now, lease_until=lease,
            )  # fmt: skip
            w.notes.delivery = delivery_id
            w.notes.reservation_day = None
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

        attempt = self._own_write(owner, lambda: w.call("ddb.claim", update))
        if attempt.status is ClaimStatus.CLAIMED and w.at_attempt_point is not None:
            w.at_attempt_point(delivery_id)
        if attempt.status is not ClaimStatus.CLAIMED and w.owners.get(delivery_id) == owner:
            w.truth.orphans.add(owner)  # the SDK's resend was refused: held, unknown to it
        return attempt

    def _own_write(self, owner: str, call: Callable[[], T]) -> T:
        """A write of the claim's owner; one that fails may leave the claim held."""
        try:
            return call()
        except StorageUnavailable:
            self._w.truth.orphans.add(owner)
            raise

    def _finish(self, claim: Claim, now: int, state: State, site: str, **changes: Any) -> None:
        w = self._w

        def update() -> bool:
            item = w.inbox.get(claim.delivery_id)
            if (
                item is None
                or item.state is not State.PROCESSING
                or w.owners.get(claim.delivery_id) != claim.owner
            ):
                return False
            del w.owners[claim.delivery_id]
            values = {k: v(item) if callable(v) else v for k, v in changes.items()}
            done = values.get("effects_done") or frozenset()
            w.history.note_state(
                w.t, claim.delivery_id, transition=site.removeprefix("ddb.")
                + ("_with_effects" if done else ""), from_state=item.state, to_state=state,
                writer=claim.owner,
            )  # fmt: skip
            for name in sorted(done):
                w.history.note_done(claim.delivery_id, name, how="the completion")
            self._move(item, state, now, **values)
            if state is State.FAILED:
                w.failed_by[claim.delivery_id] = claim.owner  # FAIL sets failed_by
            w.truth.finished.add(claim.owner)
            return True

        if not self._own_write(claim.owner, lambda: w.call(site, update)):
            raise ClaimLost()

    def _move(self, item: InboxItem, state: State, now: int, **values: Any) -> None:
        """Write the item's new state (the lease removed) and the truth it makes."""
        w = self._w
        w.inbox[item.delivery_id] = dataclasses.replace(
            item, state=state, lease_until=None, state_changed_at=now, **values
        )
        if state in (State.COMPLETED, State.FAILED):
            w.truth.terminal.add(item.delivery_id)
        if state is State.FAILED:
            w.truth.failures[item.delivery_id] += 1

    def complete(
        self, claim: Claim, *, now: int, effects_done: frozenset[str] = frozenset()
    ) -> None:
        self._finish(
            claim, now, State.COMPLETED, "ddb.complete", completed_at=now, effects_done=effects_done
        )

    def release(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(claim, now, State.PENDING, "ddb.release", last_error=error_code)

    def release_transient(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(
            claim,
            now,
            State.PENDING,
            "ddb.release_transient",
            last_error=error_code,
            transient_failures=lambda item: item.transient_failures + 1,
        )

    def give_back(self, claim: Claim, *, now: int) -> None:
        self._finish(
            claim, now, State.PENDING, "ddb.give_back", attempts=lambda item: item.attempts - 1
        )

    def park(self, claim: Claim, *, now: int, approval: str, deadline: int) -> None:
        self._finish(
            claim,
            now,
            State.AWAITING_APPROVAL,
            "ddb.park",
            attempts=lambda item: item.attempts - 1,
            approval=approval,
            approval_deadline=deadline,
        )

    def fail(self, claim: Claim, *, now: int, error_code: str) -> None:
        if error_code == "uncertain_effect":
            self._own_intent_in_doubt(claim)
        if error_code == ATTEMPTS_EXHAUSTED:
            self._exhausted_by_others(claim)
        self._finish(claim, now, State.FAILED, "ddb.fail", last_error=error_code)

    def _exhausted_by_others(self, claim: Claim) -> None:
        """A delivery given up for its unexplained attempts that would still have had
        one left without the attempts that died while a batch-mate's step ran, and lost
        more of them so than the worker allows (after that many it runs alone)."""
        w = self._w
        before = claim.unexplained_attempts - 1  # this claim is not one of them
        innocent = w.truth.innocent_deaths[claim.delivery_id]
        if innocent > w.lost_attempts_allowed and before - innocent < w.max_attempts:
            w.truth.innocent_failures.append(
                f"{claim.delivery_id}: {innocent} of its {before} unexplained attempts died"
                f" while a batch-mate's step ran (at most {w.lost_attempts_allowed} may)"
            )

    def _own_intent_in_doubt(self, claim: Claim) -> None:
        """An attempt that reports an effect in doubt while the only intent left is the
        one it wrote itself read its own write as a rival's."""
        w = self._w
        for (delivery_id, name), record in w.effects.items():
            if (
                delivery_id == claim.delivery_id
                and record.status is EffectStatus.INTENT
                and w.intent_writers.get((delivery_id, name)) == claim.owner
            ):
                w.truth.own_intent_doubts.append(f"{delivery_id} {name}")

    def defer(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(
            claim,
            now,
            State.PENDING,
            "ddb.defer",
            last_error=error_code,
            attempts=lambda item: item.attempts - 1,
            reset_at=now,
        )

    def close_expired(self, delivery_id: str, *, now: int, lease_seconds: int) -> bool:
        """As the ``expire`` transition: an open item no live worker holds whose lease
        from now would not end before its TTL is failed with ``item_expired``."""
        w = self._w

        def update() -> bool:
            item = w.inbox.get(delivery_id)
            if item is None or not _free(item, now) or item.expires_at > now + lease_seconds:
                return False
            w.owners.pop(delivery_id, None)
            w.history.note_state(
                w.t, delivery_id, transition="expire", from_state=item.state,
                to_state=State.FAILED,
            )  # fmt: skip
            self._move(item, State.FAILED, now, last_error=ITEM_EXPIRED)
            return True

        return w.call("ddb.close_expired", update)

    def reopen(self, delivery_id: str, *, now: int, failure: str | None = None) -> bool:
        """As ``reset_failed``, or with ``failure`` as ``reset_dead_letter``: only the
        failure the item's ``failed_by`` names."""
        w = self._w
        generation = w.inv.marked.get(delivery_id)

        def update() -> bool:
            item = w.inbox.get(delivery_id)
            if item is None or item.state is not State.FAILED:
                return False
            if self._RESET_EXPIRY and item.expires_at <= now:
                return False
            if failure is not None and w.failed_by.get(delivery_id) != failure:
                return False
            if generation is not None and generation != w.truth.failures[delivery_id]:
                w.truth.mark_mismatches.append(
                    f"{delivery_id}: the mark of failure {generation} reopened failure"
                    f" {w.truth.failures[delivery_id]} ({item.last_error})"
                )
            w.unlisted.discard(delivery_id)
            w.failed_by.pop(delivery_id, None)
            w.truth.innocent_deaths.pop(delivery_id, None)  # its attempts start again
            w.history.note_state(
                w.t, delivery_id,
                transition="reset_failed" if failure is None else "reset_dead_letter",
                from_state=item.state, to_state=State.PENDING,
            )  # fmt: skip
            w.inbox[delivery_id] = dataclasses.replace(
                item,
                state=State.PENDING,
                attempts=0,
                transient_failures=0,
                reset_at=now,
                requeued_at=now,
                state_changed_at=now,
            )
            return True

        return w.call("ddb.reopen", update)

    # RecoveryStore
    def get(self, delivery_id: str) -> InboxItem | None:
        return self._w.read("ddb.get", lambda: self._w.inbox.get(delivery_id))

    def open_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
        """The listed open items in delivery-id order (one shard), a page a read, from
        the entry after ``start``; each page says where the pass resumes."""
        w = self._w
        after = start.after[1] if start is not None and start.after is not None else ""
        while True:

            def query(after: str = after) -> list[InboxItem]:
                found = [
                    i
                    for i in w.inbox.values()
                    if _listed(w, i) and i.state in OPEN and i.delivery_id > after
                ]
                return sorted(found, key=lambda i: i.delivery_id)[:page_size]

            page = w.read("ddb.query_open", query)
            if len(page) < page_size:
                yield OpenPage(items=page, resume=None)
                return
            after = page[-1].delivery_id
            yield OpenPage(items=page, resume=OpenCursor(shard=0, after=(0, after)))

    def open_cursor(self) -> OpenCursor | None:
        return self._w.read("ddb.get_cursor", lambda: self._w.open_cursor)

    def save_open_cursor(self, cursor: OpenCursor | None) -> None:
        w = self._w

        def update() -> None:
            w.open_cursor = cursor

        w.call("ddb.save_cursor", update)

    def touch_pending(self, item: InboxItem, *, now: int) -> bool:
        w = self._w

        def update() -> bool:
            current = w.inbox.get(item.delivery_id)
            if (
                current is None
                or current.state is not State.PENDING
                or current.state_changed_at != item.state_changed_at
            ):
                return False
            w.inbox[item.delivery_id] = dataclasses.replace(current, state_changed_at=now)
            w.history.note_state(
                w.t, item.delivery_id, transition="touch_pending", from_state=current.state,
                to_state=State.PENDING,
            )  # fmt: skip
            return True

        return w.call("ddb.touch_pending", update)

    def release_expired(self, item: InboxItem, *, now: int) -> bool:
        w = self._w

        def update() -> bool:
            current = w.inbox.get(item.delivery_id)
            if (
                current is None
                or current.state is not State.PROCESSING
                or current.lease_until != item.lease_until
                or (current.lease_until or 0) > now
            ):
                return False
            w.owners.pop(item.delivery_id, None)
            w.history.note_state(
                w.t, item.delivery_id, transition="release_expired", from_state=current.state,
                to_state=State.PENDING,
            )  # fmt: skip
            w.inbox[item.delivery_id] = dataclasses.replace(
                current,
                state=State.PENDING,
                lease_until=None,
                state_changed_at=now,
                last_error="lease_expired",
            )
            return True

        return w.call("ddb.release_expired", update)


class ReceivedLog:
    """:class:`functions.core.ports.recovery.ReceivedLog` over the outbox records."""

    def __init__(self, world: World) -> None:
        self._w = world

    def watermark(self) -> int | None:
        return self._w.read("ddb.watermark", lambda: self._w.watermark)

    def oldest(self, *, since: int | None = None) -> int | None:
        w = self._w
        floor = since if since is not None else -1
        return w.read(
            "ddb.received_oldest",
            lambda: min((r for _w, r in w.outbox.values() if r >= floor), default=None),
        )

    def unlisted_open_pages(
        self, *, since: int, before: int, page_size: int
    ) -> Iterator[list[InboxItem]]:
        """The window's unlisted open items, a page at a time (one empty page when none)."""
        found = self.unlisted_open(since=since, before=before, page_size=page_size)
        for first in range(0, max(len(found), 1), page_size):
            yield found[first : first + page_size]

    def unlisted_open(self, *, since: int, before: int, page_size: int) -> list[InboxItem]:
        w = self._w

        def query() -> list[InboxItem]:
            found = []
            for delivery_id, (_work, received) in w.outbox.items():
                item = w.inbox.get(delivery_id)
                if (
                    since <= received < before
                    and item is not None
                    and item.state in OPEN
                    and delivery_id in w.unlisted
                ):
                    found.append(item)
            return sorted(found, key=lambda i: (i.received_at, i.delivery_id))

        return w.read("ddb.received_window", query)

    def list_open(self, item: InboxItem) -> bool:
        w = self._w

        def update() -> bool:
            current = w.inbox.get(item.delivery_id)
            if current is None or current.state not in OPEN or item.delivery_id not in w.unlisted:
                return False
            w.unlisted.discard(item.delivery_id)
            return True

        return w.call("ddb.list_open", update)

    def advance(self, watermark: int) -> None:
        w = self._w

        def update() -> None:
            if w.watermark is None or watermark > w.watermark:
                w.watermark = watermark

        w.call("ddb.advance", update)


_EFFECT_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(EffectRecord))


class Effects:
    """:class:`functions.core.ports.effects.EffectStore` and the reconciler's
    ``UncertainEffects``."""

    def __init__(self, world: World) -> None:
        self._w = world

    def get(self, delivery_id: str, name: str) -> EffectRecord | None:
        record = self._w.read("ddb.effect_get", lambda: self._w.effects.get((delivery_id, name)))
        if self._w.at_attempt_point is not None:
            self._w.at_attempt_point(delivery_id)
        return record

    def record_intent(
        self, delivery_id: str, name: str, *, key: str, now: int, expires_at: int, **extra: Any
    ) -> bool:
        """As the adapter's conditional put; an argument a newer port adds is kept on the
        record when :class:`EffectRecord` has a field of that name (e.g. who wrote it)."""
        w = self._w
        kept = {k: v for k, v in extra.items() if k in _EFFECT_FIELDS}

        def put() -> bool:
            current = w.effects.get((delivery_id, name))
            if current is not None and current.status is not EffectStatus.NOT_APPLIED:
                return False
            w.effects[(delivery_id, name)] = EffectRecord(
                delivery_id, name, EffectStatus.INTENT, key, now, **kept
            )
            w.intent_writers[(delivery_id, name)] = w.notes.owner
            side = w.far_side(name)
            w.truth.at_intent[(delivery_id, name)] = (side.requests[key], side.definite_no[key])
            w.expire_at("effect", (delivery_id, name), expires_at)
            return True

        return w.call("ddb.record_intent", put)

    def record_done(self, delivery_id: str, name: str, *, now: int) -> None:
        w = self._w

        def update() -> bool:
            record = w.effects.get((delivery_id, name))
            if record is None:
                return False  # attribute_exists(pk) refused it
            w.effects[(delivery_id, name)] = dataclasses.replace(
                record, status=EffectStatus.DONE, done_at=now, flagged_at=None
            )
            w.history.note_done(delivery_id, name, how="the ledger")
            return True

        if not w.call("ddb.record_done", update):
            raise TransientError("effect_conflict")

    def resolve_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        return self._resolve(delivery_id, name, EffectStatus.DONE, done_at=now)

    def resolve_not_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        return self._resolve(delivery_id, name, EffectStatus.NOT_APPLIED)

    def _resolve(self, delivery_id: str, name: str, status: EffectStatus, **changes: Any) -> bool:
        try:
            return self._update_status(delivery_id, name, status, **changes)
        except StorageUnavailable:
            self._w.truth.unrecorded_no.add((delivery_id, name))
            raise

    def _update_status(
        self, delivery_id: str, name: str, status: EffectStatus, **changes: Any
    ) -> bool:
        w = self._w

        def update() -> bool:
            current = w.effects.get((delivery_id, name))
            if current is None or current.status is not EffectStatus.INTENT:
                return False
            w.effects[(delivery_id, name)] = dataclasses.replace(
                current, status=status, flagged_at=None, **changes
            )
            if status is EffectStatus.DONE:
                w.history.note_done(delivery_id, name, how="an operator")
            return True

        return w.call("ddb.resolve_effect", update)

    def uncertain_pages(
        self, *, start: IntentCursor | None, intended_before: int, page_size: int
    ) -> Iterator[IntentPage]:
        """Unflagged intents in (delivery id, name) order (one shard), a page a read,
        from the intent after ``start``; each page says where the pass resumes."""
        w = self._w
        after = ("", "") if start is None or start.after is None else start.after[1:]
        while True:

            def query(after: tuple[str, str] = after) -> list[EffectRecord]:
                found = [
                    r
                    for r in w.effects.values()
                    if r.status is EffectStatus.INTENT
                    and r.intent_at < intended_before
                    and r.flagged_at is None
                    and (r.delivery_id, r.name) > after
                ]
                return sorted(found, key=lambda r: (r.delivery_id, r.name))[:page_size]

            page = w.read("ddb.query_intents", query)
            if len(page) < page_size:
                yield IntentPage(items=page, resume=None)
                return
            after = (page[-1].delivery_id, page[-1].name)
            yield IntentPage(items=page, resume=IntentCursor(shard=0, after=(0, *after)))

    def intent_cursor(self) -> IntentCursor | None:
        return self._w.read("ddb.get_intent_cursor", lambda: self._w.intent_cursor)

    def save_intent_cursor(self, cursor: IntentCursor | None) -> None:
        w = self._w

        def update() -> None:
            w.intent_cursor = cursor

        w.call("ddb.save_intent_cursor", update)

    def flag(self, record: EffectRecord, *, now: int) -> bool:
        w = self._w

        def update() -> bool:
            current = w.effects.get((record.delivery_id, record.name))
            if current is None or current.status is not EffectStatus.INTENT or current.flagged_at:
                return False
            w.effects[(record.delivery_id, record.name)] = dataclasses.replace(
                current, flagged_at=now
            )
            return True

        return w.call("ddb.flag", update)


class Steps:
    """:class:`functions.core.ports.steps.StepStore`; counts the runs it starts."""

    def __init__(self, world: World) -> None:
        self._w = world

    def get(self, delivery_id: str, name: str) -> StepRecord | None:
        record = self._w.read("ddb.step_get", lambda: self._w.steps.get((delivery_id, name)))
        if self._w.at_attempt_point is not None:
            self._w.at_attempt_point(delivery_id)
        return record

    def start(
        self, delivery_id: str, name: str, *, now: int, expires_at: int, label: str = ""
    ) -> StepRecord | None:
        w = self._w

        def update() -> StepRecord | None:
            before = w.steps.get((delivery_id, name))
            if before is not None and before.status is StepStatus.RECORDED:
                return before
            runs = 0 if before is None else before.runs
            w.steps[(delivery_id, name)] = StepRecord(
                delivery_id, name, StepStatus.STARTED, runs + 1, now, label=label or None
            )
            w.truth.step_starts[delivery_id] += 1
            w.expire_at("step", (delivery_id, name), expires_at)
            return before

        return w.call("ddb.step_start", update)

    def record_failed(
        self, delivery_id: str, name: str, *, run: int, now: int, error: str = ""
    ) -> bool:
        w = self._w

        def update() -> bool:
            current = w.steps.get((delivery_id, name))
            if current is None or current.status is not StepStatus.STARTED or current.runs != run:
                return False
            w.steps[(delivery_id, name)] = dataclasses.replace(
                current, status=StepStatus.FAILED, error=error or None
            )
            return True

        return w.call("ddb.step_failed", update)

    def record_result(
        self, delivery_id: str, name: str, *, result: StoredResult, now: int
    ) -> StepRecord | None:
        w = self._w

        def update() -> StepRecord | None:
            current = w.steps.get((delivery_id, name))
            if current is not None and current.status is StepStatus.RECORDED:
                return current
            base = current or StepRecord(delivery_id, name, StepStatus.STARTED, 1, now)
            w.steps[(delivery_id, name)] = dataclasses.replace(
                base, status=StepStatus.RECORDED, recorded_at=now, result=result
            )
            return None

        return w.call("ddb.step_result", update)


class Budget:
    """:class:`functions.core.ports.budget.BudgetStore`: conditional ADDs, as the adapter's."""

    def __init__(self, world: World) -> None:
        self._w = world

    def _day(self, day: str) -> BudgetDay:
        w = self._w
        current = w.budget_days.get(day)
        if current is None:
            current = BudgetDay(day=day, limit=w.budget_limit, reserved=0, used=0)
            w.budget_days[day] = current
            starts = _day_start(day)
            w.expire_at("budget", day, starts + DAY_SECONDS + DAY_RETENTION_SECONDS)
        return current

    def reserve(self, day: str, tokens: int, *, reservation_id: str) -> bool:
        """As the adapter's conditional ADD: within the headroom and only while the id
        is not among the day's open reservations; a refused write whose id is there was
        an earlier send of this one (admitted)."""
        w = self._w

        def update() -> bool:
            current = self._day(day)
            ids = w.budget_open.setdefault(day, set())
            if reservation_id in ids:
                return True
            if current.reserved + tokens > current.limit:
                return False
            ids.add(reservation_id)
            w.budget_days[day] = dataclasses.replace(
                current, reserved=current.reserved + tokens, open_reservations=len(ids)
            )
            w.notes.reservation_day = day
            return True

        written = self._send("ddb.budget_reserve", update)
        delivery = w.notes.delivery
        if not written and delivery is not None:
            largest = w.truth.refused_reservation.get(delivery, 0)
            w.truth.refused_reservation[delivery] = max(largest, tokens)
        return written

    def settle(self, day: str, *, reservation_id: str, reserved: int, used: int) -> None:
        self._close(day, reservation_id, "ddb.budget_settle", reserved=reserved, used=used)

    def keep(self, day: str, *, reservation_id: str) -> None:
        self._close(day, reservation_id, "ddb.budget_keep", reserved=0, used=None)

    def _close(
        self, day: str, reservation_id: str, site: str, *, reserved: int, used: int | None
    ) -> None:
        """Remove an open reservation, on condition that it is open (once); a
        settlement also moves the counters by what was used (``used``)."""
        w = self._w

        def update() -> None:
            ids = w.budget_open.get(day, set())
            current = w.budget_days.get(day)
            if current is None or reservation_id not in ids:
                return
            ids.discard(reservation_id)
            current = dataclasses.replace(current, open_reservations=len(ids))
            if used is not None:
                current = dataclasses.replace(
                    current, reserved=current.reserved - reserved + used, used=current.used + used
                )
            w.budget_days[day] = current

        self._send(site, update)

    def _send(self, site: str, op: Callable[[], T]) -> T:
        """The adapter sends a write that applies once again while its outcome is
        unknown (twice in all)."""
        try:
            return self._w.call(site, op)
        except StorageUnavailable:
            return self._w.call(site, op)

    def set_limit(self, day: str, tokens: int) -> None:
        w = self._w
        w.budget_limit = tokens
        w.budget_days[day] = dataclasses.replace(self._day(day), limit=tokens)

    def get(self, day: str) -> BudgetDay:
        w = self._w
        return w.read(
            "ddb.budget_get",
            lambda: (
                w.budget_days.get(day)
                or BudgetDay(day=day, limit=w.budget_limit, reserved=0, used=0)
            ),
        )


def _day_start(day: str) -> int:
    year, month, date = (int(part) for part in day.split("-"))
    return int(datetime(year, month, date, tzinfo=UTC).timestamp())


class Queue:
    """:class:`functions.core.ports.queue.WorkQueue` and the reconciler's and relay's
    ``EnqueueBatch`` on the world's work queue."""

    def __init__(self, world: World) -> None:
        self._w = world

    def _send(self, site: str, bodies: Sequence[str], delay: float) -> None:
        w = self._w
        w.alive()
        w.t += CALL_SECONDS
        fault = w.draw(site, QUEUE_SEND)
        if fault is not None and fault.kind is Kind.ERROR:
            raise StorageUnavailable("throttled")
        copies = 2 if fault is not None and fault.kind is Kind.DUPLICATE else 1
        for body in bodies:
            for _ in range(copies):
                w.enqueue(body, delay=delay)
        if fault is not None and fault.kind is Kind.LOST_ANSWER:
            raise StorageUnavailable("answer_lost")
        if fault is not None and fault.kind is Kind.KILL_AFTER:
            w.kill()

    def send(self, work: WorkItem, *, delay_seconds: int = 0) -> None:
        self._send("sqs.send", [work.to_json()], delay_seconds)

    def send_batch(self, works: Sequence[WorkItem]) -> list[UnsentWork]:
        self._send("sqs.send_batch", [work.to_json() for work in works], 0)
        return []

    def change_visibility(self, receipt_handle: str, *, seconds: int) -> None:
        w = self._w

        def update() -> None:
            message_id = receipt_handle.partition("/")[0]
            message = w.work.get(message_id)
            if message is not None and message.receipt == receipt_handle:
                message.visible_at = w.t + seconds

        w.read("sqs.change_visibility", update)

    def dead_letter(self, body: str, *, reason: str, **attributes: Any) -> None:
        w = self._w

        def send() -> None:
            try:
                delivery_id: str | None = WorkItem.from_json(body).delivery_id
            except ValueError:
                delivery_id = None
            generation = 0 if delivery_id is None else w.truth.failures[delivery_id]
            w.enqueue(body, mark=reason, generation=generation, dead=True, attributes=attributes)

        w.call("sqs.dead_letter", send, rates=QUEUE_SEND[:2])


@dataclass(slots=True)
class Metrics:
    """The metrics port (counts only)."""

    counts: Counter[str] = field(default_factory=Counter)

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value

    def seconds(self, name: str, value: float) -> None:
        del name, value

    def flush(self) -> None:
        return None
