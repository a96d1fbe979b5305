"""The processing use case against fakes of its ports, asserting on their state."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from functions.core import metric_names, settings_table
from functions.core.budget import next_day_starts
from functions.core.claim import ClaimStatus
from functions.core.errors import (
    BudgetExhausted,
    McpAuthError,
    PackageNotFound,
    ProcessingError,
    TransientError,
)
from functions.core.models import InboxItem, State, WorkItem
from functions.core.package import Package
from functions.core.package_record import PackageStorage
from functions.core.ports.effects import EffectStatus
from functions.core.ports.steps import StepStatus
from functions.core.ports.workflow import Ledger
from functions.core.process import (
    MAX_QUEUE_DELAY_SECONDS,
    Decision,
    Disposition,
    ProcessConfig,
    Processor,
    Result,
)
from functions.core.retry_policy import retry_delay, retry_schedule
from functions.core.steps import StepStorage
from infra.schema import max_receive_count_for
from local.testkit.clock import FakeClock
from tests.fakes import (
    FakeClaims,
    FakeEffects,
    FakeMetrics,
    FakeObjects,
    FakePackageRecords,
    FakeSteps,
)

MAX_ATTEMPTS = 3
LEASE = 300
HORIZON = settings_table.WORKER_RETRY_HORIZON_HOURS.env_default
DAY = 24 * 3600
MCP_URL = "https://mcp.relaylink.example/mcp"


def work(n: int = 0) -> WorkItem:
    return WorkItem(f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}", "package.received", f"pkg_{n}", MCP_URL)


@dataclass
class Packages:
    """A fake package source; ``errors`` are raised, in order, before answers."""

    errors: list[ProcessingError] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        self.calls.append(package_id)
        if self.errors:
            raise self.errors.pop(0)
        return package_of(package_id)


def package_of(package_id: str, *, title: str | None = None, briefing: str = "") -> Package:
    """A valid package for ``package_id`` (the MCP server's shape, docs/contract.md)."""
    return Package.from_mapping(
        {
            "package_id": package_id,
            "title": title or f"Package {package_id}",
            "briefing": briefing or f"Notes for {package_id}.",
            "attachments": [],
            "created_at": "2026-12-01T15:04:00Z",
        }
    )


@dataclass
class Outage:
    """A package source whose server fails with ``error`` until ``until`` (fake clock)."""

    clock: FakeClock
    until: int
    error: ProcessingError
    source: Packages

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        if self.clock.value < self.until:
            raise self.error
        return await self.source.get_package(mcp_url, package_id)


@dataclass
class RecordingWorkflow:
    """Notifies once through the ledger; ``before`` runs first (to inject a failure)."""

    applied: list[str] = field(default_factory=list)
    before: Callable[[], None] | None = None

    def run(self, work: WorkItem, package: Any, effects: Ledger) -> None:
        if self.before is not None:
            self.before()
        effects.run("notify", self.applied.append)


@dataclass
class World:
    claims: FakeClaims = field(default_factory=FakeClaims)
    effects: FakeEffects = field(default_factory=FakeEffects)
    clock: FakeClock = field(default_factory=FakeClock)
    metrics: FakeMetrics = field(default_factory=FakeMetrics)
    workflow: RecordingWorkflow = field(default_factory=RecordingWorkflow)
    packages: Packages = field(default_factory=Packages)
    package_records: FakePackageRecords = field(default_factory=FakePackageRecords)
    objects: FakeObjects = field(default_factory=FakeObjects)

    def processor(self) -> Processor:
        self.package_records.claims = (
            self.claims
        )  # the holder the records check (tests swap claims)
        return Processor(
            claims=self.claims,
            effects=self.effects,
            workflow=self.workflow,
            clock=self.clock,
            metrics=self.metrics,
            config=ProcessConfig(max_attempts=MAX_ATTEMPTS, lease_seconds=LEASE),
            packages=PackageStorage(self.package_records, objects=self.objects),
        )

    def accept(self, item: WorkItem, **changes: Any) -> None:
        inbox = InboxItem(
            delivery_id=item.delivery_id,
            event=item.event,
            body_sha256="0" * 64,
            received_at=self.clock.value,
            state=State.PENDING,
            package_id=item.package_id,
            mcp_url=item.mcp_url,
            state_changed_at=self.clock.value,
            expires_at=self.clock.value + settings_table.INBOX_RETENTION_DAYS.default * DAY,
        )
        self.claims.add(dataclasses.replace(inbox, **changes))

    def process(self, item: WorkItem, source: Any = None) -> Decision:
        return asyncio.run(self.processor().process(item, source or self.packages))

    def redeliver_until_settled(self, item: WorkItem, source: Any = None) -> list[Decision]:
        """Process the one message as SQS would redeliver it: after each retry's delay
        (attempts take no time), until the worker acknowledges or dead-letters it."""
        decisions = [self.process(item, source)]
        while decisions[-1].disposition is Disposition.RETRY:
            self.clock.advance(decisions[-1].delay_seconds)
            decisions.append(self.process(item, source))
        return decisions

    def outage(self, seconds: int, error: ProcessingError | None = None) -> Outage:
        error = error or TransientError("mcp_unavailable")
        return Outage(self.clock, self.clock.value + seconds, error, self.packages)

    def state(self, item: WorkItem) -> InboxItem:
        return self.claims.items[item.delivery_id]


@pytest.fixture
def world() -> World:
    return World()


def test_process_completes_and_applies_the_effect_once(world: World) -> None:
    world.accept(work())
    decision = world.process(work())
    assert decision == Decision(Result.COMPLETED, Disposition.ACK)
    item = world.state(work())
    assert (item.state, item.attempts, item.completed_at) == (State.COMPLETED, 1, world.clock.value)
    assert world.workflow.applied == [f"{work().delivery_id}:notify"]
    record = world.effects.get(work().delivery_id, "notify")
    assert record is not None and record.status is EffectStatus.DONE
    assert world.metrics.counts[metric_names.METRIC_WORK_COMPLETED] == 1


def test_process_of_completed_delivery_does_nothing(world: World) -> None:
    world.accept(work())
    world.process(work())
    decision = world.process(work())
    assert decision.result is Result.ALREADY_DONE
    assert decision.disposition is Disposition.ACK
    assert world.packages.calls == ["pkg_0"]
    assert len(world.workflow.applied) == 1


def test_process_leased_elsewhere_defers_for_the_remaining_lease(world: World) -> None:
    world.accept(work())
    world.claims.claim(
        work().delivery_id, owner="other", now=world.clock.value, lease_seconds=LEASE
    )
    world.clock.advance(100)
    decision = world.process(work())
    assert decision == Decision(Result.DEFERRED, Disposition.DEFER, LEASE - 100)
    assert world.state(work()).attempts == 1  # the deferral did not count as an attempt
    assert world.packages.calls == []


def test_transient_failure_releases_with_growing_delay(world: World) -> None:
    world.accept(work())
    world.packages.errors = [TransientError("mcp_unavailable"), TransientError("mcp_timeout")]
    first = world.process(work())
    assert first == Decision(Result.RETRYING, Disposition.RETRY, retry_delay(1), "mcp_unavailable")
    item = world.state(work())
    assert (item.state, item.last_error, item.lease_until) == (
        State.PENDING,
        "mcp_unavailable",
        None,
    )
    second = world.process(work())
    assert second.delay_seconds == retry_delay(2) > first.delay_seconds
    assert world.state(work()).last_error == "mcp_timeout"
    assert world.process(work()).result is Result.COMPLETED
    item = world.state(work())
    assert (item.attempts, item.transient_failures) == (3, 2)


def test_retry_delay_doubles_and_is_capped() -> None:
    delays = [retry_delay(n) for n in range(1, 12)]
    assert delays[:3] == [15, 30, 60]
    assert max(delays) == 900
    assert delays == sorted(delays)
    assert retry_delay(10_000) == 900


def test_retry_schedule_of_the_defaults_spans_the_day() -> None:
    schedule = retry_schedule(HORIZON)
    assert HORIZON == DAY
    assert schedule[:8] == (0, 15, 45, 105, 225, 465, 945, 1845)
    gaps = [later - earlier for earlier, later in itertools.pairwise(schedule)]
    assert gaps[:6] == [15, 30, 60, 120, 240, 480]
    assert set(gaps[6:]) == {900}
    assert (len(schedule), schedule[-1]) == (101, 85_545)  # the last at 23 h 45 min 45 s
    assert schedule[-1] + 900 > HORIZON  # one more would start past the horizon


def test_retry_schedule_never_starts_an_attempt_past_the_horizon() -> None:
    assert retry_schedule(240) == (0, 15, 45, 105, 225)  # the old 4-minute budget
    assert retry_schedule(3600) == (0, 15, 45, 105, 225, 465, 945, 1845, 2745)
    assert retry_schedule(14) == (0,)
    assert retry_schedule(3 * DAY, base_seconds=900)[-1] == 3 * DAY
    assert len(retry_schedule(3 * DAY)) == 293
    assert retry_schedule(60, base_seconds=1) == (0, 1, 3, 7, 15, 31)


def test_mcp_auth_failure_is_retried_and_counted(world: World) -> None:
    world.accept(work())
    world.packages.errors = [McpAuthError()]
    decision = world.process(work())
    assert decision.disposition is Disposition.RETRY
    assert world.state(work()).last_error == "mcp_auth_failed"
    assert world.metrics.counts[metric_names.METRIC_MCP_AUTH_FAILURES] == 1


def test_permanent_failure_fails_at_once(world: World) -> None:
    world.accept(work())
    world.packages.errors = [PackageNotFound()]
    decision = world.process(work())
    assert decision == Decision(Result.FAILED, Disposition.ACK, 0, "package_not_found")
    item = world.state(work())
    assert (item.state, item.last_error, item.attempts) == (State.FAILED, "package_not_found", 1)
    assert world.workflow.applied == []


def test_mcp_outage_longer_than_four_minutes_is_ridden_out(world: World) -> None:
    world.accept(work())
    decisions = world.redeliver_until_settled(work(), world.outage(2 * 3600))
    assert decisions[-1] == Decision(Result.COMPLETED, Disposition.ACK)
    assert {d.error_code for d in decisions[:-1]} == {"mcp_unavailable"}
    item = world.state(work())
    assert item.completed_at is not None and item.completed_at - item.received_at >= 2 * 3600
    assert item.attempts == len(decisions) > MAX_ATTEMPTS
    assert item.transient_failures == item.attempts - 1
    assert world.workflow.applied == [f"{work().delivery_id}:notify"]
    assert world.metrics.counts[metric_names.METRIC_WORK_DEAD_LETTERED] == 0


def test_token_rotation_is_retried_and_every_refusal_counted(world: World) -> None:
    world.accept(work())
    decisions = world.redeliver_until_settled(work(), world.outage(30 * 60, McpAuthError()))
    assert decisions[-1].result is Result.COMPLETED
    refused = decisions[:-1]
    assert len(refused) > MAX_ATTEMPTS
    assert {d.error_code for d in refused} == {"mcp_auth_failed"}
    assert world.metrics.counts[metric_names.METRIC_MCP_AUTH_FAILURES] == len(refused)


def test_delivery_past_the_horizon_fails_with_its_last_transient_code(world: World) -> None:
    world.accept(work())
    received = world.clock.value
    attempts_at: list[int] = []

    def down() -> None:
        attempts_at.append(world.clock.value - received)
        raise TransientError("archive_unavailable")

    world.workflow.before = down
    decisions = world.redeliver_until_settled(work())
    assert decisions[-1] == Decision(
        Result.EXHAUSTED, Disposition.DEAD_LETTER, 0, "archive_unavailable"
    )
    assert tuple(attempts_at) == retry_schedule(HORIZON)
    item = world.state(work())
    assert (item.state, item.last_error, item.attempts) == (
        State.FAILED,
        "archive_unavailable",
        len(retry_schedule(HORIZON)),
    )
    assert world.metrics.counts[metric_names.METRIC_WORK_DEAD_LETTERED] == 1


def test_horizon_runs_from_the_operators_reset_when_there_is_one(world: World) -> None:
    old, reset = work(1), work(2)
    world.accept(old, received_at=world.clock.value - 2 * DAY)
    world.accept(reset, received_at=world.clock.value - 2 * DAY, reset_at=world.clock.value)
    world.packages.errors = [TransientError("mcp_unavailable")] * 2
    assert world.process(old).disposition is Disposition.DEAD_LETTER
    assert world.process(reset).disposition is Disposition.RETRY


def test_unexpected_errors_exhaust_after_max_attempts(world: World) -> None:
    world.accept(work())
    world.workflow.before = lambda: _raise(KeyError("bug"))
    decisions = world.redeliver_until_settled(work())
    assert [d.disposition for d in decisions] == [Disposition.RETRY] * (MAX_ATTEMPTS - 1) + [
        Disposition.DEAD_LETTER
    ]
    item = world.state(work())
    assert (item.state, item.last_error, item.attempts) == (
        State.FAILED,
        "unexpected_error",
        MAX_ATTEMPTS,
    )


def test_transient_failures_do_not_use_the_budget_of_unexpected_errors(world: World) -> None:
    world.accept(work())
    transient = 4
    world.packages.errors = [TransientError("mcp_unavailable")] * transient
    world.workflow.before = lambda: _raise(KeyError("bug"))
    decisions = world.redeliver_until_settled(work())
    assert decisions[-1] == Decision(
        Result.EXHAUSTED, Disposition.DEAD_LETTER, 0, "unexpected_error"
    )
    item = world.state(work())
    assert (item.attempts, item.transient_failures) == (transient + MAX_ATTEMPTS, transient)


def test_attempts_used_up_by_crashes_are_not_run_again(world: World) -> None:
    world.accept(work(), attempts=MAX_ATTEMPTS)  # three attempts died without an outcome
    decision = world.process(work())
    assert decision == Decision(Result.EXHAUSTED, Disposition.DEAD_LETTER, 0, "attempts_exhausted")
    assert world.packages.calls == []
    assert world.state(work()).state is State.FAILED


def test_crashes_are_counted_apart_from_transient_failures(world: World) -> None:
    # Ten attempts failed transiently, MAX_ATTEMPTS - 1 died: one unexplained attempt left.
    world.accept(work(1), attempts=MAX_ATTEMPTS - 1 + 10, transient_failures=10)
    assert world.process(work(1)).result is Result.COMPLETED
    world.accept(work(2), attempts=MAX_ATTEMPTS + 10, transient_failures=10)
    assert world.process(work(2)).result is Result.EXHAUSTED


@pytest.mark.parametrize(
    ("horizon", "base", "unexpected_first"),
    [(60, 1, MAX_ATTEMPTS - 1), (HORIZON, 15, 0), (3 * DAY, 1, MAX_ATTEMPTS - 1)],
)
def test_worker_decides_before_the_queue_would_redrive(
    horizon: int, base: int, unexpected_first: int
) -> None:
    world = World()
    config = ProcessConfig(
        max_attempts=MAX_ATTEMPTS,
        lease_seconds=LEASE,
        retry_base_seconds=base,
        retry_horizon_seconds=horizon,
    )
    processor = dataclasses.replace(world.processor(), config=config)
    world.accept(work())
    bugs = [KeyError("bug")] * unexpected_first

    def failing() -> None:
        raise bugs.pop() if bugs else TransientError("mcp_unavailable")

    world.workflow.before = failing
    receives = 0
    decision = None
    while decision is None or decision.disposition is Disposition.RETRY:
        world.clock.advance(decision.delay_seconds if decision else 0)
        decision = asyncio.run(processor.process(work(), world.packages))
        receives += 1
    assert decision.disposition is Disposition.DEAD_LETTER
    bound = max_receive_count_for(
        MAX_ATTEMPTS, retry_horizon_seconds=horizon, retry_base_seconds=base
    )
    assert receives <= bound - MAX_ATTEMPTS  # the rest is the margin for storage outages


def test_uncertain_effect_fails_the_delivery_and_is_counted(world: World) -> None:
    world.accept(work())
    world.effects.record_intent(work().delivery_id, "notify", key="k", now=1, expires_at=0)
    decision = world.process(work())
    assert decision == Decision(Result.UNCERTAIN, Disposition.ACK, 0, "uncertain_effect")
    assert world.state(work()).state is State.FAILED
    assert world.workflow.applied == []
    assert world.metrics.counts[metric_names.METRIC_UNCERTAIN_EFFECTS] == 1


def test_expired_delivery_is_closed_visibly_and_never_run(world: World) -> None:
    # Past its TTL its effect records may be gone while the item is still there: a run
    # would find "no record" and apply a done effect again.
    world.accept(work(), expires_at=world.clock.value + LEASE)
    decision = world.process(work())
    assert decision == Decision(Result.EXPIRED, Disposition.ACK, 0, "item_expired")
    item = world.state(work())
    assert (item.state, item.last_error, item.attempts) == (State.FAILED, "item_expired", 0)
    assert world.packages.calls == [] and world.workflow.applied == []
    assert world.metrics.counts[metric_names.METRIC_WORK_EXPIRED] == 1
    world.clock.advance(LEASE)
    assert not world.claims.reopen(work().delivery_id, now=world.clock.value)


@pytest.mark.parametrize(("max_attempts", "after"), [(2, 1), (3, 2), (5, 2)])
def test_a_suspect_claimed_in_company_is_given_back_unrun(
    world: World, max_attempts: int, after: int
) -> None:
    config = ProcessConfig(max_attempts=max_attempts, lease_seconds=LEASE)
    assert config.runs_alone_after == after
    assert ProcessConfig(max_attempts=1, lease_seconds=LEASE).runs_alone_after == 1
    processor = dataclasses.replace(world.processor(), config=config)
    world.accept(work(), attempts=after, last_error="lease_expired")  # earlier deaths
    decision = asyncio.run(processor.process(work(), world.packages, alone=False))
    assert decision == Decision(Result.SET_ASIDE, Disposition.RUN_ALONE)
    assert (world.state(work()).state, world.state(work()).attempts) == (State.PENDING, after)
    assert world.packages.calls == []
    assert world.metrics.counts[metric_names.METRIC_WORK_SET_ASIDE] == 1
    # Alone, it runs (its budget allows one more), and one fewer death is not suspect.
    assert asyncio.run(processor.process(work(), world.packages)).result is Result.COMPLETED
    world.accept(work(1), attempts=after - 1)
    assert asyncio.run(processor.process(work(1), world.packages, alone=False)).result is (
        Result.COMPLETED
    )


def test_lost_claim_at_completion_is_acknowledged(world: World) -> None:
    world.accept(work())

    def expire_and_take_over() -> None:
        world.clock.advance(LEASE)
        taken = world.claims.claim(
            work().delivery_id, owner="successor", now=world.clock.value, lease_seconds=LEASE
        )
        assert taken.status is ClaimStatus.CLAIMED

    world.workflow.before = expire_and_take_over
    decision = world.process(work())
    assert decision == Decision(Result.CLAIM_LOST, Disposition.ACK, 0, "claim_lost")
    assert world.state(work()).state is State.PROCESSING  # the successor's, untouched
    assert world.metrics.counts[metric_names.METRIC_CLAIMS_LOST] == 1


def test_unexpected_workflow_error_is_retried(world: World) -> None:
    world.accept(work())
    world.workflow.before = lambda: _raise(KeyError("bug"))
    decision = world.process(work())
    assert decision.disposition is Disposition.RETRY
    assert world.state(work()).last_error == "unexpected_error"


def _raise(exc: BaseException) -> None:
    raise exc


def test_retry_delay_starts_from_the_configured_base() -> None:
    assert [retry_delay(n, base_seconds=1) for n in range(1, 5)] == [1, 2, 4, 8]
    assert retry_delay(30, base_seconds=1) == 900


def test_spent_token_budget_defers_without_using_an_attempt(world: World) -> None:
    world.accept(work())
    midnight = next_day_starts(world.clock.value)

    def budget_spent() -> None:
        raise BudgetExhausted(retry_at=midnight)

    world.workflow.before = budget_spent
    # More waits than there are attempts: waiting never moves towards the dead letters.
    for _ in range(MAX_ATTEMPTS + 2):
        decision = world.process(work())
        assert decision == Decision(
            Result.DEFERRED, Disposition.DEFER, MAX_QUEUE_DELAY_SECONDS, "budget_exhausted"
        )
        world.clock.advance(MAX_QUEUE_DELAY_SECONDS)
    item = world.state(work())
    assert (item.state, item.attempts, item.last_error, item.lease_until) == (
        State.PENDING,
        0,
        "budget_exhausted",
        None,
    )
    assert world.metrics.counts[metric_names.METRIC_BUDGET_EXHAUSTED] == MAX_ATTEMPTS + 2
    assert world.metrics.counts[metric_names.METRIC_WORK_DEAD_LETTERED] == 0
    assert world.workflow.applied == []
    # Close to midnight the copy waits only for what is left of the day.
    world.clock.value = midnight - 60
    assert world.process(work()).delay_seconds == 60
    # The new day's budget opens (or an operator raised the limit): it runs.
    world.workflow.before = None
    world.clock.value = midnight
    assert world.process(work()).result is Result.COMPLETED
    assert world.state(work()).attempts == 1


def test_budget_wait_that_would_outlast_the_item_fails_visibly(world: World) -> None:
    midnight = next_day_starts(world.clock.value)
    world.workflow.before = lambda: _raise(BudgetExhausted(retry_at=midnight))
    # The item outlives the wait: it waits.
    world.accept(work(), expires_at=midnight + 1)
    assert world.process(work()).result is Result.DEFERRED
    # Its TTL falls before the new day's budget opens: waiting would end in silence.
    other = work(1)
    world.accept(other, expires_at=midnight)
    decision = world.process(other)
    assert decision == Decision(Result.FAILED, Disposition.ACK, 0, "budget_exhausted")
    item = world.state(other)
    assert (item.state, item.last_error) == (State.FAILED, "budget_exhausted")
    assert world.metrics.counts[metric_names.METRIC_WORK_FAILED] == 1
    assert world.metrics.counts[metric_names.METRIC_BUDGET_EXHAUSTED] == 2


@dataclass
class SteppingWorkflow:
    """Records a step, then fails its first attempts; counts the step's real runs."""

    failures: int = 1
    runs: list[int] = field(default_factory=list)
    seen: list[Any] = field(default_factory=list)

    def _model(self) -> int:
        self.runs.append(1)
        return len(self.runs)

    def run(self, work: WorkItem, package: Any, effects: Ledger) -> None:
        self.seen.append(effects.step("model", self._model))
        if self.failures:
            self.failures -= 1
            raise TransientError("model_unavailable")


def test_processor_gives_the_ledger_step_storage(world: World) -> None:
    world.accept(work())
    stepping = SteppingWorkflow()
    steps = FakeSteps()
    processor = dataclasses.replace(
        world.processor(),
        workflow=stepping,
        steps=StepStorage(records=steps, metrics=world.metrics),
    )
    assert asyncio.run(processor.process(work(), world.packages)).result is Result.RETRYING
    assert asyncio.run(processor.process(work(), world.packages)).result is Result.COMPLETED
    assert stepping.runs == [1]  # the second attempt reused the recorded result
    assert stepping.seen == [1, 1]
    record = steps.get(work().delivery_id, "model")
    assert record is not None and record.status is StepStatus.RECORDED


def test_budget_wait_does_not_use_the_retry_horizon(world: World) -> None:
    world.accept(work())
    horizon = world.processor().config.retry_horizon_seconds
    world.workflow.before = lambda: _raise(BudgetExhausted(retry_at=world.clock.value + 10**6))
    assert world.process(work()).result is Result.DEFERRED
    world.clock.advance(horizon + 3600)  # the budget stayed spent past the horizon
    assert world.process(work()).result is Result.DEFERRED
    # The budget opens, and the first attempt meets a model outage: it is retried.
    world.workflow.before = lambda: _raise(TransientError("model_unavailable"))
    assert world.process(work()).result is Result.RETRYING
    assert world.state(work()).retry_window_start == world.clock.value
