"""Fault injection against the local stack: a seeded load, kills and faults, then invariants.

:func:`run_chaos` starts a :class:`~local.stack.LocalStack` and, while the RelayLink
simulator (:mod:`local.sender`) sends its load, SIGKILLs the front door and the
worker process at seeded moments and injects faults: DynamoDB throttling and
internal errors (:mod:`local.aws_emulator`), MCP 503s and responses slower than the
worker's MCP timeout (:mod:`local.mcp_server`), and relay invocations that fail
before the handler (:mod:`local.event_sources`). Then it turns the faults off, waits
until the system is quiet and checks every invariant from the table, the queues and
the notification target's effect counter. ``docs/reliability.md`` explains each
check and publishes the figures of a large run.

The load (counts derived from ``deliveries``, see :func:`plan_load`):

* genuine deliveries with the contract's retries, some duplicated (overlapping with
  the first attempt, or after its 2xx), a few packages delivered several times, and
  some ``pkg_missing...`` packages (the MCP server does not know them: ``failed``);
* same-id different-body deliveries, each sent after its original was acknowledged
  (409, a quarantine record; the original processed once, the other body never);
* forged signatures and replays of requests signed more than 300 s ago (401, never
  stored).

Kills are spread over the run: the front door's at seeded fractions of the
acknowledged deliveries, the worker's at seeded fractions of the applied effects,
so that each one lands while that process has work in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from functions.core import table_layout
from local.event_sources import INJECTED_RELAY_FAILURE
from local.sender import (
    CONNECTION_ERROR,
    TIMEOUT,
    AttemptResult,
    Delivery,
    DeliveryResult,
    Sender,
    SenderConfig,
    deliveries_of_package,
    forged_secret,
    new_package_id,
)
from local.stack import ROLES, LocalStack, Role, StackOptions

MISSING_PREFIX: Final = "pkg_missing"  # local/mcp_server.py: "not found", permanently
CONFLICT_PREFIX: Final = "pkg_conflict"  # the package id a conflicting body names
SIGNATURE_TOLERANCE_SECONDS: Final = 300  # contract section 2
DELIVERIES_PER_SHARED_PACKAGE: Final = 3
RESTART_DEADLINE_SECONDS: Final = 60.0
STALL_SECONDS: Final = 120.0
_POLL_SECONDS: Final = 0.05
# A single adversarial request is repeated until the receiver gives a verdict: kills
# come in bursts, so a fixed count of retries can fall entirely inside restarts.
_VERDICT_DEADLINE_SECONDS: Final = 60.0
_RETRYABLE: Final = frozenset({TIMEOUT, CONNECTION_ERROR, "500", "502", "503", "504"})


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    """One run. Rates are fractions; ``time_scale`` divides the sender's back-off.

    ``deadline_seconds`` bounds the wait for quiet after the load; a run that is not
    quiet by then is a violation. During the load, a part waiting for its moment
    stops waiting once no effect has been applied for ``STALL_SECONDS``.
    """

    deliveries: int = 500
    kills: int = 5
    seed: int = 0
    mcp_failure_rate: float = 0.1
    mcp_slow_rate: float = 0.02
    aws_fault_rate: float = 0.02
    relay_failure_rate: float = 0.05
    time_scale: float = 100.0
    deadline_seconds: float = 600.0
    concurrency: int = 16
    backlog: int = 100  # deliveries acknowledged ahead of the effects at most
    # Worker attempts per item (deployed: 5). Faults here are independent draws, so an
    # item exhausts its attempts with probability (per-attempt failure rate) ** this;
    # docs/reliability.md has the figure.
    max_attempts: int = 10
    duplicate_rate: float = 0.1
    adversarial_fraction: float = 0.02  # of deliveries, for each adversarial kind (min 1)

    def __post_init__(self) -> None:
        if self.deliveries < 10:
            raise ValueError("deliveries must be at least 10")
        if self.kills < 0:
            raise ValueError("kills must be >= 0")
        for rate in (
            self.mcp_failure_rate,
            self.mcp_slow_rate,
            self.aws_fault_rate,
            self.relay_failure_rate,
            self.duplicate_rate,
            self.adversarial_fraction,
        ):
            if not 0.0 <= rate <= 1.0:
                raise ValueError("rates are fractions between 0 and 1")
        if self.mcp_failure_rate + self.mcp_slow_rate >= 0.5:
            # Five failed fetches in a row exhaust an item's attempts: `failed`, legitimately.
            raise ValueError("the MCP failure and slow rates together must stay below 0.5")
        if self.time_scale <= 0 or self.deadline_seconds <= 0:
            raise ValueError("time scale and deadline must be positive")
        if min(self.concurrency, self.backlog, self.max_attempts) < 1:
            raise ValueError("concurrency, backlog and max attempts must be at least 1")


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """What will be sent. Genuine deliveries include the originals of the conflicts."""

    genuine: tuple[Delivery, ...]
    missing_ids: frozenset[str]
    shared_packages: dict[str, tuple[str, ...]]  # package id -> its delivery ids
    conflicts: tuple[tuple[Delivery, Delivery], ...]  # (original, same id other body)
    forged: tuple[Delivery, ...]
    replayed: tuple[Delivery, ...]


def plan_load(config: ChaosConfig, *, mcp_url: str, rng: random.Random) -> LoadPlan:
    """The seeded mix of deliveries for ``config.deliveries`` genuine ones."""
    n = config.deliveries
    each = max(1, round(n * config.adversarial_fraction))
    shared_groups = max(1, each // 2)
    regular = n - each - shared_groups * DELIVERIES_PER_SHARED_PACKAGE
    if regular < each:
        raise ValueError("too few deliveries for the adversarial mix")

    def new(**kwargs: Any) -> Delivery:
        return Delivery.new(mcp_url=mcp_url, rng=rng, **kwargs)

    genuine = [new() for _ in range(regular)]
    missing = [new(package_prefix=MISSING_PREFIX) for _ in range(each)]
    shared: dict[str, tuple[str, ...]] = {}
    for _ in range(shared_groups):
        package_id = new_package_id(rng)
        group = deliveries_of_package(package_id, DELIVERIES_PER_SHARED_PACKAGE, mcp_url=mcp_url)
        shared[package_id] = tuple(d.delivery_id for d in group)
        genuine.extend(group)
    genuine.extend(missing)
    rng.shuffle(genuine)
    originals = [d for d in genuine if d.package_id and d.package_id.startswith("pkg_")]
    originals = [d for d in originals if not str(d.package_id).startswith(MISSING_PREFIX)]
    conflicts = tuple(
        (original, original.conflicting(package_id=new_package_id(rng, CONFLICT_PREFIX)))
        for original in rng.sample(originals, each)
    )
    return LoadPlan(
        genuine=tuple(genuine),
        missing_ids=frozenset(d.delivery_id for d in missing),
        shared_packages=shared,
        conflicts=conflicts,
        forged=tuple(new() for _ in range(each)),
        replayed=tuple(new() for _ in range(each)),
    )


@dataclass(slots=True)
class ChaosReport:
    """The figures of a run and the invariants it broke (none: it passed)."""

    figures: dict[str, Any]
    violations: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, **self.figures, "violations": list(self.violations)}

    def table(self) -> str:
        """The figures as an aligned two-column table, violations listed after it."""
        f = self.figures
        rows: list[tuple[str, str]] = []

        def add(label: str, value: Any) -> None:
            rows.append((label, _text(value)))

        d = f["deliveries"]
        add("deliveries (genuine)", d["genuine"])
        add("  of which one package, several deliveries", d["shared_package"])
        add("  of which missing packages", d["missing_package"])
        add("  of which duplicated by the sender", d["duplicated_by_sender"])
        add("conflicting bodies (same id)", d["conflicting"])
        add("forged signatures", d["forged"])
        add("replays past the tolerance", d["replayed"])
        add("attempts (HTTP requests)", f["attempts"]["total"])
        for kind, answers in f["answers"].items():
            add(f"answers, {kind}", answers)
        for role, kills in f["kills"].items():
            add(f"kills survived, {role}", f"{kills['survived']} of {kills['sent']}")
        for kind, count in f["faults"].items():
            add(f"faults injected, {kind}", count)
        add("inbox states", f["outcomes"])
        add("worker attempts", f.get("worker_attempts", {}))
        add(f"items by attempts (of {f['max_attempts']})", f["items_by_worker_attempts"])
        add("effects applied", f["effects_applied"])
        add("lost", f["lost"])
        add("duplicated effects", f["duplicated"])
        add("quarantined", f["quarantined"])
        add("stored forged or replayed", f["stored_forged_or_replayed"])
        add("queues at the end", f["queues"])
        add("relay failure queue (recovered)", f["relay_failure_queue_messages"])
        for phase, seconds in f["seconds"].items():
            add(f"time, {phase} (s)", seconds)
        width = max(len(label) for label, _ in rows)
        lines = [f"{label.ljust(width)}  {value}" for label, value in rows]
        verdict = "PASSED: no violation" if self.passed else f"FAILED: {len(self.violations)}"
        lines.append(verdict)
        lines.extend(f"  - {v}" for v in self.violations[:50])
        if len(self.violations) > 50:
            lines.append(f"  ... and {len(self.violations) - 50} more (see the report)")
        return "\n".join(lines)


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "none"
    return str(value)


def sha256_hex(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass(slots=True)
class _Load:
    """What the load sent and heard, filled in while it runs."""

    genuine: list[DeliveryResult] = field(default_factory=list)
    conflicting: list[tuple[str, AttemptResult]] = field(default_factory=list)  # id, answer
    forged: list[AttemptResult] = field(default_factory=list)
    replayed: list[AttemptResult] = field(default_factory=list)
    adversarial_attempts: int = 0  # conflicting, forged and replayed requests sent
    kills: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0


def run_chaos(config: ChaosConfig, *, progress: Callable[[str], None] | None = None) -> ChaosReport:
    """Run the load with faults, then check the invariants. Never raises on a violation."""
    say = progress or (lambda _message: None)
    options = StackOptions(
        seed=config.seed,
        mcp_failure_rate=config.mcp_failure_rate,
        aws_fault_rate=config.aws_fault_rate,
        relay_failure_rate=config.relay_failure_rate,
        max_attempts=config.max_attempts,
    )
    started = time.monotonic()
    abandoned = _AbandonedMcpRequests()
    with abandoned, LocalStack(options) as stack:
        assert stack.mcp is not None and stack.emulator is not None
        # Slower than the worker's MCP client waits: it gives up and retries later.
        stack.mcp.set_slow_rate(
            config.mcp_slow_rate, delay_ms=options.mcp_timeout_seconds * 1000 + 500
        )
        rng = random.Random(config.seed)  # noqa: S311 (a reproducible simulation)
        plan = plan_load(config, mcp_url=stack.state.mcp_url, rng=rng)
        say(
            f"stack up in {time.monotonic() - started:.1f} s; sending {len(plan.genuine)} "
            f"deliveries with {config.kills} kills of each process"
        )
        load_started = time.monotonic()
        load = asyncio.run(_send_load(stack, config, plan, rng))
        load_seconds = time.monotonic() - load_started
        faults = _faults(stack)  # before turning them off: what the run really injected
        stack.emulator.faults.set_rate(0.0)
        stack.mcp.set_failure_rate(0.0)
        stack.mcp.set_slow_rate(0.0, delay_ms=0)
        say(f"load sent in {load_seconds:.1f} s; faults off, waiting until quiet")
        quiet_started = time.monotonic()
        acknowledged = sum(1 for r in load.genuine if r.acknowledged)
        quiet = stack.quiet(config.deadline_seconds, expected=acknowledged)
        quiet_seconds = time.monotonic() - quiet_started
        # Relay failures are a child process's argument: they stay on, and only delay.
        worker_log = _WorkerLog.read(stack)
        faults["relay_failure"] = worker_log.relay_failures
        report = _check(stack, config, plan, load, faults)
        report.figures["worker_attempts"] = worker_log.outcomes
        report.figures["mcp_server_errors_on_abandoned_requests"] = abandoned.count
        if not quiet:
            report.violations.insert(
                0, f"not quiet within the deadline of {config.deadline_seconds:g} s"
            )
        report.figures["seconds"] = {
            "load": round(load_seconds, 1),
            "until_quiet": round(quiet_seconds, 1),
            "total": round(time.monotonic() - started, 1),
        }
    return report


async def _send_load(
    stack: LocalStack, config: ChaosConfig, plan: LoadPlan, rng: random.Random
) -> _Load:
    sender_config = SenderConfig(
        url=stack.state.webhook_url,
        secrets=tuple(stack.state.signing_secrets),
        time_scale=config.time_scale,
        concurrency=config.concurrency,
        duplicate_rate=config.duplicate_rate,
        seed=config.seed,
    )
    async with Sender(sender_config) as sender:
        run = _LoadRun(stack, config, plan, sender)
        # Every random choice is drawn here, in one order, before anything runs.
        conflict_ids = {original.delivery_id for original, _ in plan.conflicts}
        plain = [d for d in plan.genuine if d.delivery_id not in conflict_ids]
        duplicated = set(rng.sample(range(len(plain)), round(config.duplicate_rate * len(plain))))
        overlapping = {i for i in sorted(duplicated) if rng.random() < 0.5}
        tasks = [run.genuine(plain, duplicated, overlapping)]
        for role in ROLES:
            moments = sorted(rng.uniform(0.05, 0.95) for _ in range(config.kills))
            tasks.append(run.kills(role, moments))
        tasks += [run.conflict(o, c, rng.uniform(0.0, 0.9)) for o, c in plan.conflicts]
        tasks += [run.forge(d, rng.uniform(0.0, 0.9)) for d in plan.forged]
        tasks += [
            run.replay(
                d, rng.uniform(0.0, 0.9), rng.randint(SIGNATURE_TOLERANCE_SECONDS + 1, 86_400)
            )
            for d in plan.replayed
        ]
        await asyncio.gather(*tasks)
    return run.load


class _LoadRun:
    """The load's concurrent parts; each waits for its moment as a fraction of progress."""

    def __init__(
        self, stack: LocalStack, config: ChaosConfig, plan: LoadPlan, sender: Sender
    ) -> None:
        self.stack, self.config, self.sender = stack, config, sender
        self.load = _Load()
        self._effects_seen = 0
        self._effects_changed_at = time.monotonic()
        self.total = len(plan.genuine)
        self.expected_effects = self.total - len(plan.missing_ids)

    def acknowledged(self) -> float:
        return self.load.acknowledged / self.total

    def effects_applied(self) -> float:
        return len(self.stack.effects()) / self.expected_effects

    def stalled(self) -> bool:
        """No effect applied for STALL_SECONDS: stop waiting for progress."""
        applied = len(self.stack.effects())
        now = time.monotonic()
        if applied != self._effects_seen:
            self._effects_seen, self._effects_changed_at = applied, now
        return now - self._effects_changed_at > STALL_SECONDS

    def _record(self, result: DeliveryResult) -> None:
        self.load.acknowledged += result.acknowledged
        self.load.genuine.append(result)

    async def _at(self, progress: Callable[[], float], at: float) -> None:
        await _until(lambda: progress() >= at, self.stalled)

    async def genuine(
        self, deliveries: list[Delivery], duplicated: set[int], overlapping: set[int]
    ) -> None:
        """As ``Sender.deliver_many``, paced: at most ``backlog`` deliveries acknowledged
        ahead of the effects, so that the load (and the front door's kills) spans the
        whole run rather than its first seconds."""
        gate = asyncio.Semaphore(self.config.concurrency)

        async def one(index: int, delivery: Delivery) -> None:
            async with gate:
                self._record(
                    await self.sender.deliver(
                        delivery, duplicate=index in duplicated, overlap=index in overlapping
                    )
                )

        tasks = []

        def room(started: int) -> Callable[[], bool]:
            return lambda: started - len(self.stack.effects()) < self.config.backlog

        for index, delivery in enumerate(deliveries):
            await _until(room(index), self.stalled)
            tasks.append(asyncio.create_task(one(index, delivery)))
        await asyncio.gather(*tasks)

    async def conflict(self, original: Delivery, other: Delivery, at: float) -> None:
        """The original until acknowledged, then the same id with other bytes."""
        await self._at(self.acknowledged, at)
        result = await self.sender.deliver(original)
        self._record(result)
        if result.acknowledged:  # else the original's own check reports it
            answer = await _answered(self.sender, self.load, other)
            self.load.conflicting.append((other.delivery_id, answer))

    async def forge(self, delivery: Delivery, at: float) -> None:
        await self._at(self.acknowledged, at)
        forged = await _answered(self.sender, self.load, delivery, secrets=[forged_secret()])
        self.load.forged.append(forged)

    async def replay(self, delivery: Delivery, at: float, age: int) -> None:
        """A request signed ``age`` seconds ago, then the same bytes once more."""
        await self._at(self.acknowledged, at)
        first = await _answered(self.sender, self.load, delivery, timestamp=int(time.time()) - age)
        self.load.replayed.append(first)
        self.load.adversarial_attempts += 1
        self.load.replayed.append(await self.sender.resend(first, delivery))

    async def kills(self, role: Role, moments: list[float]) -> None:
        """One process's kills in order, each once the stack serves again after the last:
        the front door's by acknowledged deliveries, the worker's by applied effects."""
        progress = self.acknowledged if role == "front_door" else self.effects_applied
        for at in moments:
            await self._at(progress, at)
            await asyncio.to_thread(self.stack.kill, role)
            self.load.kills[role] += 1
            await asyncio.to_thread(self.stack.wait_ready, RESTART_DEADLINE_SECONDS)


