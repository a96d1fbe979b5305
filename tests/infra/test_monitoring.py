"""Alarms page on what matters; the dashboard shows the receiver's and worker's outcomes."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from functions.core import env_names, metric_names, settings_table
from functions.core.adapters.cloudwatch_metrics import EmfMetrics
from functions.core.deadline import Deadline
from functions.core.errors import (
    BudgetExhausted,
    HostNotAllowed,
    McpAuthError,
    PackageChanged,
    PackageNotFound,
    PermanentError,
    ProcessingError,
    UncertainEffect,
)
from functions.core.models import Outcome
from functions.core.package_record import PackageStorage
from functions.core.process import ProcessConfig, Processor
from functions.core.reconcile import ReconcileConfig, reconcile
from infra.monitoring import RUNBOOK
from local.testkit.clock import FakeClock
from tests.fakes import FakeClaims, FakeEffects, FakePackageRecords, FakeQueue, FakeReceivedLog
from tests.infra.conftest import ROOT, Synthesized, get_att, ref, synthesize
from tests.unit.test_claim import LEASE, pending
from tests.unit.test_process import RecordingWorkflow

SERVICE_DIMENSION = [{"Name": "service", "Value": metric_names.SERVICE}]


def _alarms(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return {
        name: synthesized.resource(alarm)["Properties"]
        for name, alarm in synthesized.stack.monitoring.alarms.items()
    }


def _topic_ref(synthesized: Synthesized) -> dict[str, str]:
    return ref(synthesized.logical_id(synthesized.stack.monitoring.topic))


def _function_dimension(synthesized: Synthesized, name: str) -> list[dict[str, Any]]:
    return [{"Name": "FunctionName", "Value": ref(synthesized.function_logical_id(name))}]


def test_every_alarm_notifies_the_topic_on_alarm_and_ok(synthesized: Synthesized) -> None:
    alarms = synthesized.of_type("AWS::CloudWatch::Alarm")
    assert len(alarms) == len(synthesized.stack.monitoring.alarms)
    for props in (a["Properties"] for a in alarms.values()):
        assert props["AlarmActions"] == [_topic_ref(synthesized)]
        assert props["OKActions"] == [_topic_ref(synthesized)]
        assert props["EvaluationPeriods"] == 1
    # Missing data is "nothing happened" for every count; only a lag every run reports
    # reads its absence as behind.
    missing = {name: props["TreatMissingData"] for name, props in _alarms(synthesized).items()}
    assert {name for name, treat in missing.items() if treat != "notBreaching"} == {
        "ReceivedLogLag"
    }
    assert missing["ReceivedLogLag"] == "breaching"


def test_the_received_log_alarm_pages_three_schedule_periods_behind(
    synthesized: Synthesized, capsys: pytest.CaptureFixture[str]
) -> None:
    props = _alarms(synthesized)["ReceivedLogLag"]
    every = synthesized.context["reconcile_every_minutes"] * 60
    # The reconciler's own rule, from the settings the function is deployed with.
    deployed = synthesized.environment("reconciler")
    received_age = min(
        int(deployed[env_names.ENV_RECONCILE_PENDING_AGE_SECONDS]),
        int(deployed[env_names.ENV_LEASE_SECONDS]),
    )
    assert (props["Statistic"], props["Period"]) == ("Maximum", 3 * every)
    assert props["Threshold"] == received_age + 3 * every
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    # The metric a real run emits, through the reconciler's own EMF sink.
    metrics = EmfMetrics()
    claims = FakeClaims()
    reconcile(
        store=claims,
        received=FakeReceivedLog(claims),
        effects=FakeEffects(),
        queue=FakeQueue(),
        clock=FakeClock(),
        metrics=metrics,
        config=ReconcileConfig(
            pending_age_seconds=settings_table.RECONCILE_PENDING_AGE_SECONDS.default,
            effect_age_seconds=2 * received_age,
            received_age_seconds=received_age,
        ),
        deadline=Deadline.never(),
    )
    metrics.flush()
    watched = (
        props["Namespace"],
        props["MetricName"],
        tuple(sorted((d["Name"], d["Value"]) for d in props["Dimensions"])),
    )
    assert watched in _emitted(capsys.readouterr().out)


def test_custom_metric_alarms_fire_on_the_first_event(synthesized: Synthesized) -> None:
    alarms = _alarms(synthesized)
    for name, metric in (
        ("Quarantined", metric_names.METRIC_QUARANTINED),
        ("WorkFailed", metric_names.METRIC_WORK_FAILED),
        ("McpAuthFailures", metric_names.METRIC_MCP_AUTH_FAILURES),
        ("UncertainEffects", metric_names.METRIC_UNCERTAIN_EFFECTS),
    ):
        props = alarms[name]
        assert props["Namespace"] == metric_names.METRICS_NAMESPACE, name
        assert props["MetricName"] == metric, name
        # Powertools Metrics emits exactly this dimension set (service) for our metrics.
        assert props["Dimensions"] == SERVICE_DIMENSION, name
        assert props["Statistic"] == "Sum", name
        assert props["Threshold"] == 1, name
        assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold", name
    assert alarms["Quarantined"]["Period"] == 60


def test_both_dead_letter_queues_alarm_on_one_message(synthesized: Synthesized) -> None:
    alarms = _alarms(synthesized)
    for name, queue in (
        ("WorkDeadLetters", synthesized.stack.queues.dead_letter_queue),
        ("RelayFailures", synthesized.stack.relay.failure_queue),
    ):
        props = alarms[name]
        assert props["Namespace"] == "AWS/SQS"
        assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert props["Dimensions"] == [
            {"Name": "QueueName", "Value": get_att(synthesized.logical_id(queue), "QueueName")}
        ]
        assert props["Threshold"] == 1
        assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_work_queue_backlog_alarms_on_the_age_of_its_oldest_message(
    synthesized: Synthesized,
) -> None:
    props = _alarms(synthesized)["WorkQueueAge"]
    queue = synthesized.logical_id(synthesized.stack.queues.queue)
    assert props["Namespace"] == "AWS/SQS"
    assert props["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert props["Dimensions"] == [{"Name": "QueueName", "Value": get_att(queue, "QueueName")}]
    assert props["Statistic"] == "Maximum"
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    # Seconds, from the context key (cdk.json: 15 minutes).
    minutes = synthesized.context["work_queue_age_alarm_minutes"]
    assert props["Threshold"] == minutes * 60 == 15 * 60


class _FailingPackages:
    """A package source whose every fetch raises ``error``."""

    def __init__(self, error: ProcessingError) -> None:
        self.error = error

    async def get_package(self, mcp_url: str, package_id: str) -> Any:
        raise self.error


def _emitted(output: str) -> set[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """(namespace, metric, dimensions) of every EMF record printed to ``output``."""
    found = set()
    for line in output.splitlines():
        if '"_aws"' not in line:
            continue
        record = json.loads(line)
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for dimension_set in directive["Dimensions"]:
                dimensions = tuple(sorted((name, record[name]) for name in dimension_set))
                for metric in directive["Metrics"]:
                    found.add((directive["Namespace"], metric["Name"], dimensions))
    return found


@pytest.mark.parametrize(
    ("alarm", "error"),
    [
        ("WorkFailed", PackageNotFound()),
        ("WorkFailed", PermanentError("notify_rejected")),
        ("WorkFailed", HostNotAllowed()),  # e.g. an allowlist that misses the MCP host
        ("McpAuthFailures", McpAuthError()),
        ("UncertainEffects", UncertainEffect()),
        ("PackagesChanged", PackageChanged()),  # a refetch served another package
        ("BudgetExhausted", BudgetExhausted(retry_at=1)),  # a deferral, not a failure
    ],
)
def test_worker_alarms_watch_a_metric_the_worker_really_emits(
    synthesized: Synthesized,
    gated: Synthesized,
    capsys: pytest.CaptureFixture[str],
    alarm: str,
    error: ProcessingError,
) -> None:
    # The worker's own use case and metrics sink (Powertools EMF), on in-memory stores.
    item = pending()
    claims = FakeClaims()
    claims.add(item)
    metrics = EmfMetrics()
    processor = Processor(
        claims=claims,
        effects=FakeEffects(),
        workflow=RecordingWorkflow(),  # never reached: the fetch fails first
        clock=FakeClock(),
        metrics=metrics,
        config=ProcessConfig(max_attempts=3, lease_seconds=LEASE),
        packages=PackageStorage(FakePackageRecords(claims=claims)),
    )
    work = item.work_item()
    assert work is not None
    asyncio.run(processor.process(work, _FailingPackages(error)))
    metrics.flush()
    # The budget's alarm exists only with a workflow that calls a model.
    props = _alarms(gated if alarm == "BudgetExhausted" else synthesized)[alarm]
    watched = (
        props["Namespace"],
        props["MetricName"],
        tuple(sorted((d["Name"], d["Value"]) for d in props["Dimensions"])),
    )
    assert watched in _emitted(capsys.readouterr().out)


def test_every_alarm_has_a_runbook_entry_its_notification_points_to(
    synthesized: Synthesized,
) -> None:
    runbook = (ROOT / RUNBOOK).read_text(encoding="utf-8")
    headings = set(re.findall(r"^### (\w+)$", runbook, flags=re.MULTILINE))
    alarms = _alarms(synthesized)
    assert set(alarms) <= headings, set(alarms) - headings
    for name, props in alarms.items():
        assert props["AlarmDescription"].endswith(f"Runbook: {RUNBOOK}, section {name}."), name


def test_function_alarms_watch_the_right_functions(synthesized: Synthesized) -> None:
    alarms = _alarms(synthesized)
    for name, function, metric in (
        ("ReceiverErrors", "receiver", "Errors"),
        ("WorkerErrors", "worker", "Errors"),
        ("WorkerThrottles", "worker", "Throttles"),
        ("ReconcilerErrors", "reconciler", "Errors"),
        ("RelayIteratorAge", "relay", "IteratorAge"),
    ):
        props = alarms[name]
        assert props["Namespace"] == "AWS/Lambda", name
        assert props["MetricName"] == metric, name
        assert props["Dimensions"] == _function_dimension(synthesized, function), name
    assert alarms["RelayIteratorAge"]["Statistic"] == "Maximum"
    assert 0 < alarms["RelayIteratorAge"]["Threshold"] <= 15 * 60 * 1000


def test_api_5xx_alarm_watches_the_receiver_api(synthesized: Synthesized) -> None:
    props = _alarms(synthesized)["Api5xx"]
    assert props["Namespace"] == "AWS/ApiGateway"
    assert props["MetricName"] == "5xx"
    assert props["Dimensions"] == [
        {"Name": "ApiId", "Value": ref(synthesized.logical_id(synthesized.stack.receiver.api))}
    ]


def test_the_alarm_topic_has_no_key_of_its_own_by_default(synthesized: Synthesized) -> None:
    topic = synthesized.resource(synthesized.stack.monitoring.topic)["Properties"]
    assert "KmsMasterKeyId" not in topic
    assert not synthesized.of_type("AWS::KMS::Key")


def test_with_alarm_topic_key_the_topic_is_encrypted_by_a_key_cloudwatch_may_use(
    gated: Synthesized,
) -> None:
    topic = gated.resource(gated.stack.monitoring.topic)["Properties"]
    key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key = gated.resources[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    statements = key["KeyPolicy"]["Statement"]
    assert any(
        s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
        and {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(s["Action"])
        for s in statements
    )


@pytest.mark.parametrize("stack", ["synthesized", "gated"])
def test_the_alarm_topic_refuses_publishing_without_tls(
    stack: str, request: pytest.FixtureRequest
) -> None:
    synthesized: Synthesized = request.getfixturevalue(stack)
    topic_id = synthesized.logical_id(synthesized.stack.monitoring.topic)
    (policy,) = (
        p["Properties"]["PolicyDocument"]
        for p in synthesized.of_type("AWS::SNS::TopicPolicy").values()
        if {"Ref": topic_id} in p["Properties"]["Topics"]
    )
    assert any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Statement"]
    )


def _dashboard_text(synthesized: Synthesized) -> str:
    (dashboard,) = synthesized.of_type("AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def test_dashboard_shows_receiver_outcomes_latency_queue_age_and_worker_outcomes(
    synthesized: Synthesized,
) -> None:
    text = _dashboard_text(synthesized)
    # The counts come from the functions' log lines (Logs Insights): only alarmed counts
    # are metrics.
    for outcome in (Outcome.ACCEPTED, Outcome.DUPLICATE, Outcome.QUARANTINED, Outcome.REJECTED):
        assert f"sum({metric_names.receiver_outcome_metric(outcome)})" in text, outcome
    assert '"Duration"' in text
    assert '"Latency"' in text
    assert '"ApproximateAgeOfOldestMessage"' in text
    for metric in (
        metric_names.METRIC_WORK_COMPLETED,
        metric_names.METRIC_WORK_FAILED,
        metric_names.METRIC_WORK_RETRIED,
    ):
        assert f"sum({metric})" in text, metric
    assert synthesized.function_logical_id("receiver") in text


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The agent workflow (a model, so a token budget) with an approval gate, and the
    alarm topic under a key of its own."""
    return synthesize(
        tmp_path_factory,
        {
            "alarm_topic_key": True,
            "workflow": "agent",
            "workflow_setting_approval": "alert",
            "approval_wait_alarm_minutes": 90,
        },
    )


