"""The simulated world: a virtual clock, DynamoDB and SQS behind the core's ports.

Everything the core reaches through a port lives here, in memory, with the semantics
the production adapters give it (the conditions of :mod:`functions.core.adapters`'
writes, mirrored as :mod:`tests.fakes` mirrors them), and every call passes one
fault boundary (:meth:`World.call`): it may fail before it writes, commit and lose its
answer, commit and be sent again by the SDK (the second answer is the caller's), or
kill the process before or after it commits. Time is virtual: each call takes a few
milliseconds of it, a slow far side takes minutes, and an invocation that runs past its
timeout dies at its next call. TTL deletes a row at ``expires_at`` plus a lag drawn
per row (late, and in any order). The world's views of the table (``inbox``,
``effects``, ``budget_days``...) and the history follow the store's committed writes.

The world also keeps the truth the invariants need and the core cannot see: which far
side acted how often, how many model runs there were, which tokens were really spent;
and the mechanisms' history (:mod:`local.simulate.history`): each committed state write
with its writer, each message sent to the queue with its sender's role.
"""

from __future__ import annotations

import contextvars
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from functions.core import table_layout
from functions.core.adapters.dynamodb_budget import (
    KIND_BUDGET,
    OPEN_RESERVATIONS,
    DynamoDbBudget,
    day_from_item,
)
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_effects import DynamoDbEffects, effect_from_item
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.dynamodb_items import inbox_from_item, is_listed
from functions.core.adapters.dynamodb_package_record import DynamoDbPackageRecords
from functions.core.adapters.dynamodb_received_log import DynamoDbReceivedLog, read_watermark
from functions.core.adapters.dynamodb_steps import KIND_STEP, DynamoDbSteps
from functions.core.adapters.storage_retry import StorageRetry
from functions.core.budget import DAY_SECONDS
from functions.core.claim import Claim, ClaimAttempt, ClaimStatus
from functions.core.delivery import Delivery
from functions.core.errors import StorageUnavailable
from functions.core.models import InboxItem, QuarantineRecord, State, UnsentWork, WorkItem
from functions.core.ports.budget import BudgetDay
from functions.core.ports.effects import EffectRecord, EffectStatus
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.recovery import (
    IntentCursor,
    IntentPage,
    OpenCursor,
    OpenPage,
    ReceivedLogPart,
)
from functions.core.ports.steps import StepRecord, StepStatus, StoredResult
from infra.schema import TABLE, table_definition
from local.memory_dynamodb import MemoryDynamoDB, Write
from local.memory_dynamodb.values import Item
from local.simulate import faults
from local.simulate.dynamodb_client import SimulatedClient
from local.simulate.faults import Fault, Killed, Kind
from local.simulate.history import History
from local.simulate.schedule import PORT_READ, PORT_WRITE, QUEUE_SEND, Rates, Schedule

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

T = TypeVar("T")
P = TypeVar("P")

# 2026-01-01T00:00:00Z; each seed starts at a time of that day of its own.
EPOCH: Final = 1_767_225_600
CALL_SECONDS: Final = 0.01  # what one port call takes
TTL_LAG_SECONDS: Final = 2 * DAY_SECONDS  # TTL deletes within this long after expiry
WORK_RETENTION_SECONDS: Final = 4 * DAY_SECONDS  # infra/queues.py
DEAD_LETTER_RETENTION_SECONDS: Final = 14 * DAY_SECONDS
OPEN: Final = (State.PENDING, State.PROCESSING)
ATTEMPTS_EXHAUSTED: Final = "attempts_exhausted"  # the processor's code for it


TABLE_NAME: Final = "simulated"
_LEASE_OWNER: Final = "lease_owner"  # the inbox item's attribute naming the lease's holder


