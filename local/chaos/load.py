"""The load: the RelayLink simulator's deliveries, the adversarial requests and the kills.

Its parts run concurrently, each waiting for its moment as a fraction of the run's
progress: the front door's kills at seeded fractions of the acknowledged deliveries,
the worker's at seeded fractions of the applied effects, so that each one lands while
that process has work in flight.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from functions.workflows.agent import MODEL_STEP
from local import stack_probes
from local.chaos.config import RESTART_DEADLINE_SECONDS, STALL_SECONDS, ChaosConfig
from local.chaos.model_window import Run, interrupted_runs
from local.chaos.plan import LoadPlan
from local.sender import (
    CONNECTION_ERROR,
    TIMEOUT,
    AttemptResult,
    Delivery,
    DeliveryResult,
    Sender,
    SenderConfig,
    forged_secret,
)
from local.stack import ROLES, KilledProcess, LocalStack, Role

SIGNATURE_TOLERANCE_SECONDS: Final = 300  # the receiver refuses older signatures
_POLL_SECONDS: Final = 0.05
# A single adversarial request is repeated until the receiver gives a verdict: kills
# come in bursts, so a fixed count of retries can fall entirely inside restarts.
_VERDICT_DEADLINE_SECONDS: Final = 60.0
_RETRYABLE: Final = frozenset({TIMEOUT, CONNECTION_ERROR, "500", "502", "503", "504"})


@dataclass(slots=True)
class LoadRecord:
    """What the load sent and heard, filled in while it runs."""

    genuine: list[DeliveryResult] = field(default_factory=list)
    conflicting: list[tuple[str, AttemptResult]] = field(default_factory=list)  # id, answer
    forged: list[AttemptResult] = field(default_factory=list)
    replayed: list[AttemptResult] = field(default_factory=list)
    adversarial_attempts: int = 0  # conflicting, forged and replayed requests sent
    kills: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0
    kills_in_model_window: int = 0  # worker kills that interrupted a model step
    # (delivery id, run) of each model step run in flight in a worker when it was killed
    interrupted_model_steps: set[Run] = field(default_factory=set)


async def send_load(
    stack: LocalStack, config: ChaosConfig, plan: LoadPlan, rng: random.Random
) -> LoadRecord:
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
        self.load = LoadRecord()
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
        again = await self.sender.resend(first, delivery)
        self.load.replayed.append(await _until_verdict(self.sender, self.load, again, delivery))

    async def kills(self, role: Role, moments: list[float]) -> None:
        """One process's kills in order, each once the stack serves again after the last:
        the front door's by acknowledged deliveries, the worker's by applied effects."""
        progress = self.acknowledged if role == "front_door" else self.effects_applied
        for at in moments:
            await self._at(progress, at)
            if role == "worker" and self.stack.bedrock is not None:
                await asyncio.to_thread(self._kill_worker_in_model_window)
            else:
                await asyncio.to_thread(self.stack.kill, role)
            self.load.kills[role] += 1
            await asyncio.to_thread(self.stack.wait_ready, RESTART_DEADLINE_SECONDS)

    def _kill_worker_in_model_window(self) -> None:
        """Kill the worker and note the model step runs it had in flight (started, not
        recorded), read before the supervisor restarts it."""

        def in_flight(killed: KilledProcess) -> set[Run]:
            started = stack_probes.started_steps(self.stack.state, MODEL_STEP)
            return interrupted_runs(started, process_started_at=killed.started_at)

        interrupted = self.stack.kill_and_inspect("worker", in_flight)
        new = interrupted - self.load.interrupted_model_steps
        self.load.interrupted_model_steps |= new
        self.load.kills_in_model_window += bool(new)


async def _until(condition: Callable[[], bool], give_up: Callable[[], bool]) -> None:
    while not condition() and not give_up():
        await asyncio.sleep(_POLL_SECONDS)


async def _answered(
    sender: Sender,
    load: LoadRecord,
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
    return await _until_verdict(sender, load, result, delivery)


async def _until_verdict(
    sender: Sender, load: LoadRecord, result: AttemptResult, delivery: Delivery
) -> AttemptResult:
    """The same bytes again while the receiver gives no verdict (a kill landed on it)."""
    deadline = time.monotonic() + _VERDICT_DEADLINE_SECONDS
    while result.answer in _RETRYABLE and time.monotonic() < deadline:
        load.adversarial_attempts += 1
        await asyncio.sleep(0.2)
        result = await sender.resend(result, delivery)
    return result