@pytest.mark.parametrize("stack", ["synthesized", "gated"])
def test_every_alarm_on_a_count_reads_a_published_metric(
    stack: str, request: pytest.FixtureRequest
) -> None:
    # Only published counts are CloudWatch metrics: an alarm on another would never fire.
    synthesized: Synthesized = request.getfixturevalue(stack)
    ours = [
        a["Properties"]["MetricName"]
        for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == metric_names.METRICS_NAMESPACE
    ]
    assert ours
    assert set(ours) <= metric_names.PUBLISHED_METRICS


def test_the_budget_and_approval_alarms_exist_only_where_their_metric_can_be_published(
    synthesized: Synthesized, gated: Synthesized
) -> None:
    # The archive workflow calls no model and parks nothing: neither alarm (nor its bill).
    assert not {"BudgetExhausted", "ApprovalWait"} & set(_alarms(synthesized))
    alarms = _alarms(gated)
    budget = alarms["BudgetExhausted"]
    assert budget["MetricName"] == metric_names.METRIC_BUDGET_EXHAUSTED
    assert (budget["Statistic"], budget["Threshold"]) == ("Sum", 1)
    assert budget["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    wait = alarms["ApprovalWait"]
    assert wait["MetricName"] == metric_names.METRIC_APPROVAL_OLDEST_WAIT
    assert (wait["Statistic"], wait["Threshold"]) == ("Maximum", 90 * 60)
    assert wait["ComparisonOperator"] == "GreaterThanThreshold"
    assert wait["Dimensions"] == budget["Dimensions"] == SERVICE_DIMENSION


def test_agent_tools_wait_for_a_person_by_default_so_the_approval_alarm_exists(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """No ``approval`` setting: an acting tool waits anyway, so the wait is watched;
    the exemption reaches the worker by its short key (the synth loads the team's
    tools, ``team_tools:TOOLS``, to check it names an acting one)."""
    folder = tmp_path_factory.mktemp("team-tools")
    (folder / "team_tools.py").write_text(
        "from functions.workflows.tools import Tool, ToolMode\n"
        "TOOLS = [Tool('open_ticket', 'Opens a ticket.', {'type': 'object'},"
        " ToolMode.KEYED, lambda i, k: {})]\n"
    )
    synthesized = synthesize(
        tmp_path_factory,
        {
            "workflow": "agent",
            "workflow_source": str(folder),
            "agent_tools": "team_tools:TOOLS",
            "agent_tools_without_approval": "open_ticket",
            "approval_wait_alarm_minutes": 45,
        },
    )
    wait = _alarms(synthesized)["ApprovalWait"]
    assert (wait["MetricName"], wait["Threshold"]) == (
        metric_names.METRIC_APPROVAL_OLDEST_WAIT,
        45 * 60,
    )
    environment = synthesized.environment("worker")
    settings = json.loads(environment[env_names.ENV_WORKFLOW_SETTINGS])
    assert settings["tools_without_approval"] == "open_ticket"
