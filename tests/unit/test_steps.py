"""Durable steps: run once, the recorded result on every retry, reruns counted."""

from __future__ import annotations

import hashlib

import pytest

from functions.core.effects import EffectLedger
from functions.core.errors import PermanentError, TransientError
from functions.core.metric_names import METRIC_STEP_RERUNS
from functions.core.ports.steps import StepStatus, StoredResult
from functions.core.steps import StepStorage, encode_result, result_object_key
from local.testkit.clock import FakeClock
from tests.fakes import FakeEffects, FakeMetrics, FakeObjects, FakeSteps

DELIVERY = "0b9e4c1a-7d2f-4e8a-b6c3-5f1a2d3e4b5c"


class Crash(BaseException):
    """The worker dies here (a Lambda timeout: no code of ours runs after it)."""


class Model:
    """A model whose every call answers differently, and counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def summarise(self) -> dict[str, object]:
        self.calls += 1
        return {"summary": f"answer {self.calls}", "tokens": (10, 20)}

    def die(self) -> dict[str, object]:
        self.calls += 1
        raise Crash()


class World:
    def __init__(self, *, inline_limit: int = 64 * 1024) -> None:
        self.steps = FakeSteps()
        self.objects = FakeObjects()
        self.metrics = FakeMetrics()
        self.effects = FakeEffects()
        self.clock = FakeClock()
        self.storage = StepStorage(
            records=self.steps,
            metrics=self.metrics,
            objects=self.objects,
            inline_limit=inline_limit,
        )

    def ledger(self) -> EffectLedger:
        """A new attempt's ledger, as the processor builds one per delivery attempt."""
        return EffectLedger(DELIVERY, store=self.effects, clock=self.clock, steps=self.storage)


def test_step_runs_once_and_returns_the_recorded_result_after() -> None:
    world, model = World(), Model()
    first = world.ledger().step("model", model.summarise)
    again = world.ledger().step("model", model.summarise)
    assert model.calls == 1
    # The stored (JSON) form on both attempts: the tuple is a list already the first time.
    assert first == again == {"summary": "answer 1", "tokens": [10, 20]}
    record = world.steps.get(DELIVERY, "model")
    assert record is not None
    assert record.status is StepStatus.RECORDED
    assert record.runs == 1
    assert world.metrics.counts[METRIC_STEP_RERUNS] == 0


def test_effect_after_a_step_uses_the_recorded_result_on_retry() -> None:
    world, model = World(), Model()
    alerts: list[tuple[str, str]] = []

    def workflow(die_before_alert: bool) -> None:
        ledger = world.ledger()
        summary = ledger.step("model", model.summarise)
        if die_before_alert:
            raise Crash()
        ledger.run("alert", lambda key: alerts.append((key, summary["summary"])))

    with pytest.raises(Crash):
        workflow(die_before_alert=True)
    workflow(die_before_alert=False)
    workflow(die_before_alert=False)
    assert alerts == [(f"{DELIVERY}:alert", "answer 1")]
    assert model.calls == 1


def test_step_that_died_inside_runs_again_and_counts_a_rerun() -> None:
    world, model = World(), Model()
    with pytest.raises(Crash):
        world.ledger().step("model", model.die)
    record = world.steps.get(DELIVERY, "model")
    assert record is not None
    assert record.status is StepStatus.STARTED
    assert world.ledger().step("model", model.summarise) == {
        "summary": "answer 2",
        "tokens": [10, 20],
    }
    assert world.metrics.counts[METRIC_STEP_RERUNS] == 1
    record = world.steps.get(DELIVERY, "model")
    assert record is not None
    assert (record.status, record.runs) == (StepStatus.RECORDED, 2)


def test_reruns_count_one_per_attempt_that_died() -> None:
    world, model = World(), Model()
    for _ in range(3):
        with pytest.raises(Crash):
            world.ledger().step("model", model.die)
    world.ledger().step("model", model.summarise)
    assert world.metrics.counts[METRIC_STEP_RERUNS] == 3
    assert model.calls == 4


def test_step_whose_function_raised_runs_again_without_counting_a_rerun() -> None:
    world, model = World(), Model()

    def unavailable() -> object:
        raise TransientError("model_unavailable")

    with pytest.raises(TransientError, match="model_unavailable"):
        world.ledger().step("model", unavailable)
    record = world.steps.get(DELIVERY, "model")
    assert record is not None
    assert record.status is StepStatus.FAILED
    world.ledger().step("model", model.summarise)
    assert world.metrics.counts[METRIC_STEP_RERUNS] == 0
    assert model.calls == 1


def test_first_recorded_result_wins_over_a_late_worker() -> None:
    world = World()

    def overtaken() -> str:
        # Our lease ran out while we worked: another worker started, finished and
        # recorded its own result before ours.
        world.steps.start(DELIVERY, "model", now=1, expires_at=0)
        world.steps.record_result(
            DELIVERY, "model", result=StoredResult(size=7, inline='"other"'), now=2
        )
        return "ours"

    assert world.ledger().step("model", overtaken) == "other"
    assert world.ledger().step("model", lambda: "third") == "other"


def test_large_result_goes_to_the_object_store_by_digest() -> None:
    world, model = World(inline_limit=32), Model()
    big = {"text": "x" * 100}
    assert world.ledger().step("model", lambda: big) == big
    body = encode_result(big)
    digest = hashlib.sha256(body).hexdigest()
    assert world.objects.objects == {result_object_key(digest): body}
    record = world.steps.get(DELIVERY, "model")
    assert record is not None
    assert record.result == StoredResult(size=len(body), digest=digest)
    assert world.ledger().step("model", model.summarise) == big
    assert model.calls == 0


def test_small_result_stays_inline() -> None:
    world = World(inline_limit=32)
    world.ledger().step("model", lambda: {"ok": True})
    record = world.steps.get(DELIVERY, "model")
    assert record is not None
    assert record.result == StoredResult(size=11, inline='{"ok":true}')
    assert world.objects.objects == {}


def test_lost_or_altered_result_object_is_permanent() -> None:
    world = World(inline_limit=8)
    world.ledger().step("model", lambda: "a long enough result")
    (key,) = world.objects.objects
    world.objects.objects[key] = b'"altered"'
    with pytest.raises(PermanentError, match="step_result_lost"):
        world.ledger().step("model", lambda: "unused")
    world.objects.objects.clear()
    with pytest.raises(PermanentError, match="step_result_lost"):
        world.ledger().step("model", lambda: "unused")


def test_result_that_json_cannot_hold_fails_the_step() -> None:
    world = World()
    with pytest.raises(TypeError):
        world.ledger().step("model", lambda: {1, 2})
    record = world.steps.get(DELIVERY, "model")
    assert record is not None
    assert record.status is StepStatus.FAILED


def test_step_needs_step_storage_and_a_valid_name() -> None:
    world = World()
    bare = EffectLedger(DELIVERY, store=world.effects, clock=world.clock)
    with pytest.raises(RuntimeError, match="without step storage"):
        bare.step("model", lambda: 1)
    with pytest.raises(ValueError, match="step name"):
        world.ledger().step("Model Call", lambda: 1)