async def _until(condition: Callable[[], bool], give_up: Callable[[], bool]) -> None:
    while not condition() and not give_up():
        await asyncio.sleep(_POLL_SECONDS)


async def _answered(
    sender: Sender,
    load: _Load,
    delivery: Delivery,
    *,
    secrets: Iterable[str] | None = None,
    timestamp: int | None = None,
) -> AttemptResult:
    """One request, repeated only while the receiver gives no verdict (killed, 503)."""
    result = await sender.attempt(
        delivery, secrets=None if secrets is None else list(secrets), timestamp=timestamp
    )
    load.adversarial_attempts += 1
    deadline = time.monotonic() + _VERDICT_DEADLINE_SECONDS
    while result.answer in _RETRYABLE and time.monotonic() < deadline:
        load.adversarial_attempts += 1
        await asyncio.sleep(0.2)
        result = await sender.resend(result, delivery)
    return result


class _AbandonedMcpRequests(logging.Filter):
    """Counts, instead of printing, what the demo MCP server logs when a client goes away
    mid-request (a killed worker, a timed-out slow fetch): the SDK and uvicorn log each
    with a traceback, which would bury the run's table."""

    _LOGGERS = ("uvicorn.error", "mcp.server.streamable_http")

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            self.count += 1
            return False
        return True

    def __enter__(self) -> _AbandonedMcpRequests:
        for name in self._LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self._LOGGERS:
            logging.getLogger(name).removeFilter(self)


