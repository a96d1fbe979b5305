"""The agent workflow on fakes: the budget, the recorded model step, the alert effects."""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from functions.core import metric_names
from functions.core.approval import AwaitingApproval
from functions.core.budget import TokenBudget, budget_day, next_day_starts
from functions.core.effects import EffectLedger, EffectMode
from functions.core.env_parsers import SettingsError
from functions.core.errors import (
    BudgetExhausted,
    BudgetTooSmall,
    NotApplied,
    PermanentError,
    StorageUnavailable,
    TransientError,
    UncertainEffect,
)
from functions.core.models import InboxItem, State, WorkItem
from functions.core.observability import logger as service_logger
from functions.core.package import Attachment, Package
from functions.core.ports.approvals import ApprovalDecision, Decision
from functions.core.ports.effects import EffectStatus
from functions.core.ports.steps import StepStatus
from functions.core.spend import ModelSpend
from functions.core.steps import StepStorage
from functions.workflows.agent import (
    ALERT_EFFECT,
    ALERT_HTTP_EFFECT,
    MODEL_STEP,
    NO_TOOLS_RULE,
    TOOLS_RULE,
    AgentSettings,
    AgentWorkflow,
    Alert,
    ModelAnswer,
    ModelSummary,
    token_estimate,
)
from functions.workflows.agent_prompt import AgentPrompt
from functions.workflows.archive import ARCHIVE_EFFECT, archive_key
from functions.workflows.tools import Tool, ToolMode
from local.testkit.clock import FakeClock
from tests.fakes import (
    FakeApprovals,
    FakeBudget,
    FakeClaims,
    FakeEffects,
    FakeMetrics,
    FakeSpend,
    FakeSteps,
)
from tests.log_audit import LogCapture

DELIVERY = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"
WORK = WorkItem(DELIVERY, "package.received", "pkg_01JE7Q9V5K3M8N2P4R6T", "https://mcp.example/mcp")
PACKAGE = Package(
    package_id="pkg_01JE7Q9V5K3M8N2P4R6T",
    title="Quarterly supplier review",
    briefing="Compare the three offers and recommend one.",
    attachments=(Attachment("offers.pdf", "application/pdf", 48213),),
    created_at=datetime(2026, 12, 2, 15, 4, tzinfo=UTC),
)
ANSWER = ModelAnswer("Three offers; the second is cheapest.", "end_turn", 900, 40)
MAX_TOKENS = 256


@dataclass
class FakeModel:
    """Answers with ``answers`` in turn; an exception in the list is raised instead."""

    answers: list[ModelAnswer | Exception] = field(default_factory=lambda: [ANSWER])
    prompts: list[AgentPrompt] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def converse(
        self, prompt: AgentPrompt, *, max_tokens: int, temperature: float, delivery_id: str
    ) -> ModelAnswer:
        self.prompts.append(prompt)
        self.calls.append(
            {"max_tokens": max_tokens, "temperature": temperature, "delivery_id": delivery_id}
        )
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


@dataclass
class FakeChannel:
    """Keeps what it sent; ``errors`` are raised, in order, before sending."""

    sent: list[tuple[Alert, str]] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    # Raised after the alert went out: the outcome is unknown to the caller.
    lost_answer: Exception | None = None
    mode: EffectMode = EffectMode.OPERATOR

    def send(self, alert: Alert, *, idempotency_key: str) -> None:
        if self.errors:
            raise self.errors.pop(0)
        self.sent.append((alert, idempotency_key))
        if self.lost_answer is not None:
            error, self.lost_answer = self.lost_answer, None
            raise error


@dataclass
class FakeArchive:
    objects: dict[str, bytes] = field(default_factory=dict)

    def put(self, key: str, body: bytes, *, content_type: str = "application/json") -> None:
        self.objects[key] = body


