"""The agent workflow end to end in process: worker -> MCP -> Bedrock (emulator) -> SNS.

The worker is the production handler, built from its environment with ``WORKFLOW=agent``
(the alias, the wiring, the boto3 clients), on moto (table, queues, bucket, SNS topic),
the SDK's MCP server and the Bedrock emulator on loopback. The topic has an SQS queue
subscribed, so every published alert can be counted.

A crash is a ``BaseException`` raised at one window; nothing handles it, as when a
Lambda dies there. Windows inside the Converse call are botocore event hooks on the
bedrock-runtime client (the request never sent; the answer received and lost), the
others wrap a port of the worker. The retry comes the way it would in AWS: the lease
runs out (the clock moves, nobody sleeps) and the crashed attempt's message comes back.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
import pytest

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

from functions.core import env_names, metric_names
from functions.core.adapters.dynamodb_budget import DynamoDbBudget
from functions.core.adapters.dynamodb_spend import DynamoDbSpend
from functions.core.adapters.dynamodb_steps import DynamoDbSteps
from functions.core.budget import TokenBudget
from functions.core.models import State, WorkItem
from functions.core.ports.steps import StepStatus
from functions.core.spend import ModelSpend
from functions.workflows.agent import MODEL_STEP
from local.bedrock_emulator import ConverseError, RunningEmulator
from local.mcp_server import RunningServer
from local.testkit.moto_world import REGION, TABLE, MotoWorld
from local.testkit.worker_rig import LEASE_SECONDS, WorkerRig, make_worker
from tests.integration.test_pipeline import Crash, CrashBefore, crashed
from tests.processing_harness import emitted_metrics

PACKAGE_ID = "pkg_01JE7Q9V5K3M8N2P4R6T"
MAX_TOKENS = 128
DAILY_BUDGET = 100_000

# The closing table: per crash window, what the delivery cost and sent.
TABLE_ROWS: dict[str, dict[str, Any]] = {}


class ConverseCrashes:
    """Crash points inside the Converse call, armed per test (each fires once)."""

    def __init__(self) -> None:
        self.before_send = False
        self.after_call = False

    def on_before_send(self, **_: Any) -> None:
        if self.before_send:
            self.before_send = False
            raise Crash("before the request is sent")

    def on_after_call(self, **_: Any) -> None:
        if self.after_call:
            self.after_call = False
            raise Crash("after Bedrock answered, before the answer reached the step")


@pytest.fixture
def converse_crashes(aws: MotoWorld) -> Iterator[ConverseCrashes]:
    """Hooks on the default session, which every client built later copies."""
    crashes = ConverseCrashes()
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    events = boto3.DEFAULT_SESSION.events
    hooks = {
        "before-send.bedrock-runtime.Converse": crashes.on_before_send,
        "after-call.bedrock-runtime.Converse": crashes.on_after_call,
    }
    for event, handler in hooks.items():
        events.register_first(event, handler, unique_id=f"crash-{event}")
    yield crashes
    for event, handler in hooks.items():
        events.unregister(event, handler, unique_id=f"crash-{event}")


@dataclass
class AgentStack:
    aws: MotoWorld
    mcp_server: RunningServer
    emulator: RunningEmulator
    crashes: ConverseCrashes
    topic_arn: str
    alert_queue_url: str
    alerts: list[MessageTypeDef] = field(default_factory=list)

    def worker(
        self,
        wrap: Callable[[Any], Any] | None = None,
        *,
        budget: int = DAILY_BUDGET,
        extra: dict[str, str] | None = None,
    ) -> WorkerRig:
        settings = {
            "bedrock_endpoint_url": self.emulator.url,
            "max_tokens": str(MAX_TOKENS),
            "daily_token_budget": str(budget),
            **(extra or {}),
        }
        return make_worker(
            self.aws,
            token=self.mcp_server.token,
            notify_url="http://127.0.0.1:9/unused",
            wrap=wrap,
            environment={
                env_names.ENV_WORKFLOW: "agent",
                env_names.ENV_WORKFLOW_SETTINGS: json.dumps(settings),
                env_names.ENV_ALERT_TOPIC_ARN: self.topic_arn,
            },
        )

    def deliver(self) -> WorkItem:
        work = WorkItem(str(uuid.uuid4()), "package.received", PACKAGE_ID, self.mcp_server.url)
        self.aws.accept(work)
        self.aws.enqueue(work)
        return work

    def alerts_for(self, delivery_id: str) -> list[MessageTypeDef]:
        """Every alert the topic delivered for this delivery so far."""
        while batch := self.aws.sqs.receive_message(
            QueueUrl=self.alert_queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
        ).get("Messages", []):
            self.alerts.extend(batch)
        return [
            m
            for m in self.alerts
            if m["MessageAttributes"]["idempotency_key"]["StringValue"] == f"{delivery_id}:alert"
        ]

    def recorded_text(self, delivery_id: str) -> str:
        record = DynamoDbSteps(client=self.aws.dynamodb, table_name=TABLE).get(
            delivery_id, MODEL_STEP
        )
        assert record is not None and record.status is StepStatus.RECORDED
        assert record.result is not None and record.result.inline is not None
        return str(json.loads(record.result.inline)["text"])

    def spend(self, delivery_id: str) -> ModelSpend:
        spend = DynamoDbSpend(client=self.aws.dynamodb, table_name=TABLE).get(delivery_id)
        return spend or ModelSpend()

    def budget(self) -> TokenBudget:
        store = DynamoDbBudget(
            client=self.aws.dynamodb, table_name=TABLE, default_limit=DAILY_BUDGET
        )
        return TokenBudget(store)


@pytest.fixture
def stack(
    aws: MotoWorld,
    mcp_server: RunningServer,
    emulator: RunningEmulator,
    converse_crashes: ConverseCrashes,
) -> AgentStack:
    sns = boto3.client("sns", region_name=REGION)
    topic_arn = sns.create_topic(Name="relaylink-alerts")["TopicArn"]
    queue_url = aws.sqs.create_queue(QueueName="alerts")["QueueUrl"]
    queue_arn = aws.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=queue_arn["Attributes"]["QueueArn"],
        Attributes={"RawMessageDelivery": "true"},
    )
    return AgentStack(aws, mcp_server, emulator, converse_crashes, topic_arn, queue_url)


def test_delivery_is_summarised_once_and_alerted_once(
    stack: AgentStack, capsys: pytest.CaptureFixture[str]
) -> None:
    work = stack.deliver()
    _, result = stack.worker().run_visible()
    assert result == {"batchItemFailures": []}
    inbox = stack.aws.inbox(work.delivery_id)
    assert (inbox.state, inbox.attempts) == (State.COMPLETED, 1)
    (alert,) = stack.alerts_for(work.delivery_id)
    text = stack.recorded_text(work.delivery_id)
    assert text.startswith("Summary of ")
    assert text in alert["Body"]
    assert stack.emulator.calls() == {work.delivery_id: 1}
    request = stack.emulator.emulator.last_request(work.delivery_id)
    assert request is not None and "toolConfig" not in request
    archived = stack.aws.s3.get_object(
        Bucket="relaylink-archive", Key=f"packages/{work.delivery_id}.json"
    )
    assert json.loads(archived["Body"].read())["package"]["package_id"] == PACKAGE_ID
    day = stack.budget().show(stack.aws.clock.now())
    assert day.reserved == day.used > 0
    metrics = emitted_metrics(capsys.readouterr().out)
    assert metrics[metric_names.METRIC_MODEL_CALLS] == 1
    assert metrics[metric_names.METRIC_WORK_COMPLETED] == 1


def _steps(deps: Any, crash: Callable[[Any], Any]) -> Any:
    steps = deps.processor.steps
    deps.processor.steps = dataclasses.replace(steps, records=crash(steps.records))
    return deps


def _effects(deps: Any, crash: Callable[[Any], Any]) -> Any:
    deps.processor.effects = crash(deps.processor.effects)
    return deps


def _claims(deps: Any, crash: Callable[[Any], Any]) -> Any:
    deps.processor.claims = crash(deps.processor.claims)
    return deps


def _alert(name: str) -> Callable[..., bool]:
    return lambda _delivery_id, effect, **_: effect == name


@dataclass(frozen=True)
class Window:
    """Where the worker dies, and what the retry must then have cost and sent."""

    wrap: Callable[[Any], Any] | None = None
    arm: Callable[[ConverseCrashes], None] | None = None
    model_calls: int = 1
    reruns: int = 0
    state: State = State.COMPLETED
    # The calls the delivery's spend record counts, when not ``model_calls``: a call is
    # counted before it is sent, so one whose worker died just before sending counts.
    counted: int | None = None


WINDOWS: dict[str, Window] = {
    "before the model call": Window(
        arm=lambda c: setattr(c, "before_send", True), model_calls=1, reruns=1, counted=2
    ),
    "inside the model call (answered, never recorded)": Window(
        arm=lambda c: setattr(c, "after_call", True), model_calls=2, reruns=1
    ),
    "after the model call, before its record": Window(
        wrap=lambda deps: _steps(deps, lambda s: CrashBefore(s, "record_result")),
        model_calls=2,
        reruns=1,
    ),
    "after the record, before the alert": Window(
        wrap=lambda deps: _effects(
            deps, lambda e: CrashBefore(e, "record_intent", when=_alert("alert"))
        ),
    ),
    "after the alert, before its record": Window(
        wrap=lambda deps: _effects(
            deps, lambda e: CrashBefore(e, "record_done", when=_alert("alert"))
        ),
        state=State.FAILED,
    ),
    "after the alert's record, before completion": Window(
        wrap=lambda deps: _claims(deps, lambda c: CrashBefore(c, "complete")),
    ),
}


@pytest.mark.parametrize("window", list(WINDOWS))
def test_crash_then_retry_sends_exactly_one_alert(
    stack: AgentStack, window: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = WINDOWS[window]
    work = stack.deliver()
    if expected.arm is not None:
        expected.arm(stack.crashes)
    crashing = stack.worker(wrap=expected.wrap)
    messages = stack.aws.receive()
    with pytest.raises(BaseException) as died:
        crashing.run(messages)
    assert crashed(died.value)
    assert stack.aws.inbox(work.delivery_id).state is State.PROCESSING
    # The lease runs out; the crashed attempt's message comes back to a new container.
    stack.aws.clock.advance(LEASE_SECONDS + 1)
    stack.aws.make_visible(messages)
    _, result = stack.worker().run_visible()
    assert result == {"batchItemFailures": []}
    inbox = stack.aws.inbox(work.delivery_id)
    alerts = stack.alerts_for(work.delivery_id)
    model_calls = stack.emulator.calls().get(work.delivery_id, 0)
    metrics = emitted_metrics(capsys.readouterr().out)
    day = stack.budget().show(stack.aws.clock.now())
    TABLE_ROWS[window] = {
        "model calls": model_calls,
        "alerts": len(alerts),
        "outcome": inbox.state.value + (f" ({inbox.last_error})" if inbox.last_error else ""),
        "step reruns": metrics[metric_names.METRIC_STEP_RERUNS],
        "tokens reserved/used": f"{day.reserved}/{day.used}",
        "calls counted for the delivery": stack.spend(work.delivery_id).model_calls,
    }
    print(f"crash window {window}: {TABLE_ROWS[window]}")
    assert len(alerts) == 1
    assert model_calls == expected.model_calls
    spend = stack.spend(work.delivery_id)
    assert spend.model_calls == (expected.counted or model_calls)
    # Every answer that reached the worker is counted with its tokens, once.
    answered = model_calls - (window == "inside the model call (answered, never recorded)")
    assert spend.answered == answered
    assert spend.input_tokens + spend.output_tokens == day.used
    assert metrics[metric_names.METRIC_STEP_RERUNS] == expected.reruns
    assert stack.recorded_text(work.delivery_id) in alerts[0]["Body"]
    assert inbox.state is expected.state
    if expected.state is State.FAILED:
        # Published, but its record was lost: in doubt, with its alarm, never resent.
        assert inbox.last_error == "uncertain_effect"
        assert metrics[metric_names.METRIC_UNCERTAIN_EFFECTS] == 1
    assert stack.aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}


def test_spent_budget_makes_the_delivery_wait_not_fail(
    stack: AgentStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Other calls spent all but 100 tokens of the day; one call needs more.
    stack.budget().require(DAILY_BUDGET - 100, stack.aws.clock.now())
    work = stack.deliver()
    _, result = stack.worker().run_visible()
    assert result == {"batchItemFailures": []}
    inbox = stack.aws.inbox(work.delivery_id)
    assert (inbox.state, inbox.attempts, inbox.last_error) == (
        State.PENDING,
        0,
        "budget_exhausted",
    )
    assert stack.emulator.calls() == {}
    assert stack.alerts_for(work.delivery_id) == []
    # Acknowledged, with a fresh copy delayed (at most 15 minutes) to wait again.
    assert stack.aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 1}
    assert stack.aws.dead_letters() == []
    metrics = emitted_metrics(capsys.readouterr().out)
    assert metrics[metric_names.METRIC_BUDGET_EXHAUSTED] == 1
    # An operator raises the limit; the next copy (re-sent here: moto delays in real
    # time) goes through.
    stack.budget().set_limit(2 * DAILY_BUDGET, stack.aws.clock.now())
    stack.aws.enqueue(work)
    stack.worker().run_visible()
    assert stack.aws.inbox(work.delivery_id).state is State.COMPLETED
    assert len(stack.alerts_for(work.delivery_id)) == 1
    assert stack.emulator.calls() == {work.delivery_id: 1}


def test_budget_below_one_call_fails_every_delivery_at_once_naming_the_budget(
    stack: AgentStack, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    works = [stack.deliver() for _ in range(3)]
    _, result = stack.worker(budget=50).run_visible()
    assert result == {"batchItemFailures": []}
    for work in works:
        inbox = stack.aws.inbox(work.delivery_id)
        assert (inbox.state, inbox.last_error) == (State.FAILED, "budget_too_small")
        assert stack.alerts_for(work.delivery_id) == []
    assert stack.emulator.calls() == {}
    # Acknowledged: nothing waits in the queue, nothing in the dead letters.
    assert stack.aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    assert stack.aws.dead_letters() == []
    metrics = emitted_metrics(capsys.readouterr().out)
    assert metrics[metric_names.METRIC_WORK_FAILED] == len(works)
    assert metrics[metric_names.METRIC_BUDGET_EXHAUSTED] == 0
    assert stack.budget().show(stack.aws.clock.now()).reserved == 0
    named = [r for r in caplog.records if "daily_token_budget" in r.getMessage()]
    assert len(named) == len(works)
    assert {getattr(r, "daily_token_limit", None) for r in named} == {50}


def test_a_model_call_that_may_have_run_stays_counted_at_its_estimate(
    stack: AgentStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Bedrock answers the first call with a 500: the model may have run (and been paid).
    stack.emulator.emulator.fail_next(1, ConverseError.INTERNAL_SERVER)
    work = stack.deliver()
    messages = stack.aws.receive()
    stack.worker().run(messages)
    inbox = stack.aws.inbox(work.delivery_id)
    assert (inbox.state, inbox.last_error) == (State.PENDING, "model_unavailable")
    assert stack.emulator.calls() == {work.delivery_id: 1}  # one HTTP request, no SDK retry
    day = stack.budget().show(stack.aws.clock.now())
    estimate = day.reserved
    assert estimate > 0 and day.used == 0  # at its estimate, not settled at 0
    assert day.open_reservations == 0  # kept for good, not left open
    assert stack.spend(work.delivery_id) == ModelSpend(model_calls=1)  # its outcome unknown
    # The retry calls again and settles its own reservation; the first stays counted.
    stack.aws.clock.advance(LEASE_SECONDS + 1)
    stack.aws.make_visible(messages)
    stack.worker().run_visible()
    assert stack.aws.inbox(work.delivery_id).state is State.COMPLETED
    assert stack.emulator.calls() == {work.delivery_id: 2}
    day = stack.budget().show(stack.aws.clock.now())
    assert 0 < day.used < estimate
    assert day.reserved == estimate + day.used
    spend = stack.spend(work.delivery_id)
    assert (spend.model_calls, spend.answered, spend.unknown_outcomes) == (2, 1, 1)
    assert spend.input_tokens + spend.output_tokens == day.used
    metrics = emitted_metrics(capsys.readouterr().out)
    assert metrics[metric_names.METRIC_MODEL_CALLS] == 2