def _faults(stack: LocalStack) -> dict[str, int]:
    assert stack.mcp is not None
    aws = stack.aws_faults
    return {
        "dynamodb_throttling": aws.get("throttling", 0),
        "dynamodb_internal_error": aws.get("internal_error", 0),
        "mcp_unavailable": stack.mcp.controls.failures_injected,
        "mcp_slow": stack.mcp.controls.slow_injected,
    }


@dataclass(frozen=True, slots=True)
class _WorkerLog:
    """What the worker process logged over the run (its log survives the kills)."""

    relay_failures: int  # injected ones
    outcomes: dict[str, int]  # worker attempts by result, a retry by its error code

    @classmethod
    def read(cls, stack: LocalStack) -> _WorkerLog:
        marker = f"relay invocation failed: {INJECTED_RELAY_FAILURE}"
        relay_failures = 0
        outcomes: Counter[str] = Counter()
        with (stack.run_dir / "worker.log").open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if marker in line:
                    relay_failures += 1
                elif line.startswith("{") and '"work item processed"' in line:
                    with contextlib.suppress(ValueError):
                        record = json.loads(line)
                        result = str(record.get("result"))
                        code = record.get("error_code")
                        outcomes[f"{result} ({code})" if code else result] += 1
        return cls(relay_failures, dict(sorted(outcomes.items())))