@dataclass
class World:
    """One delivery's agent workflow on fakes; every attempt gets a ledger on the same stores."""

    limit: int = 100_000
    settings: AgentSettings = field(default_factory=lambda: AgentSettings(max_tokens=MAX_TOKENS))
    model: FakeModel = field(default_factory=FakeModel)
    topic: FakeChannel | None = field(default_factory=FakeChannel)
    webhook: FakeChannel | None = None
    clock: FakeClock = field(default_factory=FakeClock)
    metrics: FakeMetrics = field(default_factory=FakeMetrics)
    effects: FakeEffects = field(default_factory=FakeEffects)
    steps: FakeSteps = field(default_factory=FakeSteps)
    archive: FakeArchive = field(default_factory=FakeArchive)
    spend: FakeSpend = field(default_factory=FakeSpend)
    budget_store: FakeBudget = field(init=False)
    # The repeatable effects the last attempt applied (what its completion would mark).
    repeated: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.budget_store = FakeBudget(default_limit=self.limit)

    def workflow(self, *, budget: bool = True, **parts: Any) -> AgentWorkflow:
        """The workflow on this world's fakes; ``parts`` replace or add arguments."""
        arguments: dict[str, Any] = {
            "settings": self.settings,
            "archive": self.archive,
            "model": self.model,
            "topic": self.topic,
            "webhook": self.webhook,
            "budget": TokenBudget(self.budget_store) if budget else None,
            "clock": self.clock,
            "metrics": self.metrics,
            "spend": self.spend,
        }
        return AgentWorkflow(**(arguments | parts))

    def attempt(self) -> None:
        ledger = EffectLedger(
            DELIVERY,
            store=self.effects,
            clock=self.clock,
            steps=StepStorage(records=self.steps, metrics=self.metrics),
        )
        self.workflow().run(WORK, PACKAGE, ledger)
        self.repeated = ledger.repeated

    def day(self) -> Any:
        return self.budget_store.get(budget_day(self.clock.now()))

    def step_status(self) -> StepStatus:
        return self.steps.records[(DELIVERY, MODEL_STEP)].status

    def effect_status(self, name: str) -> EffectStatus | None:
        record = self.effects.get(DELIVERY, name)
        return None if record is None else record.status

    def estimate(self) -> int:
        return token_estimate(self.workflow().prompt(PACKAGE)) + MAX_TOKENS


@pytest.fixture
def world() -> World:
    return World()


def _sent(channel: FakeChannel | None) -> list[Alert]:
    assert channel is not None
    return [alert for alert, _key in channel.sent]


def test_run_archives_summarises_once_and_alerts_once(world: World) -> None:
    world.attempt()
    assert set(world.archive.objects) == {archive_key(DELIVERY)}
    assert world.model.calls == [
        {"max_tokens": MAX_TOKENS, "temperature": 0.2, "delivery_id": DELIVERY}
    ]
    (alert,) = _sent(world.topic)
    assert alert.summary == ModelSummary(ANSWER.text, "end_turn", 900, 40, refused=False)
    assert alert.body == ANSWER.text
    assert world.topic is not None and world.topic.sent[0][1] == f"{DELIVERY}:alert"
    assert world.effect_status(ALERT_EFFECT) is EffectStatus.DONE
    # The archive is repeatable: no record, the completion marks it done.
    assert world.effect_status(ARCHIVE_EFFECT) is None
    assert world.repeated == {ARCHIVE_EFFECT}
    assert world.step_status() is StepStatus.RECORDED
    assert world.metrics.counts[metric_names.METRIC_MODEL_CALLS] == 1


def test_model_step_reserves_the_estimate_then_settles_what_was_used(world: World) -> None:
    reserved_during_call: list[int] = []
    model = world.model

    class Watching(FakeModel):
        def converse(self, prompt: AgentPrompt, **kwargs: Any) -> ModelAnswer:
            reserved_during_call.append(world.day().reserved)
            return model.converse(prompt, **kwargs)

    world.model = Watching()
    world.attempt()
    assert reserved_during_call == [world.estimate()]
    assert world.estimate() > MAX_TOKENS
    day = world.day()
    assert (day.reserved, day.used) == (940, 940)


def test_a_retry_reuses_the_recorded_answer_without_a_call_or_a_reservation(world: World) -> None:
    assert world.topic is not None
    world.topic.errors = [NotApplied("alert_rejected")]
    with pytest.raises(NotApplied):
        world.attempt()
    assert world.step_status() is StepStatus.RECORDED
    world.model.answers = [ModelAnswer("A different answer.", "end_turn", 1, 1)]
    world.attempt()
    assert len(world.model.calls) == 1
    (alert,) = _sent(world.topic)
    assert alert.body == ANSWER.text
    assert (world.day().reserved, world.day().used) == (940, 940)


