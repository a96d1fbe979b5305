"""The processing use case against fakes of its ports, asserting on their state."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from functions.core import metric_names
from functions.core.budget import next_day_starts
from functions.core.claim import ClaimStatus
from functions.core.effects import EffectLedger, EffectStatus
from functions.core.errors import (
    BudgetExhausted,
    McpAuthError,
    PackageNotFound,
    ProcessingError,
    TransientError,
)
from functions.core.models import InboxItem, State, WorkItem
from functions.core.process import (
    MAX_QUEUE_DELAY_SECONDS,
    Decision,
    Disposition,
    ProcessConfig,
    Processor,
    QueueMessage,
    Result,
    process_batch,
    retry_delay,
)
from functions.core.steps import StepStatus, StepStorage
from local.testkit.clock import FakeClock
from tests.fakes import FakeClaims, FakeEffects, FakeMetrics, FakeQueue, FakeSteps

MAX_ATTEMPTS = 3
LEASE = 300
MCP_URL = "https://mcp.relaylink.example/mcp"


def work(n: int = 0) -> WorkItem:
    return WorkItem(f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}", "package.received", f"pkg_{n}", MCP_URL)


@dataclass
class Packages:
    """A fake package source; ``errors`` are raised, in order, before answers."""

    errors: list[ProcessingError] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    sessions: int = 0

    async def get_package(self, mcp_url: str, package_id: str) -> Any:
        self.calls.append(package_id)
        if self.errors:
            raise self.errors.pop(0)
        return {"package_id": package_id, "title": "t"}

    async def __aenter__(self) -> Packages:
        self.sessions += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


@dataclass
class RecordingWorkflow:
    """Notifies once through the ledger; ``before`` runs first (to inject a failure)."""

    applied: list[str] = field(default_factory=list)
    before: Callable[[], None] | None = None

    def run(self, work: WorkItem, package: Any, effects: EffectLedger) -> None:
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

    def processor(self) -> Processor:
        return Processor(
            claims=self.claims,
            effects=self.effects,
            workflow=self.workflow,
            clock=self.clock,
            metrics=self.metrics,
            config=ProcessConfig(max_attempts=MAX_ATTEMPTS, lease_seconds=LEASE),
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
        )
        self.claims.add(dataclasses.replace(inbox, **changes))

    def process(self, item: WorkItem) -> Decision:
        return asyncio.run(self.processor().process(item, self.packages))

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
    assert world.effects.get(work().delivery_id, "notify").status is EffectStatus.DONE
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
    assert world.state(work()).attempts == 3


def test_retry_delay_doubles_and_is_capped() -> None:
    delays = [retry_delay(n) for n in range(1, 12)]
    assert delays[:3] == [15, 30, 60]
    assert max(delays) == 900
    assert delays == sorted(delays)


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


def test_last_attempt_failing_dead_letters(world: World) -> None:
    world.accept(work())
    world.packages.errors = [TransientError("mcp_unavailable")] * MAX_ATTEMPTS
    results = [world.process(work()).disposition for _ in range(MAX_ATTEMPTS)]
    assert results == [Disposition.RETRY] * (MAX_ATTEMPTS - 1) + [Disposition.DEAD_LETTER]
    item = world.state(work())
    assert (item.state, item.last_error, item.attempts) == (
        State.FAILED,
        "mcp_unavailable",
        MAX_ATTEMPTS,
    )
    assert world.metrics.counts[metric_names.METRIC_WORK_DEAD_LETTERED] == 1


def test_attempts_used_up_by_crashes_are_not_run_again(world: World) -> None:
    world.accept(work(), attempts=MAX_ATTEMPTS)  # three attempts died without an outcome
    decision = world.process(work())
    assert decision == Decision(Result.EXHAUSTED, Disposition.DEAD_LETTER, 0, "attempts_exhausted")
    assert world.packages.calls == []
    assert world.state(work()).state is State.FAILED


def test_uncertain_effect_fails_the_delivery_and_is_counted(world: World) -> None:
    world.accept(work())
    world.effects.record_intent(work().delivery_id, "notify", key="k", now=1, expires_at=0)
    decision = world.process(work())
    assert decision == Decision(Result.UNCERTAIN, Disposition.ACK, 0, "uncertain_effect")
    assert world.state(work()).state is State.FAILED
    assert world.workflow.applied == []
    assert world.metrics.counts[metric_names.METRIC_UNCERTAIN_EFFECTS] == 1


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


def test_batch_shares_one_source_and_maps_dispositions(world: World) -> None:
    items = [work(n) for n in range(4)]
    for item in items[:3]:
        world.accept(item)
    world.claims.claim(items[2].delivery_id, owner="x", now=world.clock.value, lease_seconds=LEASE)
    world.packages.errors = [TransientError("mcp_unavailable")]  # the first message's fetch
    messages = [QueueMessage(f"m{n}", f"r{n}", item.to_json()) for n, item in enumerate(items)]
    messages.append(QueueMessage("bad", "rbad", "{not json"))
    queue = FakeQueue()
    failures = asyncio.run(
        process_batch(world.processor(), queue, lambda: world.packages, messages)
    )
    assert failures == ["m0"]
    assert queue.visibility == [("r0", retry_delay(1))]
    assert queue.sent == [(items[2], LEASE)]
    assert queue.dead == ["{not json"]
    assert world.packages.sessions == 1
    assert world.state(items[1]).state is State.COMPLETED
    assert world.metrics.counts[metric_names.METRIC_WORK_ALREADY_DONE] == 1  # items[3]: no inbox


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


def test_budget_deferral_sends_a_fresh_delayed_copy(world: World) -> None:
    world.accept(work())
    world.workflow.before = lambda: _raise(BudgetExhausted(retry_at=world.clock.value + 120))
    queue = FakeQueue()
    message = QueueMessage("m0", "r0", work().to_json())
    failures = asyncio.run(
        process_batch(world.processor(), queue, lambda: world.packages, [message])
    )
    assert failures == []  # acknowledged: the copy carries on, with a receive count of 0
    assert queue.sent == [(work(), 120)]
    assert queue.visibility == []
    assert queue.dead == []


@dataclass
class SteppingWorkflow:
    """Records a step, then fails its first attempts; counts the step's real runs."""

    failures: int = 1
    runs: list[int] = field(default_factory=list)
    seen: list[Any] = field(default_factory=list)

    def run(self, work: WorkItem, package: Any, effects: EffectLedger) -> None:
        self.seen.append(effects.step("model", lambda: self.runs.append(1) or len(self.runs)))
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
    assert steps.get(work().delivery_id, "model").status is StepStatus.RECORDED