def _scan(stack: LocalStack) -> list[dict[str, Any]]:
    dynamodb = stack.client("dynamodb")
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(
        TableName=stack.state.resources.table_name, ConsistentRead=True
    ):
        items.extend(page["Items"])
    return items


def _check(
    stack: LocalStack,
    config: ChaosConfig,
    plan: LoadPlan,
    load: _Load,
    faults: dict[str, int],
) -> ChaosReport:
    """Every invariant, from the table, the queues, the effect counter and the answers."""
    checks = _Checks(stack, plan, load)
    checks.genuine()
    checks.shared_packages()
    checks.conflicts()
    checks.rejected()
    checks.queues()
    kills = checks.kills(config.kills)
    return ChaosReport(figures=checks.figures(config, kills, faults), violations=checks.violations)


class _Checks:
    """What the run left behind, read once, and the invariants checked against it."""

    def __init__(self, stack: LocalStack, plan: LoadPlan, load: _Load) -> None:
        assert stack.mcp is not None and stack.sink is not None
        self.stack, self.plan, self.load = stack, plan, load
        self.violations: list[str] = []
        items = _scan(stack)
        self.inbox = {i["pk"]["S"]: i for i in items if i["sk"]["S"] == table_layout.SK_INBOX}
        self.stored_ids = {i["pk"]["S"] for i in items}
        self.quarantine = {
            (i["pk"]["S"], i["received_sha256"]["S"]): i
            for i in items
            if i["sk"]["S"].startswith(table_layout.SK_QUARANTINE_PREFIX)
        }
        self.effects = stack.effects()
        self.notified = stack.sink.sink.body
        self.requested = stack.mcp.controls.packages_requested()
        self.depths = stack.queue_depths()
        self.states: Counter[str] = Counter()
        self.claims: Counter[int] = Counter()  # items by the worker attempts they took
        self.lost = 0
        self.quarantined = 0
        self.stored_rejected = 0

    def _applied(self, delivery_id: str) -> int:
        return self.effects.get(f"{delivery_id}:notify", 0)

    def genuine(self) -> None:
        """Acknowledged, stored with its own body, finished as its package says, and its
        effect applied exactly once (never for a package that does not exist)."""
        for result in self.load.genuine:
            delivery_id = result.delivery_id
            item = self.inbox.get(delivery_id)
            if not result.acknowledged:
                self.violations.append(f"{delivery_id}: never acknowledged ({result.final_answer})")
            if item is None:
                if result.acknowledged:
                    self.lost += 1
                    self.violations.append(f"{delivery_id}: acknowledged, no inbox item (lost)")
                continue
            state = item["state"]["S"]
            self.states[state] += 1
            self.claims[int(item["attempts"]["N"])] += 1
            expected = "failed" if delivery_id in self.plan.missing_ids else "completed"
            if state != expected:
                error = item.get("last_error", {}).get("S", "")
                self.violations.append(f"{delivery_id}: {state}, expected {expected} ({error})")
            applied = self._applied(delivery_id)
            if applied != (1 if expected == "completed" else 0):
                self.violations.append(f"{delivery_id}: effect applied {applied} times ({state})")
            if item["body_sha256"]["S"] != sha256_hex(result.delivery.body):
                self.violations.append(f"{delivery_id}: stored body digest is not the delivery's")
        genuine_ids = {r.delivery_id for r in self.load.genuine}
        for key in self.effects:
            if key.removesuffix(":notify") not in genuine_ids:
                self.violations.append(f"an effect for an unknown delivery: {key}")

    def shared_packages(self) -> None:
        """Several deliveries of one package: each processed on its own."""
        for package_id, ids in self.plan.shared_packages.items():
            done = sum(self._applied(i) == 1 for i in ids)
            if done != len(ids):
                self.violations.append(f"{package_id}: {done} of {len(ids)} deliveries processed")

    def conflicts(self) -> None:
        """409, a quarantine record naming both digests, the original processed with its
        own package, and the conflicting body's package never fetched."""
        sent = dict(self.load.conflicting)
        for original, other in self.plan.conflicts:
            delivery_id = original.delivery_id
            answer = sent.get(delivery_id)
            if answer is None:
                self.violations.append(f"{delivery_id}: conflicting body never sent")
            elif answer.answer != "409":
                self.violations.append(f"{delivery_id}: conflicting body answered {answer.answer}")
            record = self.quarantine.get((delivery_id, sha256_hex(other.body)))
            if record is None:
                self.violations.append(f"{delivery_id}: conflicting body not quarantined")
            else:
                self.quarantined += 1
                if record["stored_sha256"]["S"] != sha256_hex(original.body):
                    self.violations.append(f"{delivery_id}: quarantine names another original")
            if self.requested.get(str(other.package_id), 0):
                self.violations.append(f"{delivery_id}: the conflicting body's package fetched")
            notified = self.notified(f"{delivery_id}:notify") or {}
            if notified.get("package_id") != original.package_id:
                self.violations.append(f"{delivery_id}: notified without the original package")

    def rejected(self) -> None:
        """Forged and stale-replayed requests: 401, and nothing stored under their ids."""
        for kind, deliveries, answers in (
            ("forged", self.plan.forged, self.load.forged),
            ("replayed", self.plan.replayed, self.load.replayed),
        ):
            for answer in answers:
                if answer.answer != "401":
                    self.violations.append(f"a {kind} request answered {answer.answer}")
            for delivery in deliveries:
                if delivery.delivery_id in self.stored_ids:
                    self.stored_rejected += 1
                    self.violations.append(f"{delivery.delivery_id}: {kind} request stored")

    def queues(self) -> None:
        """No work left. The relay failure queue holds metadata of stream batches given
        up on; their items must have been recovered by the reconciler, which
        :meth:`genuine` establishes (every item completed or failed as expected)."""
        for queue in ("work", "dead_letter"):
            if self.depths[queue]:
                self.violations.append(f"{self.depths[queue]} messages left in the {queue} queue")

    def kills(self, planned: int) -> dict[str, dict[str, int]]:
        """Every kill survived: the supervisor restarted the process and it serves."""
        restarts = self.stack.restarts
        sent = self.load.kills
        for role in ROLES:
            if sent[role] != planned:
                self.violations.append(f"{role}: {sent[role]} of {planned} kills sent")
            if restarts[role] < sent[role]:
                self.violations.append(f"{role}: {restarts[role]} restarts, {sent[role]} kills")
        try:
            self.stack.wait_ready(RESTART_DEADLINE_SECONDS)
        except (TimeoutError, RuntimeError) as exc:
            self.violations.append(f"the stack does not serve at the end: {exc}")
        return {
            role: {"sent": sent[role], "survived": min(sent[role], restarts[role])}
            for role in ROLES
        }

    def figures(
        self, config: ChaosConfig, kills: dict[str, dict[str, int]], faults: dict[str, int]
    ) -> dict[str, Any]:
        load, plan = self.load, self.plan
        genuine_answers: Counter[str] = Counter()
        for result in load.genuine:
            genuine_answers.update(result.answers)
        genuine_attempts = sum(len(r.attempts) for r in load.genuine)
        duplicates = sum(1 for r in load.genuine for a in r.attempts if a.extra)
        conflicting = [answer for _, answer in load.conflicting]
        return {
            "config": asdict(config),
            "deliveries": {
                "genuine": len(load.genuine),
                "shared_package": sum(len(ids) for ids in plan.shared_packages.values()),
                "shared_packages": len(plan.shared_packages),
                "missing_package": len(plan.missing_ids),
                "duplicated_by_sender": sum(any(a.extra for a in r.attempts) for r in load.genuine),
                "conflicting": len(plan.conflicts),
                "forged": len(plan.forged),
                "replayed": len(plan.replayed),
            },
            "attempts": {
                "total": genuine_attempts + load.adversarial_attempts,
                "genuine": genuine_attempts,
                "genuine_retries": genuine_attempts - duplicates - len(load.genuine),
                "duplicates": duplicates,
                "adversarial": load.adversarial_attempts,
            },
            "answers": {
                "genuine": dict(sorted(genuine_answers.items())),
                "conflicting": dict(Counter(a.answer for a in conflicting)),
                "forged": dict(Counter(a.answer for a in load.forged)),
                "replayed": dict(Counter(a.answer for a in load.replayed)),
            },
            "kills": kills,
            "faults": faults,
            "outcomes": dict(sorted(self.states.items())),
            "items_by_worker_attempts": {str(k): v for k, v in sorted(self.claims.items())},
            "max_attempts": config.max_attempts,
            "effects_applied": sum(self.effects.values()),
            "lost": self.lost,
            "duplicated": sum(count - 1 for count in self.effects.values() if count > 1),
            "quarantined": self.quarantined,
            "stored_forged_or_replayed": self.stored_rejected,
            "queues": self.depths,
            "relay_failure_queue_messages": self.depths["relay_failure"],
        }