def test_spent_budget_raises_before_the_call(world: World) -> None:
    # The day could afford the call, but others spent a token of it already.
    world.budget_store.default_limit = world.estimate()
    TokenBudget(world.budget_store).require(1, world.clock.now())
    with pytest.raises(BudgetExhausted) as raised:
        world.attempt()
    assert raised.value.retry_at == next_day_starts(world.clock.now())
    assert world.model.calls == []
    assert world.metrics.counts[metric_names.METRIC_MODEL_CALLS] == 0
    assert world.step_status() is StepStatus.FAILED  # run again once the budget opens
    assert world.effect_status(ALERT_EFFECT) is None
    # An operator raises the limit: the next attempt goes through.
    world.budget_store.set_limit(budget_day(world.clock.now()), 10 * world.estimate())
    world.attempt()
    assert len(_sent(world.topic)) == 1


def test_a_call_larger_than_the_daily_budget_fails_at_once_naming_the_setting(
    world: World,
) -> None:
    world.budget_store.default_limit = 50
    # Our own handler on the service logger: pytest's capture handler can carry
    # Powertools' SuppressFilter for this service (added when a Logger is set up while
    # it is a root handler), which drops exactly these records.
    capture = LogCapture()
    underlying = logging.getLogger(service_logger.name)
    underlying.addHandler(capture)
    try:
        with pytest.raises(BudgetTooSmall) as raised:
            world.attempt()
    finally:
        underlying.removeHandler(capture)
    assert isinstance(raised.value, PermanentError)
    assert raised.value.code == "budget_too_small"
    assert (raised.value.tokens, raised.value.limit) == (world.estimate(), 50)
    assert world.model.calls == []
    assert world.day().reserved == 0
    assert world.effect_status(ALERT_EFFECT) is None
    (record,) = [r for r in capture.records if "whole daily token budget" in r.getMessage()]
    assert record.levelname == "ERROR"
    assert "daily_token_budget" in record.getMessage()
    logged = [getattr(record, k) for k in ("setting", "daily_token_limit", "reservation_tokens")]
    assert logged == ["daily_token_budget", 50, world.estimate()]


def test_no_budget_means_no_reservation(world: World) -> None:
    ledger = EffectLedger(
        DELIVERY,
        store=world.effects,
        clock=world.clock,
        steps=StepStorage(records=world.steps, metrics=world.metrics),
    )
    world.workflow(budget=False).run(WORK, PACKAGE, ledger)
    assert world.budget_store.days == {}
    assert len(_sent(world.topic)) == 1


@pytest.mark.parametrize(
    ("stop_reason", "text"),
    [("content_filtered", ""), ("guardrail_intervened", "Sorry."), ("end_turn", " \u200b\n")],
)
def test_refused_or_empty_answer_is_recorded_and_the_alert_says_so(
    world: World, stop_reason: str, text: str
) -> None:
    world.model.answers = [ModelAnswer(text, stop_reason, 900, 0)]
    world.attempt()
    stored = world.steps.records[(DELIVERY, MODEL_STEP)].result
    assert stored is not None
    record = json.loads(str(stored.inline))
    assert record["refused"] is True
    assert record["stop_reason"] == stop_reason
    (alert,) = _sent(world.topic)
    assert "declined" in alert.body
    assert alert.payload()["model_declined"] is True
    assert world.effect_status(ALERT_EFFECT) is EffectStatus.DONE


def test_rejected_request_is_permanent_and_costs_nothing(world: World) -> None:
    world.model.answers = [PermanentError("model_rejected")]
    with pytest.raises(PermanentError, match="model_rejected"):
        world.attempt()
    assert (world.day().reserved, world.day().used) == (0, 0)
    assert world.step_status() is StepStatus.FAILED
    assert world.effect_status(ALERT_EFFECT) is None


def test_throttled_call_is_retried_and_costs_nothing(world: World) -> None:
    world.model.answers = [NotApplied("model_throttled"), ANSWER]
    with pytest.raises(TransientError, match="model_throttled"):
        world.attempt()
    assert world.day().reserved == 0
    world.attempt()
    assert len(world.model.calls) == 2
    assert len(_sent(world.topic)) == 1
    assert world.metrics.counts[metric_names.METRIC_STEP_RERUNS] == 0  # failed, not died


