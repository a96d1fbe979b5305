"""The receiver as one construct: the project's stack wraps it without changing a
stateful logical id, and a team's own app (examples/existing_app) synthesizes it
cdk-nag clean."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from infra.config import ConfigError, StackConfig
from infra.nag import add_checks, logical_id
from infra.relaylink_receiver import RelayLinkReceiver
from tests.infra.conftest import ROOT, Synthesized

EXAMPLE_APP = ROOT / "examples" / "existing_app" / "app.py"
NO_BUNDLING: dict[str, list[str]] = {"aws:cdk:bundling-stacks": []}
PROPS = StackConfig(mcp_allowed_hosts=("*.relaylink.example",))

# The stateful resources' logical ids as deployed before the stack became a wrapper
# around the construct: a changed id would make CloudFormation replace (empty) them.
STATEFUL_LOGICAL_IDS = {
    "AWS::DynamoDB::Table": {"InboxTableD4FB9610"},
    "AWS::SQS::Queue": {
        "WorkQueue1CAC4D2F",
        "WorkDeadLetterQueue304A9441",
        "RelayFailureQueue3FF99A00",
    },
    "AWS::SecretsManager::Secret": {"SecretsSigningSecrets364237FA", "SecretsMcpTokenC040ACB5"},
    "AWS::S3::Bucket": {"ArchiveBucket49F1AC64"},
    "AWS::Logs::LogGroup": {
        "ReceiverAccessLogs7D533884",
        "ReceiverFunctionLogsD0D89080",
        "RelayFunctionLogs52D63920",
        "WorkerFunctionLogs8558F3DF",
        "ReconcilerFunctionLogsCAD9A584",
    },
    # Only with alarm_topic_key (tests/infra/test_monitoring.py); holds no data.
    "AWS::KMS::Key": set(),
    "AWS::SNS::Topic": {"AlertsTopicCF7C81C9", "MonitoringAlarmTopicAF62D4F1"},
}


def test_the_stack_keeps_every_stateful_logical_id(synthesized: Synthesized) -> None:
    found = {kind: set(synthesized.of_type(kind)) for kind in STATEFUL_LOGICAL_IDS}
    assert found == STATEFUL_LOGICAL_IDS


def test_the_stack_is_the_construct_plus_its_outputs(synthesized: Synthesized) -> None:
    construct = synthesized.stack.receiver_construct
    assert isinstance(construct, RelayLinkReceiver)
    assert construct.table is synthesized.stack.table
    outputs = synthesized.template["Outputs"]
    assert {"ReceiverUrl", "TableName", "AlarmTopicArn", "WorkQueueUrl"} <= set(outputs)


def test_the_example_app_synthesizes_from_its_file_cdk_nag_clean(tmp_path: Path) -> None:
    outdir = tmp_path / "cdk.out"
    run = subprocess.run(
        [sys.executable, str(EXAMPLE_APP)],
        cwd=tmp_path,
        env=os.environ | {"CDK_OUTDIR": str(outdir), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((outdir / "validation-report.json").read_text())
    (nag,) = report["pluginReports"]
    assert nag["pluginName"] == "AwsSolutions"
    assert (nag["conclusion"], nag["violations"]) == ("success", [])
    resources = json.loads((outdir / "MyTeamStack.template.json").read_text())["Resources"]
    functions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == 4
    paths = {r.get("Metadata", {}).get("aws:cdk:path", "") for r in resources.values()}
    assert all(path.startswith("MyTeamStack/Webhooks/") for path in paths if path)


def _team_stack() -> tuple[App, Stack]:
    app = App(context=NO_BUNDLING)
    return app, Stack(app, "TeamStack")


def test_a_brought_alarm_topic_receives_every_alarm_and_none_is_created() -> None:
    app, stack = _team_stack()
    key = kms.Key(stack, "OnCallKey", enable_key_rotation=True)
    topic = sns.Topic(stack, "OnCall", master_key=key, enforce_ssl=True)
    built = RelayLinkReceiver(stack, "Webhooks", config=PROPS, alarm_topic=topic)
    add_checks(app)
    app.synth()  # cdk-nag clean, or this raises with its report
    template = Template.from_stack(stack).to_json()["Resources"]
    topics = {k for k, r in template.items() if r["Type"] == "AWS::SNS::Topic"}
    topic_id = logical_id(topic)
    assert topics == {topic_id, logical_id(built.alerts.topic)}
    assert built.monitoring.topic is topic
    alarms = [r for r in template.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert alarms
    assert all(a["Properties"]["AlarmActions"] == [{"Ref": topic_id}] for a in alarms)


def test_tracing_can_be_switched_off_and_stays_cdk_nag_clean() -> None:
    app, stack = _team_stack()
    RelayLinkReceiver(stack, "Webhooks", config=dataclasses.replace(PROPS, tracing=False))
    add_checks(app)
    app.synth()
    template = Template.from_stack(stack).to_json()["Resources"]
    functions = [r for r in template.values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == 4
    assert not any("TracingConfig" in f["Properties"] for f in functions)


def test_untraced_by_default_and_traced_when_asked() -> None:
    # Off by default: at low volume X-Ray would be the largest line of the bill.
    _, stack = _team_stack()
    RelayLinkReceiver(stack, "Webhooks", config=dataclasses.replace(PROPS, tracing=True))
    functions = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
    assert {f["Properties"]["TracingConfig"]["Mode"] for f in functions.values()} == {"Active"}
    _, plain = _team_stack()
    RelayLinkReceiver(plain, "Webhooks", config=PROPS)
    functions = Template.from_stack(plain).find_resources("AWS::Lambda::Function")
    modes = {f["Properties"].get("TracingConfig", {}).get("Mode") for f in functions.values()}
    assert modes <= {None, "PassThrough"}


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"worker_memory_mb": 64}, "worker_memory_mb"),
        ({"mcp_allowed_hosts": ()}, "mcp_allowed_hosts"),
        ({"inbox_retention_days": 2}, "inbox_retention_days"),
        ({"workflow_settings": {"Model": "x"}}, "workflow_setting_Model"),
    ],
)
def test_props_get_the_context_keys_bounds_and_messages(
    change: dict[str, object], key: str
) -> None:
    _, stack = _team_stack()
    with pytest.raises(ConfigError, match=key):
        RelayLinkReceiver(stack, "Webhooks", config=dataclasses.replace(PROPS, **change))  # type: ignore[arg-type]


def test_props_are_normalised_as_the_context_parser_reads_them() -> None:
    _, stack = _team_stack()
    built = RelayLinkReceiver(
        stack,
        "Webhooks",
        config=dataclasses.replace(
            PROPS, mcp_allowed_hosts=(" MCP.RelayLink.Example ",), log_level="debug"
        ),
    )
    assert built.config.log_level == "DEBUG"
    assert built.config.mcp_allowed_hosts == ("mcp.relaylink.example",)
    assert built.config.checked() == built.config
