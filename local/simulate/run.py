"""One seed: the whole pipeline on the simulated world, event by event on a virtual clock.

RelayLink (signed attempts, its retries and duplicates) -> the REAL receiver use case
(:class:`~functions.core.accept.AcceptDelivery`) -> the table's stream -> the REAL
relay (:func:`functions.relay.handler.relay`) -> SQS -> the REAL worker batch
(:func:`functions.core.batch.process_batch`, :class:`~functions.core.process.Processor`,
the effect ledger and steps, the shipped workflow over its real adapters) -> the REAL
reconciler (:func:`functions.core.reconcile.reconcile`) every five minutes, and operator
visits that resolve effects in doubt (truthfully: they ask the far side), requeue failed
deliveries and redrive the dead-letter queue (the operator commands' steps, through the
same ports). Then, for some seeds, two weeks pass: TTL deletes rows late and in any
order, dead letters outlive their items, and a late operator acts on what is left.

The worker batch runs inline (``process_batch(..., inline=True)``): every step on this
thread, on one event loop reused by every batch, in an order that replays. It runs the
production's concurrency (``worker_batch_concurrency``'s default, the whole batch): messages
interleave at their awaits (the package fetch, the workflow's thread), so batch-mates
hold their claims while one of them runs, and die with it when it kills the invocation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import heapq
import json
import logging
import math
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from functions.core import settings_table
from functions.core.accept import AcceptDelivery
from functions.core.adapters.archive_s3 import S3Archive
from functions.core.adapters.notifier_http import HttpNotifier
from functions.core.approval import ApprovalPolicy, DecideOutcome, decide
from functions.core.batch import BatchLimits, InlineExecutor, QueueMessage, process_batch
from functions.core.budget import DAY_SECONDS, TokenBudget, next_day_starts
from functions.core.deadline import Deadline
from functions.core.effects import EffectMode, outcome_mode
from functions.core.errors import BudgetExhausted, ProcessingError
from functions.core.event_source_limits import (
    RELAY_BATCH_SIZE,
    RELAY_RETRY_ATTEMPTS,
    VISIBILITY_TIMEOUT_FACTOR,
    WORKER_BATCH_SIZE,
)
from functions.core.models import State, WorkItem
from functions.core.observability import logger
from functions.core.package_record import PackageStorage
from functions.core.ports.approvals import ApprovalDecision, Decision
from functions.core.ports.effects import EffectStatus
from functions.core.ports.workflow import Ledger, Workflow
from functions.core.process import MAX_QUEUE_DELAY_SECONDS, ProcessConfig, Processor
from functions.core.reconcile import ReconcileConfig, reconcile
from functions.core.signature import SigningSecret
from functions.core.steps import StepStorage
from functions.relay.handler import Deps as RelayDeps
from functions.relay.handler import relay
from functions.worker.settings import DEADLINE_MARGIN_SECONDS, message_seconds
from functions.workflows import wiring
from functions.workflows.adapters.alert_http import HttpAlerts
from functions.workflows.adapters.alert_sns import SnsAlerts
from functions.workflows.adapters.bedrock_converse import BedrockConverse
from functions.workflows.agent import ALERT_EFFECT, ALERT_HTTP_EFFECT, AgentSettings, AgentWorkflow
from functions.workflows.archive import ARCHIVE_EFFECT, ArchiveWorkflow
from functions.workflows.notify import NOTIFY_EFFECT, NotifyWorkflow
from infra.schema import max_receive_count_for
from local.simulate import faults
from local.simulate.approvals import DECIDED_BY_PERSON, Approvals, ApprovalTruth, Choice
from local.simulate.far_side import (
    FakeBedrockClient,
    FakeOpener,
    FakeS3Client,
    FakeSnsClient,
    package_source,
    ticket_tool,
)
from local.simulate.faults import Fault, Killed, Kind
from local.simulate.invariants import check
from local.simulate.schedule import OTHER_BYTES, OVERLAP, OVERLAP_HOLDER_DIES, SENDER, Schedule
from local.simulate.world import (
    OPEN,
    Budget,
    Claims,
    Effects,
    Inbox,
    Metrics,
    PackageRecords,
    Queue,
    ReceivedLog,
    Steps,
    World,
)
from local.testkit.builders import MCP_URL, SECRET, delivery_body, signed_headers

WORKFLOWS: Final = ("archive", "notify", "agent")
# Effects each workflow applies, by the far side that acts for them.
EFFECTS: Final[Mapping[str, tuple[str, ...]]] = {
    "archive": (),  # its archive is the package record (invariant: package_recorded)
    "notify": (ARCHIVE_EFFECT, NOTIFY_EFFECT),
    "agent": (ARCHIVE_EFFECT, ALERT_EFFECT, ALERT_HTTP_EFFECT),
}
WORKER_TIMEOUT_SECONDS: Final = 180  # infra/config.py's default
RECEIVER_TIMEOUT_SECONDS: Final = 8
RELAY_TIMEOUT_SECONDS: Final = 60
RECONCILER_TIMEOUT_SECONDS: Final = 60
RECONCILE_EVERY_SECONDS: Final = 300
RECEIVED_AGE_SECONDS: Final = settings_table.received_age_seconds(
    pending_age_seconds=settings_table.RECONCILE_PENDING_AGE_SECONDS.default,
    lease=settings_table.WORKER_LEASE_SECONDS.default,
)
RETENTION_SECONDS: Final = settings_table.INBOX_RETENTION_DAYS.default * DAY_SECONDS
SENDER_ATTEMPTS: Final = 8  # RelayLink's retries, 30 s doubling (docs/contract.md)
MAIN_PHASE_SECONDS: Final = 3 * DAY_SECONDS  # the retry horizon, an outage and a requeue
LATE_PHASE_SECONDS: Final = 4 * DAY_SECONDS  # TTL lags, a late visit, then quiet
MAX_STEPS: Final = 3000
BATCH_WINDOW_SECONDS: Final = 5.0
BUDGET: Final = BudgetExhausted.code
# How long a hanging request waits before its client gives up (the wiring's read
# timeouts; Bedrock's 45 s, twice with its retry; the MCP client's 10 s).
HANG_SECONDS: Final = {"model": 90.0, "mcp": 10.0}
SEND_WINDOW_SECONDS: Final = 20.0
DAILY_BUDGET: Final = 1_000_000
# Operator actions, as bits of an operator visit's value.
RESOLVE: Final = 1
REQUEUE: Final = 2
REDRIVE: Final = 4  # relaylink-receiver redrive: reset, send, delete the letter
CONSOLE_REDRIVE: Final = 8  # SQS's "Start DLQ redrive": letters move back with their marks
ACTIONS: Final = 16
ROLES: Final = ("receiver", "worker-a", "worker-b", "reconciler")
SKEW_BOUND: Final = 30  # seconds a process's clock may be off
# A queue message's fields: what a dead letter's attributes may fill when SQS redrives it.
MESSAGE_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(QueueMessage))


_LOOP: list[asyncio.AbstractEventLoop] = []  # this process's one loop, made on first use


def _inline_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    loop.set_default_executor(InlineExecutor())
    return loop


def run_batch(
    batch: Coroutine[Any, Any, list[str]], loop: asyncio.AbstractEventLoop | None = None
) -> list[str]:
    """Run one worker batch to its end on this process's loop (or ``loop``), every step
    on this thread (the loop's default executor runs each call at once, so ``to_thread``
    does too). A batch that dies (:class:`Killed`) leaves its other messages' tasks
    suspended: they are cancelled, as ``asyncio.run`` would, so none runs on in a later
    batch."""
    if loop is None:
        if not _LOOP:
            _LOOP.append(_inline_loop())
        loop = _LOOP[0]
    try:
        return loop.run_until_complete(batch)
    except BaseException:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(_settled(left))
        raise


async def _settled(tasks: set[asyncio.Task[Any]]) -> None:
    await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(frozen=True, slots=True)
class SeedResult:
    """What one seed did and what it broke."""

    workflow: str
    seed: int
    violations: tuple[str, ...]
    faults: tuple[Fault, ...]
    counts: Mapping[str, int]
    # The run's outcome as canonical JSON (faults, violations, the table, the far sides):
    # the same seed gives the same bytes.
    transcript: str = ""

    @property
    def passed(self) -> bool:
        return not self.violations


class _Secrets:
    def __init__(self) -> None:
        self._secrets = [SigningSecret.parse(SECRET)]

    def current(self) -> Sequence[SigningSecret]:
        return self._secrets


class _ObservedLedger:
    """The real ledger, passed through; it tells the world how each effect is declared
    (a repeatable effect may apply twice; a keyed one meets a far side that deduplicates)."""

    def __init__(self, ledger: Ledger, world: World) -> None:
        self._ledger = ledger
        self._world = world

    def run(self, name: str, fn: Callable[[str], object], **declared: Any) -> bool:
        side = self._world.far_side(name)
        mode = outcome_mode(
            declared.get("mode"),
            reconcile=declared.get("reconcile"),
            repeatable=bool(declared.get("repeatable")),
        )
        if mode is EffectMode.REPEATABLE:
            side.repeatable = True
        if mode is EffectMode.KEYED:
            side.dedup = True  # the contract a keyed effect relies on
        ran = self._ledger.run(name, fn, **declared)
        # The attempt went past this effect: applied now or before (the invariant
        # effect_applied holds a completed delivery to it).
        owner = self._world.notes.owner or ""
        self._world.history.ran_effects.setdefault(owner, set()).add(
            (self._ledger.delivery_id, name)
        )
        return ran

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


class _ObservedWorkflow:
    def __init__(self, workflow: Workflow, world: World) -> None:
        self._workflow = workflow
        self._world = world

    def run(self, work: WorkItem, package: Any, effects: Ledger) -> None:
        packages = self._world.history.packages
        packages.setdefault(work.delivery_id, set()).add(package.digest())
        observed = cast(Ledger, _ObservedLedger(effects, self._world))
        self._workflow.run(work, package, observed)


def _retries(config: Any) -> int:
    return int((config.retries or {}).get("total_max_attempts", 1))


def build_workflow(
    name: str,
    world: World,
    metrics: Metrics,
    *,
    budget: int,
    approvals: Approvals | None = None,
    approval_seconds: int = 0,
    tools: bool = False,
) -> Workflow:
    """A shipped workflow on its real adapters, each over a fake transport; the agent's
    alert waits for a person when ``approvals`` is given (for ``approval_seconds``)."""
    archive = S3Archive(client=cast(Any, FakeS3Client(world, ARCHIVE_EFFECT)), bucket="archive")
    if name == "archive":
        return ArchiveWorkflow()
    if name == "notify":
        notifier = HttpNotifier(url="https://notify.invalid/hook", timeout_seconds=10)
        notifier._opener = cast(Any, FakeOpener(world, NOTIFY_EFFECT))
        return NotifyWorkflow(archive=archive, notifier=notifier)
    webhook = HttpAlerts(url="https://alerts.invalid/hook", timeout_seconds=10)
    webhook._opener = cast(Any, FakeOpener(world, ALERT_HTTP_EFFECT))
    topic = SnsAlerts(
        client=cast(Any, FakeSnsClient(world, ALERT_EFFECT, attempts=_retries(wiring.SNS_CONFIG))),
        topic_arn="arn:aws:sns:eu-west-1:123456789012:alerts",
    )
    bedrock = FakeBedrockClient(world, attempts=_retries(wiring.BEDROCK_CONFIG))
    settings = AgentSettings(
        daily_token_budget=budget,
        alert_url="https://alerts.invalid/hook",
        approval=ApprovalPolicy(alert=approvals is not None),
        approval_timeout_minutes=approval_seconds / 60,
    )
    return AgentWorkflow(
        settings=settings,
        archive=archive,
        model=BedrockConverse(client=cast(Any, bedrock), model_id=settings.model_id),
        topic=topic,
        webhook=webhook,
        budget=TokenBudget(Budget(world), new_id=world.new_reservation_id),
        clock=world,
        metrics=metrics,
        approvals=approvals,
        tools=(ticket_tool(world),) if tools else (),
    )


@dataclass(order=True)
class _Send:
    at: float
    seq: int
    index: int = field(compare=False)
    attempt: int = field(compare=False)
    other: bool = field(default=False, compare=False)  # other bytes under its id


class Simulation:
    """One seed of one workflow."""

    def __init__(
        self,
        workflow: str,
        seed: int,
        *,
        deliveries: int = 4,
        replay: Sequence[Fault] | None = None,
    ) -> None:
        if workflow not in WORKFLOWS:
            raise ValueError(f"workflow must be one of {', '.join(WORKFLOWS)}")
        self.workflow = workflow
        self.schedule = Schedule(seed, replay)
        self.world = world = World(seed, self.schedule)
        world.max_receives = max_receive_count_for(
            settings_table.WORKER_MAX_ATTEMPTS.default,
            retry_horizon_seconds=settings_table.WORKER_RETRY_HORIZON_HOURS.env_default,
        )
        world.visibility_seconds = WORKER_TIMEOUT_SECONDS * VISIBILITY_TIMEOUT_FACTOR
        self.metrics = Metrics()
        self._configure()
        # The approval records as committed; the store, when the alert waits for a person.
        self.approval_truth = ApprovalTruth(alert_waits=bool(self.approval_seconds))
        world.dynamodb.listen(self.approval_truth.committed)
        self.approvals = Approvals(world) if self.approval_seconds else None
        self.decisions: list[tuple[float, int, str, str, Choice]] = []
        self.claims = Claims(world)
        self.queue = Queue(world)
        self.accept = AcceptDelivery(
            inbox=Inbox(world), secrets=_Secrets(), clock=world, retention_seconds=RETENTION_SECONDS
        )
        workflow_impl = build_workflow(
            workflow,
            world,
            self.metrics,
            budget=self.budget,
            approvals=self.approvals,
            approval_seconds=self.approval_seconds,
            tools=self.tools,
        )
        self.processor = Processor(
            claims=self.claims,
            effects=Effects(world),
            workflow=_ObservedWorkflow(workflow_impl, world),
            clock=world,
            metrics=self.metrics,
            config=ProcessConfig(
                max_attempts=settings_table.WORKER_MAX_ATTEMPTS.default,
                lease_seconds=settings_table.WORKER_LEASE_SECONDS.default,
                retry_horizon_seconds=settings_table.WORKER_RETRY_HORIZON_HOURS.env_default,
            ),
            new_owner=world.new_owner,
            steps=StepStorage(records=Steps(world), metrics=self.metrics),
            packages=PackageStorage(PackageRecords(world)),
        )
        world.max_attempts = self.processor.config.max_attempts
        world.lost_attempts_allowed = self.processor.config.runs_alone_after
        self.limits = BatchLimits(
            concurrency=settings_table.WORKER_BATCH_SIZE.default,
            message_seconds=message_seconds(
                mcp_timeout_seconds=settings_table.MCP_TIMEOUT_SECONDS.default,
                workflow_seconds=settings_table.WORKER_WORKFLOW_SECONDS.default,
            ),
        )
        self.deliveries = self._load(deliveries)
        self.sends: list[_Send] = []
        self._seq = 0
        for index, (_id, _body, at) in enumerate(self.deliveries):
            self._send_at(at, index, 1)
        self._relay_at: float | None = None
        self._steps = 0
        self._worker_turn = 0
        self._overlapping = False  # the other container runs a delivery of a stalled one
        self._apart_dies = False  # ... and dies right after its claim
        world.at_attempt_point = self._maybe_overlap
        self.cut = False  # the step bound ended a phase

    # --- setup -----------------------------------------------------------------------

    def _configure(self) -> None:
        """The seed's configuration faults: skews, budget, outages, dedup, time, operators."""
        world, schedule = self.world, self.schedule
        self.skew = {
            role: schedule.choose(
                f"config.skew.{role}", Kind.CLOCK_SKEW, 0.3, range(-SKEW_BOUND, SKEW_BOUND + 1)
            )
            for role in ROLES
        }
        self.budget = DAILY_BUDGET
        if self.workflow == "agent":
            tiny = schedule.choose("config.budget", Kind.TINY_BUDGET, 0.03, range(50, 800))
            tight = schedule.choose("config.budget", Kind.TIGHT_BUDGET, 0.05, range(2000, 8000))
            self.budget = tiny or tight or DAILY_BUDGET
        world.budget_limit = self.budget
        names = (*EFFECTS[self.workflow], "mcp", *(("model",) if self.workflow == "agent" else ()))
        for name in names:
            if name in (NOTIFY_EFFECT, ALERT_HTTP_EFFECT):
                world.far_side(name).dedup = not schedule.choose(
                    f"config.dedup.{name}", Kind.NO_DEDUP, 0.5, range(1, 2)
                )
        # One far side down for hours (a long one outlasts the retry horizon).
        length = schedule.choose("config.outage", Kind.OUTAGE, 0.04, range(2 * 3600, 30 * 3600))
        if length:
            start = world.t + world.rng.uniform(0, SEND_WINDOW_SECONDS)  # as the load arrives
            side = world.far_side(names[length % len(names)])
            side.outage = (start, start + length)
            # Half of them are brownouts: each request hangs until the client gives up.
            side.outage_seconds = HANG_SECONDS.get(side.name, 10.0) if length % 2 else 0.0
        # One far side slow for hours: batches run out of time, and messages return
        # unstarted (the event source receives them again at once).
        slow = schedule.choose("config.slow", Kind.SLOW, 0.05, range(30, 90))
        if slow:
            start = world.t + world.rng.uniform(0, 3600)
            name = names[slow % len(names)]
            world.far_side(name).slow = (start, start + world.rng.uniform(3600, 30 * 3600), slow)
        if self.workflow == "agent":
            world.far_side(ALERT_EFFECT).dedup = False  # a standard SNS topic cannot
            world.far_side("model").dedup = False  # every call runs the model
        # The agent's alert waits for a person, for 1 to 6 hours.
        self.approval_seconds = 0
        if self.workflow == "agent":
            self.approval_seconds = schedule.choose(
                "config.approval", Kind.APPROVAL, 0.4, range(3600, 6 * 3600 + 1, 60), later=True
            )
        # Half of those offer the model an acting tool, whose call waits for a person too.
        self.tools = bool(self.approval_seconds) and bool(
            schedule.choose("config.tools", Kind.TOOLS, 0.5, range(1, 2), later=True)
        )
        # The MCP server answers a package id with other content from its second fetch.
        self.packages_change = bool(
            schedule.choose(
                "config.package_changes", Kind.PACKAGE_CHANGES, 0.3, range(1, 2), later=True
            )
        )
        self.days_pass = schedule.choose(
            "config.days_pass", Kind.DAYS_PASS, 0.3, range(14 * DAY_SECONDS, 16 * DAY_SECONDS, 60)
        )
        self.visits: list[tuple[float, int]] = []
        for visit in range(3):
            value = schedule.choose(
                f"config.operator.{visit}", Kind.OPERATOR, 0.5, range(1, 36 * 3600 * ACTIONS)
            )
            if value:
                self.visits.append((world.t + value // ACTIONS, value % ACTIONS))
        late = schedule.choose(
            "config.operator.late", Kind.OPERATOR, 0.8, range(1, DAY_SECONDS * ACTIONS)
        )
        self.late_visit = (late // ACTIONS, late % ACTIONS) if late else None
        self.visits.sort()

    def _load(self, count: int) -> list[tuple[str, bytes, float]]:
        """The deliveries: ids, bodies and first send times; some packages are missing."""
        world = self.world
        load = []
        self.missing: set[str] = set()
        for index in range(count):
            delivery_id = str(uuid.UUID(int=world.rng.getrandbits(128), version=4))
            package_id = f"pkg_{index:04d}"
            if world.rng.random() < 0.05:
                self.missing.add(package_id)
            body = delivery_body(delivery_id, package_id=package_id, mcp_url=MCP_URL)
            load.append((delivery_id, body, world.t + world.rng.uniform(0, SEND_WINDOW_SECONDS)))
        self.source = package_source(world, frozenset(self.missing), changing=self.packages_change)
        return load

    # --- the event loop ------------------------------------------------------------------

    def run(self) -> None:
        world = self.world
        # The core logs every attempt; a million seeds need none of it.
        lines = logging.getLogger(logger.name)
        previous = lines.level
        lines.setLevel(logging.CRITICAL)
        try:
            self._phase(world.started_at + MAIN_PHASE_SECONDS)
            # Two weeks pass over finished work, or over deliveries that wait for the
            # budget; never over work the main phase did not get to finish.
            unfinished = any(
                item.state in OPEN and item.last_error != BUDGET for item in world.inbox.values()
            )
            if self.days_pass and not unfinished:
                world.t = max(world.t, world.started_at + self.days_pass)
                if self.late_visit is not None:
                    offset, actions = self.late_visit
                    self.visits.append((world.t + offset, actions))
                self._phase(world.t + LATE_PHASE_SECONDS)
        finally:
            lines.setLevel(previous)

    def _phase(self, until: float) -> None:
        world = self.world
        while True:
            if self._steps >= MAX_STEPS:
                self.cut = True
                return
            self._skip_budget_night(until)
            due = self._next(until)
            if due is None:
                return
            at, action = due
            world.t = max(world.t, at)
            world.sweep()
            world.drop_old_dead_letters()
            self._steps += 1
            action()

    def _next(self, until: float) -> tuple[float, Callable[[], None]] | None:
        world = self.world
        candidates: list[tuple[float, int, Callable[[], None]]] = []
        if self.sends:
            candidates.append((self.sends[0].at, 0, self._send))
        if world.stream:
            if self._relay_at is None:
                self._relay_at = world.t + 0.5
            candidates.append((self._relay_at, 1, self._relay))
        if self.visits and self.visits[0][0] <= until:
            candidates.append((self.visits[0][0], 2, self._visit))
        self._schedule_decisions()
        if self.decisions:
            candidates.append((self.decisions[0][0], 2, self._decide))
        visible = world.next_visible()
        if visible is not None:
            # The event source's batching window: messages visible within it share a batch.
            candidates.append((visible + BATCH_WINDOW_SECONDS, 3, self._worker))
        wake = self._reconciler_wake()
        if wake is not None:
            grid = math.ceil(max(wake, world.t) / RECONCILE_EVERY_SECONDS) * RECONCILE_EVERY_SECONDS
            candidates.append((float(grid), 4, self._reconcile))
        if not candidates:
            return None
        at, _order, action = min(candidates, key=lambda c: (c[0], c[1]))
        if at > until:
            return None
        return at, action

    # --- RelayLink and the receiver ----------------------------------------------------

    def _send_at(self, at: float, index: int, attempt: int, *, other: bool = False) -> None:
        self._seq += 1
        heapq.heappush(self.sends, _Send(at, self._seq, index, attempt, other))

    def _send(self) -> None:
        world = self.world
        send = heapq.heappop(self.sends)
        if send.other:
            self._send_other_bytes(send)
            return
        delivery_id, body, _at = self.deliveries[send.index]
        world.begin("receiver", skew=self.skew["receiver"], seconds=RECEIVER_TIMEOUT_SECONDS)
        headers = signed_headers(
            body, delivery_id=delivery_id, timestamp=int(world.t), attempt=send.attempt
        )
        try:
            status = self.accept({k.lower(): v for k, v in headers.items()}, body).status
        except Killed:
            status = 0
        if 200 <= status < 300:
            if world.draw("relaylink.send", SENDER) is not None:
                self._send_at(world.t + world.rng.uniform(1, 600), send.index, send.attempt + 1)
            if world.draw("relaylink.other_bytes", OTHER_BYTES, later=True) is not None:
                at = world.t + world.rng.uniform(1, 3600)
                self._send_at(at, send.index, send.attempt + 1, other=True)
        elif send.attempt < SENDER_ATTEMPTS:
            self._send_at(world.t + 30 * 2 ** (send.attempt - 1), send.index, send.attempt + 1)

    def _send_other_bytes(self, send: _Send) -> None:
        """Other bytes, correctly signed, under a delivery id already accepted: they must
        end quarantined (or unanswered), and the accepted item must not change."""
        world = self.world
        delivery_id, _body, _at = self.deliveries[send.index]
        other = delivery_body(
            delivery_id, package_id=f"pkg_other_{send.index:04d}", mcp_url=MCP_URL
        )
        world.begin("receiver", skew=self.skew["receiver"], seconds=RECEIVER_TIMEOUT_SECONDS)
        headers = signed_headers(
            other, delivery_id=delivery_id, timestamp=int(world.t), attempt=send.attempt
        )
        before = world.inbox.get(delivery_id)
        try:
            outcome = self.accept({k.lower(): v for k, v in headers.items()}, other).outcome.value
        except Killed:
            outcome = "no answer"
        after = world.inbox.get(delivery_id)
        if before is not None and after != before:
            world.history.other_bytes.append(
                f"{delivery_id}: other bytes under its id changed the accepted item ({outcome})"
            )
        elif before is not None and outcome not in ("quarantined", "unavailable", "no answer"):
            world.history.other_bytes.append(
                f"{delivery_id}: other bytes under its id answered {outcome}"
            )

    def _relay(self) -> None:
        world = self.world
        self._relay_at = None
        batch = world.stream[:RELAY_BATCH_SIZE]
        records = []
        for number, entry in enumerate(batch):
            records.append(
                {
                    "eventName": "INSERT",
                    "eventID": str(number),
                    "dynamodb": {"SequenceNumber": str(number), "NewImage": entry["image"]},
                }
            )
        world.begin("relay", skew=0, seconds=RELAY_TIMEOUT_SECONDS)
        deps = RelayDeps(queue=self.queue, metrics=cast(Any, self.metrics))
        sent_before, faults_before = len(world.history.enqueued), len(self.schedule.injected)
        try:
            failed = {int(sequence) for sequence in relay(records, deps)}
        except Killed:
            failed = set(range(len(batch)))
        self._check_relay(
            batch, failed, sent_before, faulted=faults_before < len(self.schedule.injected)
        )
        keep = []
        for number, entry in enumerate(batch):
            tries = entry.get("tries", 0) + 1
            if number in failed and tries < RELAY_RETRY_ATTEMPTS:
                keep.append({**entry, "tries": tries})
            # else relayed, or given up: the failure queue, and the reconciler finds it
        world.stream[: len(batch)] = keep
        if keep:
            self._relay_at = world.t + 2 ** min(keep[0]["tries"], 6)

    def _check_relay(
        self, batch: Sequence[dict[str, Any]], failed: set[int], sent_before: int, *, faulted: bool
    ) -> None:
        """The relay's answer against the queue: a record it reports taken reached the
        queue in this invocation; one it reports failed failed for an injected fault."""
        history = self.world.history
        sent = {e.delivery_id for e in history.enqueued[sent_before:] if e.role == "relay"}
        for number, entry in enumerate(batch):
            delivery_id = entry["delivery_id"]
            if number not in failed and delivery_id not in sent:
                history.relay_lies.append(f"{delivery_id}: reported sent, never reached the queue")
            elif number in failed and not faulted:
                history.relay_lies.append(
                    f"{delivery_id}: reported failed, and no fault was injected"
                )

    # --- the worker ----------------------------------------------------------------------

    def _skip_budget_night(self, until: float) -> None:
        """When every open delivery only waits for the next budget day and nothing else
        is due before it, go to its start: each receive before it would only defer the
        deliveries again (each claim given back), which changes nothing else."""
        world = self.world
        day_starts = next_day_starts(int(world.t))
        if day_starts - world.t <= MAX_QUEUE_DELAY_SECONDS or day_starts > until:
            return
        if world.stream or (self.sends and self.sends[0].at < day_starts):
            return
        if (self.visits and self.visits[0][0] < day_starts) or not self._only_budget_waits():
            return
        world.t = float(day_starts)
        for message in world.work.values():
            message.visible_at = min(message.visible_at, world.t)

    def _only_budget_waits(self) -> bool:
        """Whether the open deliveries all wait for the budget, and the queue holds only
        their fresh deferral copies."""
        world = self.world
        open_items = [i for i in world.inbox.values() if i.state in OPEN]
        if not open_items or any(
            i.state is not State.PENDING or i.last_error != BUDGET for i in open_items
        ):
            return False
        waiting = {i.delivery_id for i in open_items}
        for message in world.work.values():
            try:
                delivery_id = WorkItem.from_json(message.body).delivery_id
            except ValueError:
                return False
            if delivery_id not in waiting or message.receives:
                return False
        return True

    def _worker(self) -> None:
        world = self.world
        messages = world.receive(WORKER_BATCH_SIZE)
        if not messages:
            return
        self._worker_turn += 1
        self._batch(messages, ROLES[1 + self._worker_turn % 2])

    def _maybe_overlap(self, delivery_id: str) -> None:
        """Right after a worker's claim or read of one of the delivery's records: maybe its
        process stalls there past its lease, and the other worker container, handed a
        copy of the message, claims the delivery and runs it before the first goes on
        (two attempts at once: the race a step recorder or a ledger must survive)."""
        world = self.world
        if self._overlapping and self._apart_dies:
            self._apart_dies = False
            world.kill()  # the other container, holding its fresh claim
        stalled = world.inv
        item = world.inbox.get(delivery_id)
        work = None if item is None else item.work_item()
        if self._overlapping or stalled.role != "worker" or stalled.dead or work is None:
            return
        if item is None or item.state is not State.PROCESSING:
            return
        if world.draw("worker.overlap", OVERLAP, later=True) is None:
            return
        stall = settings_table.WORKER_LEASE_SECONDS.default + 2 * SKEW_BOUND + 1
        stalled.ends_at += stall  # a stopped process: its own timeout stops too
        world.t += stall
        world.enqueue(work.to_json())
        message = list(world.work.values())[-1]  # the copy just sent
        message.receives += 1
        message.visible_at = world.t + world.visibility_seconds
        message.receipt = f"{message.message_id}/{message.receives}"
        other = ROLES[1 + (self._worker_turn + 1) % 2]
        failures: list[BaseException] = []

        def apart() -> None:
            loop = _inline_loop()
            try:
                self._batch([message], other, loop=loop)
            except BaseException as exc:  # noqa: BLE001 (re-raised on the stalled thread)
                failures.append(exc)
            finally:
                loop.close()

        dies = world.draw("worker.overlap.holder_dies", OVERLAP_HOLDER_DIES, later=True)
        self._overlapping, self._apart_dies = True, dies is not None
        try:
            # Its own thread: the stalled batch's loop is running on this one.
            thread = threading.Thread(target=apart, name="worker-apart")
            thread.start()
            thread.join()
        finally:
            self._overlapping = self._apart_dies = False
            world.inv = stalled
        if dies is not None:
            # The dead holder's lease runs out too before the stalled attempt goes on:
            # only the lease's owner condition keeps its late writes out.
            stalled.ends_at += stall
            world.t += stall
        world.history.overlaps[delivery_id] += 1
        if failures:
            raise failures[0]

    def _batch(
        self,
        messages: Sequence[Any],
        role: str,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """One invocation of worker container ``role`` over ``messages``."""
        world = self.world
        inv = world.begin("worker", skew=self.skew[role], seconds=WORKER_TIMEOUT_SECONDS)
        batch = []
        for message in messages:
            attached = {k: v for k, v in message.attributes.items() if k in MESSAGE_FIELDS}
            batch.append(
                QueueMessage(
                    message.message_id, message.receipt, message.body, message.mark, **attached
                )
            )
            if message.mark is not None:
                try:
                    delivery_id = WorkItem.from_json(message.body).delivery_id
                except ValueError:
                    continue
                inv.marked[delivery_id] = message.generation
        deadline = Deadline(inv.ends_at - DEADLINE_MARGIN_SECONDS, world.monotonic)
        try:
            failed = set(
                run_batch(
                    process_batch(
                        self.processor,
                        self.queue,
                        self.source,
                        batch,
                        limits=self.limits,
                        deadline=deadline,
                        inline=True,
                    ),
                    loop,
                )
            )
        except Killed:
            # No answer: every message of the batch comes back after its visibility, and
            # each claim the invocation held ends with it (innocently, but for the step
            # that was running).
            world.died_holding()
            return
        world.delete(m.message_id for m in messages if m.message_id not in failed)

    # --- the reconciler ------------------------------------------------------------------

    def _reconciler_wake(self) -> float | None:
        """When the reconciler next has something to do (None: nothing, ever, as things
        stand): the world skips the runs in between, which would change nothing."""
        world = self.world
        slack = 60  # the reconciler's clock may be behind
        wake: float | None = None
        for item in world.inbox.values():
            if item.state is State.AWAITING_APPROVAL and item.approval_deadline is not None:
                at = item.approval_deadline + 1  # the approval pass denies it by the timeout
                wake = at + slack if wake is None else min(wake, at + slack)
            if item.state not in OPEN:
                continue
            if item.delivery_id in world.unlisted:
                at = item.received_at + RECEIVED_AGE_SECONDS
            elif item.state is State.PENDING:
                at = (
                    item.state_changed_at + settings_table.RECONCILE_PENDING_AGE_SECONDS.default + 1
                )
            else:
                at = (item.lease_until or 0) + 1
            wake = at + slack if wake is None else min(wake, at + slack)
        for record in world.effects.values():
            if record.status is EffectStatus.INTENT and record.flagged_at is None:
                at = (
                    record.intent_at
                    + settings_table.RECONCILE_EFFECT_AGE_SECONDS.default
                    + 1
                    + slack
                )
                wake = at if wake is None else min(wake, at)
        return wake

    def _catch_up_watermark(self) -> None:
        """The runs the world skipped (they had nothing to do) moved the received log's
        watermark: move it as far, so that this run does not page through their windows.
        They had nothing to do, so no receipt before the first one still unlisted."""
        world = self.world
        if world.watermark is None:
            return
        skipped = int(world.t) - RECONCILE_EVERY_SECONDS - RECEIVED_AGE_SECONDS - 2 * SKEW_BOUND
        unlisted = [
            item.received_at
            for item in world.inbox.values()
            if item.delivery_id in world.unlisted and item.state in OPEN
        ]
        world.watermark = max(world.watermark, min([skipped, *unlisted]))

    def _reconcile(self) -> None:
        world = self.world
        self._catch_up_watermark()
        inv = world.begin("reconciler", skew=self.skew["reconciler"], seconds=60)
        with contextlib.suppress(Killed, ProcessingError):  # the next run continues
            reconcile(
                store=self.claims,
                received=ReceivedLog(world),
                effects=Effects(world),
                queue=self.queue,
                clock=world,
                metrics=self.metrics,
                config=ReconcileConfig(
                    pending_age_seconds=settings_table.RECONCILE_PENDING_AGE_SECONDS.default,
                    effect_age_seconds=settings_table.RECONCILE_EFFECT_AGE_SECONDS.default,
                    received_age_seconds=RECEIVED_AGE_SECONDS,
                ),
                deadline=Deadline(inv.ends_at - 5, world.monotonic),
                approvals=self.approvals,
            )
        # A run that changed nothing must not be repeated at once.
        world.t += 1

    # --- the operator ----------------------------------------------------------------------

    def _visit(self) -> None:
        world = self.world
        _at, actions = self.visits.pop(0)
        world.begin("operator", skew=0, seconds=math.inf, faulty=False)
        now = world.now()
        if actions & RESOLVE:
            self._resolve(now)
        if actions & REQUEUE:
            for item in sorted(world.inbox.values(), key=lambda i: i.delivery_id):
                work = item.work_item()
                ready = item.state is State.FAILED and work is not None
                if ready and work is not None and self.claims.reopen(item.delivery_id, now=now):
                    self.queue.send(work)
        if actions & REDRIVE:
            self._redrive(now)
        if actions & CONSOLE_REDRIVE:
            for message in list(world.dead.values()):
                del world.dead[message.message_id]
                world.enqueue(
                    message.body,
                    mark=message.mark,
                    generation=message.generation,
                    attributes=message.attributes,
                )

    def _schedule_decisions(self) -> None:
        """For each approval asked for since: what a person does about it, and when (a
        seed's draw at a site of its own; none: nobody decides, the timeout does)."""
        truth = self.approval_truth
        while truth.asked:
            record = truth.asked.pop(0)
            value = self.schedule.choose(
                "config.decision", Kind.DECISION, 0.85, range(10_000, 50_000), later=True
            )
            if not value:
                continue
            choice, share = Choice(value // 10_000), (value % 10_000) / 10_000
            if choice is Choice.LATE:
                at = record.deadline + 1 + share * 600  # before or after the timeout's pass
            else:
                at = record.requested_at + share * 0.9 * (record.deadline - record.requested_at)
            self._seq += 1
            heapq.heappush(self.decisions, (at, self._seq, record.delivery_id, record.name, choice))

    def _decide(self) -> None:
        """``approvals approve``/``deny``: the person names the proposal listed (or, for
        ``Choice.OTHER``, another one); the decision goes through the real decide path
        (faults and all), and an approval's work item is sent again, as the CLI does."""
        world = self.world
        _at, seq, delivery_id, name, choice = heapq.heappop(self.decisions)
        assert self.approvals is not None  # decisions are drawn only for asked approvals
        world.begin("operator", skew=0, seconds=RECONCILER_TIMEOUT_SECONDS)
        now = world.now()
        wanted = ApprovalDecision.DENIED if choice is Choice.DENY else ApprovalDecision.APPROVED
        with contextlib.suppress(Killed, ProcessingError):  # the person sees an error
            record = self.approvals.get(delivery_id, name)
            if record is None:
                return
            named = record.proposal_digest()
            if choice is Choice.OTHER:
                named = hashlib.sha256(f"other:{named}".encode()).hexdigest()
            decision = Decision(wanted, DECIDED_BY_PERSON, now, f"decision-{seq}", None, named)
            result = decide(self.approvals, delivery_id, name, decision)
            self.approval_truth.outcomes[choice.name.lower()][result.outcome.value] += 1
            if result.outcome is not DecideOutcome.APPLIED or wanted is not (
                ApprovalDecision.APPROVED
            ):
                return
            item = self.claims.get(delivery_id)
            work = None if item is None else item.work_item()
            if work is not None:
                self.queue.send(work)

    def _resolve(self, now: int) -> None:
        """``effects resolve``, truthfully: the operator asked the far side."""
        world = self.world
        effects = Effects(world)
        for record in sorted(world.effects.values(), key=lambda r: (r.delivery_id, r.name)):
            item = world.inbox.get(record.delivery_id)
            stale = record.intent_at < now - settings_table.RECONCILE_EFFECT_AGE_SECONDS.default
            if record.status is not EffectStatus.INTENT or not (record.flagged_at or stale):
                continue
            if item is not None and item.state is State.PROCESSING:
                continue  # effects resolve refuses: a worker may be applying it
            if world.far_side(record.name).applied[record.key]:
                effects.resolve_applied(record.delivery_id, record.name, now=now)
            else:
                effects.resolve_not_applied(record.delivery_id, record.name, now=now)

    def _redrive(self, now: int) -> None:
        """``relaylink-receiver redrive``: reset a failed delivery (only the failure a
        worker's letter names), send it unless it has expired, delete the letter."""
        world = self.world
        for message in list(world.dead.values()):
            try:
                work = WorkItem.from_json(message.body)
            except ValueError:
                continue  # malformed: it stays
            item = world.inbox.get(work.delivery_id)
            if item is not None and item.state is State.FAILED:
                failure = message.attributes.get("failure")
                self.claims.reopen(work.delivery_id, now=now, failure=failure)
                item = world.inbox.get(work.delivery_id)
            if item is not None and item.state is State.PENDING and item.expires_at > now:
                self.queue.send(work)
            del world.dead[message.message_id]

    # --- the result ------------------------------------------------------------------------

    def result(self, violations: Sequence[str]) -> SeedResult:
        counts: dict[str, int] = {}
        for fault in self.schedule.injected:
            key = faults.SUMMARY_KEYS[fault.kind]
            counts[key] = counts.get(key, 0) + 1
        for key, value in sorted(self.world.counts.items()):
            counts[key] = counts.get(key, 0) + value
        return SeedResult(
            workflow=self.workflow,
            seed=self.schedule.seed,
            violations=tuple(violations),
            faults=tuple(self.schedule.injected),
            counts=dict(sorted(counts.items())),
            transcript=self._transcript(violations, counts),
        )

    def _transcript(self, violations: Sequence[str], counts: Mapping[str, int]) -> str:
        world = self.world
        document = {
            "workflow": self.workflow,
            "seed": self.schedule.seed,
            "ended_at": round(world.t, 3),
            "faults": [str(fault) for fault in self.schedule.injected],
            "violations": list(violations),
            "counts": dict(sorted(counts.items())),
            "inbox": {
                i.delivery_id: [i.state.value, i.attempts, i.transient_failures, i.last_error]
                for i in sorted(world.inbox.values(), key=lambda i: i.delivery_id)
            },
            "effects": sorted(
                f"{d}/{n}:{r.status.value}:{r.flagged_at is not None}"
                for (d, n), r in world.effects.items()
            ),
            "far": {
                name: sorted(f"{k}:{side.applied[k]}/{side.requests[k]}" for k in side.requests)
                for name, side in sorted(world.far.items())
            },
            "dead_letters": sorted(f"{m.mark}:{m.body}" for m in world.dead.values()),
            "model_runs": dict(sorted(world.truth.model_runs.items())),
            "consumed": dict(sorted(world.truth.consumed.items())),
        }
        return json.dumps(document, sort_keys=True, separators=(",", ":"))


def run_seed(
    workflow: str, seed: int, *, deliveries: int = 4, replay: Sequence[Fault] | None = None
) -> SeedResult:
    """Run one seed (or replay a fault list) and check every invariant."""
    simulation = Simulation(workflow, seed, deliveries=deliveries, replay=replay)
    simulation.run()
    return simulation.result(check(simulation))