def test_call_that_may_have_run_keeps_its_reservation(world: World) -> None:
    world.model.answers = [TransientError("model_unavailable"), ANSWER]
    with pytest.raises(TransientError, match="model_unavailable"):
        world.attempt()
    assert world.day().reserved == world.estimate()
    assert world.day().open_reservations == 0  # kept at its estimate, not left open
    world.attempt()
    assert (world.day().reserved, world.day().used) == (world.estimate() + 940, 940)


def test_failed_settlement_does_not_fail_the_paid_step(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(day: str, *, reservation_id: str, reserved: int, used: int) -> None:
        raise StorageUnavailable()

    monkeypatch.setattr(world.budget_store, "settle", unavailable)
    world.attempt()
    assert world.step_status() is StepStatus.RECORDED
    assert world.day().reserved == world.estimate()  # counted at its estimate
    assert len(world.model.calls) == 1


def test_alert_certainly_not_sent_is_sent_by_the_next_attempt(world: World) -> None:
    assert world.topic is not None
    world.topic.errors = [NotApplied("alert_unavailable")]
    with pytest.raises(NotApplied):
        world.attempt()
    assert world.effect_status(ALERT_EFFECT) is EffectStatus.NOT_APPLIED
    world.attempt()
    assert len(_sent(world.topic)) == 1
    assert world.effect_status(ALERT_EFFECT) is EffectStatus.DONE


def test_alert_of_unknown_outcome_is_never_repeated(world: World) -> None:
    assert world.topic is not None
    world.topic.lost_answer = TransientError("alert_unconfirmed")
    with pytest.raises(TransientError, match="alert_unconfirmed"):
        world.attempt()
    assert world.effect_status(ALERT_EFFECT) is EffectStatus.INTENT
    with pytest.raises(UncertainEffect):
        world.attempt()
    assert len(_sent(world.topic)) == 1
    assert len(world.model.calls) == 1


def test_each_channel_is_its_own_effect(world: World) -> None:
    world.webhook = FakeChannel(errors=[NotApplied("alert_rejected")])
    with pytest.raises(NotApplied):
        world.attempt()
    assert world.effect_status(ALERT_EFFECT) is EffectStatus.DONE
    world.attempt()
    assert len(_sent(world.topic)) == 1  # not published again for the webhook's sake
    assert len(_sent(world.webhook)) == 1
    assert world.webhook.sent[0][1] == f"{DELIVERY}:alert"  # one key for the alert
    assert world.effect_status(ALERT_HTTP_EFFECT) is EffectStatus.DONE


def test_keyed_webhook_of_unknown_outcome_is_posted_again_with_its_key(world: World) -> None:
    world.webhook = FakeChannel(mode=EffectMode.KEYED)
    world.webhook.lost_answer = TransientError("alert_unconfirmed")
    with pytest.raises(TransientError, match="alert_unconfirmed"):
        world.attempt()
    world.attempt()  # not in doubt: the endpoint drops the repeat
    assert [key for _, key in world.webhook.sent] == [f"{DELIVERY}:alert"] * 2
    assert len(_sent(world.topic)) == 1
    assert world.effect_status(ALERT_HTTP_EFFECT) is EffectStatus.DONE


def test_alert_url_deduplicates_is_a_boolean_setting() -> None:
    assert AgentSettings.from_mapping({}).alert_url_deduplicates is False
    assert AgentSettings.from_mapping({"alert_url_deduplicates": "true"}).alert_url_deduplicates
    with pytest.raises(SettingsError, match="alert_url_deduplicates must be true or false"):
        AgentSettings.from_mapping({"alert_url_deduplicates": "yes please"})


def test_workflow_needs_a_channel(world: World) -> None:
    world.topic = None
    with pytest.raises(ValueError, match="alert"):
        world.workflow()


def test_operator_instructions_follow_the_fencing_rules(world: World) -> None:
    world.settings = AgentSettings(system_prompt="Answer in German.")
    world.attempt()
    (prompt,) = world.model.prompts
    assert prompt.system.endswith("Answer in German.")
    assert prompt.system.index("untrusted") < prompt.system.index("Answer in German.")


def test_alert_subject_is_short_ascii() -> None:
    summary = ModelSummary("ok", "end_turn", 1, 1, refused=False)
    alert = Alert(DELIVERY, "package.received", "pkg_1", "Überblick\n" + "x" * 200, summary, "k")
    subject = alert.subject()
    assert len(subject) == 100
    assert subject.isascii() and "\n" not in subject
    assert subject.startswith("Package pkg_1: ?berblick x")


def test_recorded_result_of_another_shape_is_permanent() -> None:
    wrong_type = {**ModelSummary("t", "s", 1, 1, refused=False).to_record(), "refused": 1}
    for record in ({"text": "t"}, wrong_type, ["t"]):
        with pytest.raises(PermanentError, match="step_result_invalid"):
            ModelSummary.from_record(record)


def test_settings_defaults_and_checks() -> None:
    assert AgentSettings.from_mapping({}) == AgentSettings()
    settings = AgentSettings.from_mapping(
        {
            "model_id": "amazon.nova-lite-v1:0",
            "max_tokens": "64",
            "temperature": "0",
            "daily_token_budget": "0",
            "alert_url": "https://alerts.example/hook",
        }
    )
    assert (settings.model_id, settings.max_tokens, settings.temperature) == (
        "amazon.nova-lite-v1:0",
        64,
        0.0,
    )
    assert settings.daily_token_budget == 0
    bad: list[dict[str, str]] = [
        {"modle_id": "x"},
        {"max_tokens": "0"},
        {"max_tokens": "lots"},
        {"temperature": "1.5"},
        {"temperature": "nan"},
        {"daily_token_budget": "-1"},
        {"model_id": "two words"},
    ]
    for settings_map in bad:
        with pytest.raises(SettingsError):
            AgentSettings.from_mapping(settings_map)


# --- the approval gate -----------------------------------------------------------------


def test_approval_of_the_alert_parks_after_the_model_step_and_sends_once_approved() -> None:
    settings = AgentSettings.from_mapping(
        {"max_tokens": str(MAX_TOKENS), "approval": "alert", "approval_timeout_minutes": "30"}
    )
    world = World(settings=settings)
    claims = FakeClaims()
    claims.add(
        InboxItem(
            DELIVERY,
            "package.received",
            "0" * 64,
            0,
            State.AWAITING_APPROVAL,
            approval="alert",
            approval_deadline=world.clock.value + 1800,
        )
    )
    approvals = FakeApprovals(claims)

    def attempt(package: Package = PACKAGE) -> None:
        ledger = EffectLedger(
            DELIVERY,
            store=world.effects,
            clock=world.clock,
            steps=StepStorage(records=world.steps, metrics=world.metrics),
        )
        gated = AgentWorkflow(
            settings=settings,
            archive=world.archive,
            model=world.model,
            topic=world.topic,
            webhook=None,
            budget=None,
            clock=world.clock,
            metrics=world.metrics,
            approvals=approvals,
        )
        gated.run(WORK, package, ledger)

    with pytest.raises(AwaitingApproval) as parked:
        attempt()
    assert parked.value.deadline == world.clock.value + 1800
    assert _sent(world.topic) == []
    record = approvals.get(DELIVERY, "alert")
    assert record is not None
    assert record.proposal["summary"] == ANSWER.text  # the alert as it will go out
    assert record.proposal["channels"] == [ALERT_EFFECT]
    with pytest.raises(AwaitingApproval):
        attempt()  # still undecided: parks again, the model is not asked again
    decision = Decision(ApprovalDecision.APPROVED, "operator", world.clock.now(), "t1")
    assert approvals.decide(DELIVERY, "alert", decision)
    # Served another version of the package, the same alert is another proposal: the
    # yes given for the package the person saw does not send it.
    changed = dataclasses.replace(PACKAGE, briefing=PACKAGE.briefing + " (changed)")
    with pytest.raises(AwaitingApproval) as again:
        attempt(changed)
    assert again.value.name.startswith("alert.")
    assert again.value.proposal_digest != record.proposal_digest()
    assert _sent(world.topic) == []
    attempt()
    attempt()
    assert len(_sent(world.topic)) == 1
    assert len(world.model.calls) == 1


def test_the_agent_holds_named_acting_tools_and_refuses_any_other_name() -> None:
    """``approval=tools:NAME`` names acting tools of the ``tools`` setting; anything
    else fails at cold start (a typo would let the action run unapproved)."""
    settings = AgentSettings.from_mapping({"approval": "tools:open_ticket,Post_Message"})
    assert settings.approval.tools == {"open_ticket", "Post_Message"}
    world = World()
    approvals = FakeApprovals(FakeClaims())

    def acting(name: str, mode: ToolMode = ToolMode.KEYED) -> Tool:
        return Tool(name, "Acts.", {"type": "object"}, mode, lambda i, k: {})

    def build(tools: list[Tool], store: FakeApprovals | None = approvals) -> AgentWorkflow:
        return world.workflow(settings=settings, tools=tools, approvals=store)

    build([acting("open_ticket"), acting("Post_Message", ToolMode.NONE)])
    for tools in (
        [],
        [acting("open_ticket")],
        [acting("open_ticket"), acting("Post_Message", ToolMode.READ_ONLY)],
    ):
        with pytest.raises(ValueError, match="names no acting tool"):
            build(tools)
    with pytest.raises(ValueError, match="approval store"):
        build([acting("open_ticket"), acting("Post_Message")], store=None)
    with pytest.raises(SettingsError, match="approval"):
        AgentSettings.from_mapping({"approval": "everything"})
    with pytest.raises(SettingsError, match="approval_timeout_minutes"):
        AgentSettings.from_mapping({"approval_timeout_minutes": "0"})
    assert AgentSettings.from_mapping({}).approval_timeout_seconds == 1440 * 60


def test_every_model_call_that_may_have_run_is_counted_for_the_delivery(world: World) -> None:
    """A call that failed after sending and its retry are both paid: both are counted,
    the tokens are the answered call's; a throttled call is not counted."""
    world.model.answers = [
        TransientError("model_unavailable"),
        NotApplied("model_throttled"),
        ANSWER,
    ]
    for _ in range(2):
        with pytest.raises((TransientError, NotApplied)):
            world.attempt()
    world.attempt()
    world.attempt()  # recorded: no call
    assert world.spend.get(DELIVERY) == ModelSpend(
        model_calls=2, answered=1, input_tokens=900, output_tokens=40
    )


def test_settings_read_the_tools_and_their_caps() -> None:
    settings = AgentSettings.from_mapping(
        {"tools": "my_tools:TOOLS", "max_turns": "4", "max_tool_calls": "9"}
    )
    assert (settings.tools, settings.max_turns, settings.max_tool_calls) == ("my_tools:TOOLS", 4, 9)
    for bad in ({"max_turns": "0"}, {"max_tool_calls": "100000"}):
        with pytest.raises(SettingsError):
            AgentSettings.from_mapping(bad)


def test_settings_read_the_exempted_tools_and_the_delivery_token_cap() -> None:
    settings = AgentSettings.from_mapping(
        {"tools_without_approval": " open_ticket , post_note", "delivery_token_cap": "50000"}
    )
    assert settings.tools_without_approval == {"open_ticket", "post_note"}
    assert settings.delivery_token_cap == 50_000
    defaults = AgentSettings.from_mapping({})
    assert (defaults.tools_without_approval, defaults.delivery_token_cap) == (frozenset(), 0)
    for bad, named in (
        ({"tools_without_approval": "open ticket"}, "tools_without_approval"),
        ({"tools_without_approval": "a,,b"}, "tools_without_approval"),
        ({"delivery_token_cap": "-1"}, "delivery_token_cap"),
    ):
        with pytest.raises(SettingsError, match=named):
            AgentSettings.from_mapping(bad)


def test_with_tools_the_prompt_offers_them_instead_of_denying_any(world: World) -> None:
    tool = Tool(
        "lookup", "Looks up.", {"type": "object"}, ToolMode.READ_ONLY, lambda i, k: {"ok": 1}
    )
    workflow = AgentWorkflow(
        settings=world.settings,
        archive=world.archive,
        model=world.model,
        topic=world.topic,
        webhook=None,
        budget=None,
        clock=world.clock,
        metrics=world.metrics,
        tools=[tool],
    )
    system = workflow.prompt(PACKAGE).system
    assert NO_TOOLS_RULE not in system and TOOLS_RULE in system
    assert NO_TOOLS_RULE in world.workflow().prompt(PACKAGE).system  # the rule still matches
    ledger = EffectLedger(
        DELIVERY,
        store=world.effects,
        clock=world.clock,
        steps=StepStorage(records=world.steps, metrics=world.metrics),
    )
    workflow.run(WORK, PACKAGE, ledger)
    assert world.model.prompts[0].tool_config == {"tools": [tool.spec()]}
    assert len(_sent(world.topic)) == 1