@dataclass(frozen=True, slots=True)
class Writing:
    """What the port call in flight writes: the transition its state writes carry out
    (None: no state write), the claim owner and the clock its request names."""

    transition: str | None
    writer: str | None
    now: int | None


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
    # What it acted on, in order: (key, content) where the content is judged (alerts).
    received: list[tuple[str, str]] = field(default_factory=list)

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
        # DynamoDB: the table, and views of it kept from its committed writes.
        self.dynamodb = MemoryDynamoDB(ttl_lag=lambda: self.rng.uniform(0, TTL_LAG_SECONDS))
        self.dynamodb.create_table(**table_definition(TABLE_NAME))
        self.dynamodb.update_time_to_live(
            TableName=TABLE_NAME,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TABLE.ttl_attribute},
        )
        self.dynamodb.listen(self._committed)
        self.sdk = SimulatedClient(self.dynamodb)
        self.client = cast("DynamoDBClient", self.sdk)  # what the adapters take
        self._writing: Writing | None = None
        self.inbox: dict[str, InboxItem] = {}
        self.owners: dict[str, str] = {}  # delivery id -> its live lease's owner
        self.unlisted: set[str] = set()  # inbox items without an entry in the state index
        self.effects: dict[tuple[str, str], EffectRecord] = {}
        self.intent_writers: dict[tuple[str, str], str | None] = {}
        self.budget_days: dict[str, BudgetDay] = {}
        self._reservation_seq = 0
        self.budget_limit = 0
        # The table's stream: outbox inserts (their new images) the relay has not taken.
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

    def call(
        self,
        site: str,
        op: Callable[[], T],
        *,
        rates: Rates = PORT_WRITE,
        transition: str | None = None,
        writer: str | None = None,
        now: int | None = None,
    ) -> T:
        """One port call through its fault boundary. ``transition`` (with the ``writer``
        and the clock ``now`` its request names) is how the history names the state
        writes it commits."""
        self.alive()
        self.t += CALL_SECONDS
        fault = self.draw(site, rates)
        kind = None if fault is None else fault.kind
        if kind is Kind.ERROR:
            raise StorageUnavailable("throttled")
        if kind is Kind.KILL_BEFORE:
            self.kill()
        if kind is Kind.SDK_RETRY:
            # The answer to the call's first write is lost and botocore sends that same
            # request again; the caller gets the second answer.
            self.counts[faults.SDK_RETRIES] += 1
            self.truth.sdk_retried[site] += 1
            self.sdk.resend_next_write = True
        self._writing = Writing(transition, writer, now)
        try:
            result = op()
        finally:
            self._writing = None
            self.sdk.resend_next_write = False
        if kind is Kind.LOST_ANSWER:
            raise StorageUnavailable("answer_lost")
        if kind is Kind.KILL_AFTER:
            self.kill()
        return result

    def pages(self, site: str, pages: Iterator[P]) -> Iterator[P]:
        """A paged read: each page is one call through the fault boundary."""
        done = object()
        while True:
            page = self.read(site, lambda: next(pages, done))
            if page is done:
                return
            yield cast(P, page)

    def storage_retry(self) -> StorageRetry:
        """An adapter's retry of a throttled write, waiting on the virtual clock."""

        def sleep(seconds: float) -> None:
            self.t += seconds

        return StorageRetry(sleep=sleep, monotonic=self.monotonic, jitter=self.rng.uniform)

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

    # --- the table: TTL, and the views kept from its committed writes --------------

    def next_expiry(self) -> float | None:
        return self.dynamodb.next_expiry()

    def sweep(self) -> None:
        """TTL's deletions due by now (each row's lag was drawn when its TTL was written)."""
        self.dynamodb.sweep(self.t)

    @property
    def watermark(self) -> int | None:
        """The received log's watermark, as the table holds it."""
        return read_watermark(cast("DynamoDBClient", self.dynamodb), TABLE_NAME)

    @watermark.setter
    def watermark(self, value: int) -> None:
        """Move the watermark forward (the real advance, outside any fault)."""
        store = cast("DynamoDBClient", self.dynamodb)
        DynamoDbReceivedLog(client=store, table_name=TABLE_NAME).advance(value)

    def _committed(self, write: Write) -> None:
        """One committed change of the table: keep the views, the truth and the history."""
        image = write.new if write.new is not None else write.old
        assert image is not None
        partition = image[table_layout.TABLE_PARTITION_KEY]["S"]
        sort = image[table_layout.TABLE_SORT_KEY]["S"]
        if write.operation == "TTL":
            self.counts[faults.EXPIRY] += 1
        kind = image.get(table_layout.KIND_ATTRIBUTE, {}).get("S")
        if sort == table_layout.SK_INBOX:
            self._inbox_written(partition, write)
        elif kind == table_layout.KIND_OUTBOX:
            if write.old is None and write.new is not None:
                self.stream.append({"image": write.new, "delivery_id": image["delivery_id"]["S"]})
        elif sort.startswith(table_layout.SK_EFFECT_PREFIX):
            self._effect_written(partition, sort.removeprefix(table_layout.SK_EFFECT_PREFIX), write)
        elif kind == KIND_STEP and write.new is not None:
            self._step_written(write.old, write.new)
        elif kind == KIND_BUDGET and "day" in image:
            day = image["day"]["S"]
            if write.new is None:
                self.budget_days.pop(day, None)
            else:
                self.budget_days[day] = day_from_item(day, write.new)
                old = None if write.old is None else write.old.get(OPEN_RESERVATIONS)
                new = write.new.get(OPEN_RESERVATIONS)
                if new is not None and (old is None or len(new["SS"]) > len(old["SS"])):
                    self.notes.reservation_day = day

    def _step_written(self, old: Item | None, new: Item) -> None:
        """A step record written: a start counted, and a recorded result never left."""
        delivery_id = new["delivery_id"]["S"]
        if int(new["runs"]["N"]) > (0 if old is None else int(old["runs"]["N"])):
            self.truth.step_starts[delivery_id] += 1
        recorded = StepStatus.RECORDED.value
        if old is not None and old["status"]["S"] == recorded and new["status"]["S"] != recorded:
            self.history.step_restarts.append(
                f"{delivery_id} {new['name']['S']}: its recorded result was left for"
                f" {new['status']['S']} (run {new['runs']['N']})"
            )

    def _inbox_written(self, delivery_id: str, write: Write) -> None:
        new = write.new
        if new is None:
            gone = self.inbox.pop(delivery_id, None)
            if (
                write.operation == "TTL"
                and gone is not None
                and gone.state in OPEN
                and delivery_id not in self.truth.terminal
            ):
                self.truth.vanished[delivery_id] = f"{gone.state.value} ({gone.last_error})"
            self.owners.pop(delivery_id, None)
            self.unlisted.discard(delivery_id)
            return
        before = self.inbox.get(delivery_id)  # the old image, as parsed when written
        item = inbox_from_item(new)
        self.inbox[delivery_id] = item
        owner = new.get(_LEASE_OWNER, {}).get("S")
        if owner is not None and item.state is State.PROCESSING:
            self.owners[delivery_id] = owner
        else:
            self.owners.pop(delivery_id, None)
        if is_listed(new):
            self.unlisted.discard(delivery_id)
        else:
            self.unlisted.add(delivery_id)
        writing = self._writing
        if writing is None or writing.transition is None:
            return  # not a state write (the reconciler listing it, say)
        old_state = None if write.old is None or before is None else before.state
        self._state_written(delivery_id, item, old_state, writing)

    def _state_written(
        self, delivery_id: str, item: InboxItem, old_state: State | None, writing: Writing
    ) -> None:
        """A transition of the inbox item committed: its history line and its truth."""
        transition = writing.transition or ""
        if transition == "accept":
            self.truth.accepted.add(delivery_id)
        if transition == "complete" and item.effects_done:
            for name in sorted(item.effects_done):
                self.history.note_done(delivery_id, name, how="the completion")
            transition = "complete_with_effects"
        claim = transition == "claim"
        self.history.note_state(
            self.t, delivery_id, transition=transition, from_state=old_state,
            to_state=item.state, writer=writing.writer, now=writing.now if claim else None,
            lease_until=item.lease_until if claim else None,
        )  # fmt: skip
        if claim:
            self.notes.delivery = delivery_id
            self.notes.reservation_day = None
        if writing.writer is not None and transition.removesuffix("_with_effects") in _FINISHES:
            self.truth.finished.add(writing.writer)
        if item.state in (State.COMPLETED, State.FAILED) and old_state is not item.state:
            self.truth.terminal.add(delivery_id)
            if item.state is State.FAILED:
                self.truth.failures[delivery_id] += 1
        if transition.startswith("reset_"):
            generation = self.inv.marked.get(delivery_id)
            if generation is not None and generation != self.truth.failures[delivery_id]:
                self.truth.mark_mismatches.append(
                    f"{delivery_id}: the mark of failure {generation} reopened failure"
                    f" {self.truth.failures[delivery_id]} ({item.last_error})"
                )
            self.truth.innocent_deaths.pop(delivery_id, None)  # its attempts start again

    def _effect_written(self, delivery_id: str, name: str, write: Write) -> None:
        if write.new is None:
            self.effects.pop((delivery_id, name), None)
            return
        record = effect_from_item(write.new)
        self.effects[(delivery_id, name)] = record
        before = None if write.old is None else effect_from_item(write.old).status
        if record.status is EffectStatus.INTENT and before is not EffectStatus.INTENT:
            self.intent_writers[(delivery_id, name)] = self.notes.owner
            side = self.far_side(name)
            at = (side.requests[record.key], side.definite_no[record.key])
            self.truth.at_intent[(delivery_id, name)] = at
        if record.status is EffectStatus.DONE and before is not EffectStatus.DONE:
            writing = self._writing
            how = writing.transition if writing and writing.transition else "the ledger"
            self.history.note_done(delivery_id, name, how=how)

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


# --- the ports: the real adapters over the in-memory DynamoDB ------------------------

# The claim owner a write names, for the writes that name none (operator, reconciler).
_FINISHES: Final = frozenset(
    {"complete", "release", "release_transient", "give_back", "park", "fail", "defer"}
)


class Inbox:
    """:class:`functions.core.ports.inbox.InboxWriter`: the real
    :class:`~functions.core.adapters.dynamodb_inbox.DynamoDbInbox`."""

    def __init__(self, world: World) -> None:
        self._w = world
        self._real = DynamoDbInbox(world.client, TABLE_NAME, retry=world.storage_retry())

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
        return w.call(
            "ddb.accept",
            lambda: self._real.record(
                delivery,
                work,
                body_sha256=body_sha256,
                received_at=received_at,
                expires_at=expires_at,
            ),
            transition="accept",
        )

    def quarantine(self, record: QuarantineRecord) -> None:
        self._w.call("ddb.quarantine", lambda: self._real.quarantine(record))


class Claims:
    """:class:`functions.core.ports.claims.ClaimStore` and the reconciler's
    ``RecoveryStore``: the real :class:`~functions.core.adapters.dynamodb_claims.DynamoDbClaims`,
    each call through the world's fault boundary; the truth it needs is noted around it."""

    def __init__(self, world: World) -> None:
        self._w = world
        self._real = DynamoDbClaims(client=world.client, table_name=TABLE_NAME)

    def claim(self, delivery_id: str, *, owner: str, now: int, lease_seconds: int) -> ClaimAttempt:
        w = self._w
        attempt = self._own_write(
            owner,
            lambda: w.call(
                "ddb.claim",
                lambda: self._real.claim(
                    delivery_id, owner=owner, now=now, lease_seconds=lease_seconds
                ),
                transition="claim",
                writer=owner,
                now=now,
            ),
        )
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

    def _finish(self, claim: Claim, transition: str, op: Callable[[], None]) -> None:
        w = self._w
        self._own_write(
            claim.owner,
            lambda: w.call(f"ddb.{transition}", op, transition=transition, writer=claim.owner),
        )

    def complete(
        self,
        claim: Claim,
        *,
        now: int,
        effects_done: frozenset[str] = frozenset(),
        package: PackageRecord | None = None,
    ) -> None:
        self._finish(
            claim,
            "complete",
            lambda: self._real.complete(claim, now=now, effects_done=effects_done, package=package),
        )

    def release(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(
            claim, "release", lambda: self._real.release(claim, now=now, error_code=error_code)
        )

    def release_transient(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(
            claim,
            "release_transient",
            lambda: self._real.release_transient(claim, now=now, error_code=error_code),
        )

    def give_back(self, claim: Claim, *, now: int) -> None:
        self._finish(claim, "give_back", lambda: self._real.give_back(claim, now=now))

    def park(self, claim: Claim, *, now: int, approval: str, deadline: int) -> None:
        self._finish(
            claim,
            "park",
            lambda: self._real.park(claim, now=now, approval=approval, deadline=deadline),
        )

    def fail(self, claim: Claim, *, now: int, error_code: str) -> None:
        if error_code == "uncertain_effect":
            self._own_intent_in_doubt(claim)
        if error_code == ATTEMPTS_EXHAUSTED:
            self._exhausted_by_others(claim)
        self._finish(claim, "fail", lambda: self._real.fail(claim, now=now, error_code=error_code))

    def defer(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(
            claim, "defer", lambda: self._real.defer(claim, now=now, error_code=error_code)
        )

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

    def close_expired(self, delivery_id: str, *, now: int, lease_seconds: int) -> bool:
        return self._w.call(
            "ddb.close_expired",
            lambda: self._real.close_expired(delivery_id, now=now, lease_seconds=lease_seconds),
            transition="expire",
        )

    def reopen(self, delivery_id: str, *, now: int, failure: str | None = None) -> bool:
        return self._w.call(
            "ddb.reopen",
            lambda: self._real.reopen(delivery_id, now=now, failure=failure),
            transition="reset_failed" if failure is None else "reset_dead_letter",
        )

    # RecoveryStore
    def get(self, delivery_id: str) -> InboxItem | None:
        return self._w.read("ddb.get", lambda: self._real.get(delivery_id))

    def open_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
        return self._w.pages(
            "ddb.query_open", self._real.open_pages(start=start, page_size=page_size)
        )

    def open_cursor(self) -> OpenCursor | None:
        return self._w.read("ddb.get_cursor", self._real.open_cursor)

    def save_open_cursor(self, cursor: OpenCursor | None) -> None:
        self._w.call("ddb.save_cursor", lambda: self._real.save_open_cursor(cursor))

    def touch_pending(self, item: InboxItem, *, now: int) -> bool:
        return self._w.call(
            "ddb.touch_pending",
            lambda: self._real.touch_pending(item, now=now),
            transition="touch_pending",
        )

    def release_expired(self, item: InboxItem, *, now: int) -> bool:
        return self._w.call(
            "ddb.release_expired",
            lambda: self._real.release_expired(item, now=now),
            transition="release_expired",
        )


class ReceivedLog:
    """:class:`functions.core.ports.recovery.ReceivedLog`: the real
    :class:`~functions.core.adapters.dynamodb_received_log.DynamoDbReceivedLog` (one per
    reconciler run, as the handler builds it)."""

    def __init__(self, world: World) -> None:
        self._w = world
        self._real = DynamoDbReceivedLog(client=world.client, table_name=TABLE_NAME)

    def watermark(self) -> int | None:
        return self._w.read("ddb.watermark", self._real.watermark)

    def oldest(self, *, since: int | None = None) -> int | None:
        return self._w.read("ddb.received_oldest", lambda: self._real.oldest(since=since))

    def unlisted_open_pages(
        self, *, since: int, before: int, page_size: int
    ) -> Iterator[list[InboxItem]]:
        return self._w.pages(
            "ddb.received_window",
            self._real.unlisted_open_pages(since=since, before=before, page_size=page_size),
        )

    def list_open(self, item: InboxItem) -> bool:
        return self._w.call("ddb.list_open", lambda: self._real.list_open(item))

    def advance(self, watermark: int) -> None:
        self._w.call("ddb.advance", lambda: self._real.advance(watermark))

    def slices(self) -> list[ReceivedLogPart]:
        # (the simulated runs read every shard at once: parallelism 1)
        raise NotImplementedError("the simulator's reconciler reads the log as one")


class Effects:
    """:class:`functions.core.ports.effects.EffectStore` and the reconciler's
    ``UncertainEffects``: the real
    :class:`~functions.core.adapters.dynamodb_effects.DynamoDbEffects`."""

    def __init__(self, world: World) -> None:
        self._w = world
        self._real = DynamoDbEffects(client=world.client, table_name=TABLE_NAME)

    def get(self, delivery_id: str, name: str) -> EffectRecord | None:
        record = self._w.read("ddb.effect_get", lambda: self._real.get(delivery_id, name))
        if self._w.at_attempt_point is not None:
            self._w.at_attempt_point(delivery_id)
        return record

    def record_intent(
        self, delivery_id: str, name: str, *, key: str, now: int, expires_at: int, **extra: Any
    ) -> bool:
        return self._w.call(
            "ddb.record_intent",
            lambda: self._real.record_intent(
                delivery_id, name, key=key, now=now, expires_at=expires_at, **extra
            ),
        )

    def record_done(self, delivery_id: str, name: str, *, now: int) -> None:
        self._w.call(
            "ddb.record_done",
            lambda: self._real.record_done(delivery_id, name, now=now),
            transition="the ledger",
        )

    def resolve_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        return self._resolve(
            delivery_id, name, lambda: self._real.resolve_applied(delivery_id, name, now=now)
        )

    def resolve_not_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        return self._resolve(
            delivery_id, name, lambda: self._real.resolve_not_applied(delivery_id, name, now=now)
        )

    def _resolve(self, delivery_id: str, name: str, op: Callable[[], bool]) -> bool:
        try:
            return self._w.call("ddb.resolve_effect", op, transition="an operator")
        except StorageUnavailable:
            self._w.truth.unrecorded_no.add((delivery_id, name))
            raise

    def uncertain_pages(
        self, *, start: IntentCursor | None, intended_before: int, page_size: int
    ) -> Iterator[IntentPage]:
        return self._w.pages(
            "ddb.query_intents",
            self._real.uncertain_pages(
                start=start, intended_before=intended_before, page_size=page_size
            ),
        )

    def intent_cursor(self) -> IntentCursor | None:
        return self._w.read("ddb.get_intent_cursor", self._real.intent_cursor)

    def save_intent_cursor(self, cursor: IntentCursor | None) -> None:
        self._w.call("ddb.save_intent_cursor", lambda: self._real.save_intent_cursor(cursor))

    def flag(self, record: EffectRecord, *, now: int) -> bool:
        return self._w.call("ddb.flag", lambda: self._real.flag(record, now=now))


class Steps:
    """:class:`functions.core.ports.steps.StepStore`: the real
    :class:`~functions.core.adapters.dynamodb_steps.DynamoDbSteps` (the world counts the
    runs it starts from the committed writes)."""

    def __init__(self, world: World) -> None:
        self._w = world
        self._real = DynamoDbSteps(client=world.client, table_name=TABLE_NAME)

    def get(self, delivery_id: str, name: str) -> StepRecord | None:
        record = self._w.read("ddb.step_get", lambda: self._real.get(delivery_id, name))
        if self._w.at_attempt_point is not None:
            self._w.at_attempt_point(delivery_id)
        return record

    def start(
        self, delivery_id: str, name: str, *, now: int, expires_at: int, label: str = ""
    ) -> StepRecord | None:
        return self._w.call(
            "ddb.step_start",
            lambda: self._real.start(
                delivery_id, name, now=now, expires_at=expires_at, label=label
            ),
        )

    def record_failed(
        self, delivery_id: str, name: str, *, run: int, now: int, error: str = ""
    ) -> bool:
        return self._w.call(
            "ddb.step_failed",
            lambda: self._real.record_failed(delivery_id, name, run=run, now=now, error=error),
        )

    def record_result(
        self, delivery_id: str, name: str, *, result: StoredResult, now: int
    ) -> StepRecord | None:
        return self._w.call(
            "ddb.step_result",
            lambda: self._real.record_result(delivery_id, name, result=result, now=now),
        )


class PackageRecords:
    """:class:`functions.core.ports.package_record.PackageRecordStore`: the real
    :class:`~functions.core.adapters.dynamodb_package_record.DynamoDbPackageRecords`
    (a simulated package is small: its content is kept inline, and the processor is
    given no object store, as for its steps)."""

    def __init__(self, world: World) -> None:
        self._w = world
        self._real = DynamoDbPackageRecords(client=world.client, table_name=TABLE_NAME)

    def get(self, delivery_id: str) -> PackageRecord | None:
        return self._w.read("ddb.package_get", lambda: self._real.get(delivery_id))

    def record(
        self, claim: Claim, record: PackageRecord, *, expires_at: int
    ) -> PackageRecord | None:
        return self._w.call(
            "ddb.package_record",
            lambda: self._real.record(claim, record, expires_at=expires_at),
        )

    def record_refetch(self, delivery_id: str, *, digest: str, now: int) -> None:
        self._w.call(
            "ddb.package_refetch",
            lambda: self._real.record_refetch(delivery_id, digest=digest, now=now),
        )


class Budget:
    """:class:`functions.core.ports.budget.BudgetStore`: the real
    :class:`~functions.core.adapters.dynamodb_budget.DynamoDbBudget`, with the world's
    daily limit as its configured default."""

    def __init__(self, world: World) -> None:
        self._w = world

    @property
    def _real(self) -> DynamoDbBudget:
        w = self._w
        return DynamoDbBudget(client=w.client, table_name=TABLE_NAME, default_limit=w.budget_limit)

    def reserve(self, day: str, tokens: int, *, reservation_id: str) -> bool:
        w = self._w
        written = self._send(
            "ddb.budget_reserve",
            lambda: self._real.reserve(day, tokens, reservation_id=reservation_id),
            transition="budget_reserve",
        )
        delivery = w.notes.delivery
        if not written and delivery is not None:
            largest = w.truth.refused_reservation.get(delivery, 0)
            w.truth.refused_reservation[delivery] = max(largest, tokens)
        return written

    def settle(self, day: str, *, reservation_id: str, reserved: int, used: int) -> None:
        self._send(
            "ddb.budget_settle",
            lambda: self._real.settle(
                day, reservation_id=reservation_id, reserved=reserved, used=used
            ),
        )

    def keep(self, day: str, *, reservation_id: str) -> None:
        self._send("ddb.budget_keep", lambda: self._real.keep(day, reservation_id=reservation_id))

    def _send(self, site: str, op: Callable[[], T], *, transition: str | None = None) -> T:
        """The adapter sends a write that applies once again while its outcome is
        unknown (twice in all): a lost answer at this port is sent once more."""
        try:
            return self._w.call(site, op, transition=transition)
        except StorageUnavailable:
            return self._w.call(site, op, transition=transition)

    def set_limit(self, day: str, tokens: int) -> None:
        w = self._w
        w.budget_limit = tokens
        self._real.set_limit(day, tokens)

    def get(self, day: str) -> BudgetDay:
        return self._w.read("ddb.budget_get", lambda: self._real.get(day))


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
