"""The worker's context keys: the default workflow, its settings, grants and sizing."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from functions.core import env_names, event_source_limits, metric_names, settings_table
from functions.core.clock import SystemClock
from functions.core.workflow import WorkflowContext
from functions.reconciler.settings import Settings as ReconcilerSettings
from functions.worker.settings import Settings as WorkerSettings
from functions.workflows.wiring import load as load_workflow
from infra.worker import WorkerTiming, check_timing
from tests.infra.conftest import (
    Synthesized,
    resolved,
    resource_key,
    role_grants,
    synthesize,
)
from tests.infra.test_least_privilege import (
    OWN_TOKEN,
    stack_bedrock_arn,
    stack_guardrail_arn,
    worker_base_grants,
)

FUNCTIONS = ("receiver", "relay", "worker", "reconciler")
MODEL_ID = "amazon.nova-lite-v1:0"
EXTRA_MODEL = "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"
AWS_MANAGED = "arn:aws:iam::aws:policy/AWSXrayReadOnlyAccess"
PRIVILEGED = "arn:aws:iam::aws:policy/AmazonS3FullAccess"
OWN_POLICY = "arn:aws:iam::123456789012:policy/relaylink-extra"
# A chat webhook's URL carries its credential: only its secret's ARN reaches the synth.
ALERT_URL = "https://hooks.example.com/services/T000/B000/credential"
ALERT_URL_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/alert-url-AbC123"
ALERT_SIGNING_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/sign-XyZ789"
ALERT_URL_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1f2e3d4c-5b6a-4789-8abc-def012345678"
ALERT_EMAIL = "agent-alerts@example.com"
GUARDRAIL_ID = "gr7x2k9q4m1p"
CUSTOM: dict[str, Any] = {
    "workflow": "agent",
    "agent_model_id": MODEL_ID,
    "alert_url_secret_arn": ALERT_URL_SECRET,
    "alert_url_kms_key_arn": ALERT_URL_KEY,
    "alert_signing_secret_arn": ALERT_SIGNING_SECRET,
    "workflow_setting_daily_token_budget": 5000,
    "workflow_setting_system_prompt": "Name the package's author.",
    "worker_secret_arns": OWN_TOKEN,
    "worker_managed_policy_arns": f"{AWS_MANAGED},{OWN_POLICY},{PRIVILEGED}",
    "worker_managed_policy_ack": "AmazonS3FullAccess",
    "worker_bedrock_model_arns": [EXTRA_MODEL],
    "worker_timeout_seconds": "900",
    "worker_memory_mb": 1024,
    "worker_batch_size": 4,
    "worker_batch_concurrency": 2,
    "worker_workflow_seconds": 120,
    "alert_email": ALERT_EMAIL,
    "guardrail_id": GUARDRAIL_ID,
    "guardrail_version": 4,
}


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """``npx cdk deploy`` with cdk.json as it ships and no ``-c`` at all."""
    return synthesize(tmp_path_factory, {})


@pytest.fixture(scope="module")
def customised(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory, CUSTOM)


def test_a_bare_deployment_runs_the_archive_workflow(bare: Synthesized) -> None:
    environment = bare.environment("worker")
    assert environment[env_names.ENV_WORKFLOW] == "archive"
    assert env_names.ENV_NOTIFY_URL not in environment
    assert json.loads(environment[env_names.ENV_WORKFLOW_SETTINGS]) == {}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_reads_its_settings_from_a_bare_deployment(
    bare: Synthesized, function: str
) -> None:
    settings = importlib.import_module(f"functions.{function}.settings").Settings
    settings.from_env(resolved(bare.environment(function)))


def _worker_loads_its_workflow(environment: dict[str, Any]) -> object:
    """What the worker does at cold start with its synthesized environment."""
    settings = WorkerSettings.from_env(resolved(environment))
    context = WorkflowContext(
        notify_url=settings.notify_url,
        archive_bucket=settings.archive_bucket,
        allow_insecure_loopback=settings.mcp_allow_insecure_loopback,
        timeout_seconds=float(settings.mcp_timeout_seconds),
        clock=SystemClock(),
        settings=settings.workflow_settings,
        table_name=settings.table_name,
        alert_topic_arn=settings.alert_topic_arn,
        secrets_max_age_seconds=settings.secrets_max_age_seconds,
    )
    return load_workflow(settings.workflow, context)


@pytest.mark.parametrize("synthesis", ["bare", "customised"])
def test_the_worker_starts_the_workflow_the_stack_configures(
    synthesis: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    synthesized: Synthesized = request.getfixturevalue(synthesis)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # Lambda sets it; no call is made
    workflow = _worker_loads_its_workflow(synthesized.environment("worker"))
    expected = {"bare": "ArchiveWorkflow", "customised": "AgentWorkflow"}[synthesis]
    assert type(workflow).__name__ == expected


def test_workflow_settings_and_short_keys_reach_the_worker(customised: Synthesized) -> None:
    environment = customised.environment("worker")
    assert environment[env_names.ENV_WORKFLOW] == "agent"
    assert json.loads(environment[env_names.ENV_WORKFLOW_SETTINGS]) == {
        "model_id": MODEL_ID,
        "alert_url_secret_arn": ALERT_URL_SECRET,
        "alert_signing_secret_arn": ALERT_SIGNING_SECRET,
        "daily_token_budget": "5000",
        "system_prompt": "Name the package's author.",
        "guardrail_id": GUARDRAIL_ID,
        "guardrail_version": "4",
    }
    settings = WorkerSettings.from_env(resolved(environment))
    assert settings.workflow_settings["model_id"] == MODEL_ID
    topic = customised.logical_id(customised.stack.alerts.topic)
    assert environment[env_names.ENV_ALERT_TOPIC_ARN] == {"Ref": topic}


def _model_arn(model_id: str) -> Any:
    return stack_bedrock_arn(f"::foundation-model/{model_id}")


def test_context_grants_are_exactly_what_it_names(customised: Synthesized) -> None:
    via_secrets_manager = resource_key(ALERT_URL_KEY)
    extra = {
        ("secretsmanager:GetSecretValue", resource_key(OWN_TOKEN)),
        # The alert endpoint's two secrets, the URL's through its customer managed key.
        ("secretsmanager:GetSecretValue", resource_key(ALERT_URL_SECRET)),
        ("secretsmanager:DescribeSecret", resource_key(ALERT_URL_SECRET)),
        ("secretsmanager:GetSecretValue", resource_key(ALERT_SIGNING_SECRET)),
        ("secretsmanager:DescribeSecret", resource_key(ALERT_SIGNING_SECRET)),
        ("kms:Decrypt", via_secrets_manager),
        ("bedrock:InvokeModel", resource_key(_model_arn(MODEL_ID))),
        ("bedrock:InvokeModel", resource_key(EXTRA_MODEL)),
        # The screening guardrail, in the stack's region and account, and no other.
        ("bedrock:ApplyGuardrail", resource_key(stack_guardrail_arn(GUARDRAIL_ID))),
    }
    # ... and the managed policies it names, attached to the worker's role alone.
    grants = role_grants(
        customised, "worker", managed_policy_arns=(AWS_MANAGED, OWN_POLICY, PRIVILEGED)
    )
    assert grants == worker_base_grants(customised) | extra
    for function in ("receiver", "relay", "reconciler"):
        role_grants(customised, function)  # asserts: no managed policy


def test_a_screening_guardrail_alone_brings_the_approval_wait_alarm(
    customised: Synthesized,
) -> None:
    # No approval setting: the briefings the guardrail blocks wait for a person anyway.
    settings = json.loads(customised.environment("worker")[env_names.ENV_WORKFLOW_SETTINGS])
    assert "approval" not in settings and "guardrail_id" in settings
    wait = customised.resource(customised.stack.monitoring.alarms["ApprovalWait"])
    assert wait["Properties"]["MetricName"] == metric_names.METRIC_APPROVAL_OLDEST_WAIT


def test_an_alert_url_in_a_secret_appears_in_no_template_environment_or_tree(
    customised: Synthesized,
) -> None:
    assets = [path for path in customised.outdir.iterdir() if path.suffix == ".json"]
    assert {"tree.json", "manifest.json"} <= {path.name for path in assets}
    for path in assets:
        text = path.read_text()
        assert ALERT_URL not in text and "hooks.example.com" not in text, path.name
    for function in FUNCTIONS:
        settings = customised.environment(function).get(env_names.ENV_WORKFLOW_SETTINGS, "{}")
        assert "alert_url" not in json.loads(settings), function
    # The worker reads that secret (test_context_grants_are_exactly_what_it_names); no
    # other function may.
    for function in ("receiver", "relay", "reconciler"):
        grants = role_grants(customised, function)
        assert not any(ALERT_URL_SECRET in resource for _, resource in grants), function


def test_a_privileged_policy_reaches_cdk_nag_acknowledged_by_name(
    customised: Synthesized,
) -> None:
    report = json.loads((customised.outdir / "validation-report.json").read_text())
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    reasons = {
        finding["acknowledgedId"]: finding["reason"] for finding in nag["suppressedViolations"]
    }
    privileged = reasons[f"AwsSolutions::AwsSolutions-IAM4[Policy::{PRIVILEGED}]"]
    assert "acknowledged it by name (worker_managed_policy_ack=AmazonS3FullAccess)" in privileged
    assert "acknowledged" not in reasons[f"AwsSolutions::AwsSolutions-IAM4[Policy::{AWS_MANAGED}]"]


def test_the_agent_alone_may_invoke_a_model(synthesized: Synthesized) -> None:
    actions = {action for action, _ in role_grants(synthesized, "worker")}
    assert not any(action.startswith("bedrock:") for action in actions)


def test_the_alert_topic_is_encrypted_tls_only_and_mailed(customised: Synthesized) -> None:
    topic_id = customised.logical_id(customised.stack.alerts.topic)
    topic = customised.resources[topic_id]["Properties"]
    # SNS's AWS managed key, by its alias ARN in the stack's account and region.
    assert json.dumps(topic["KmsMasterKeyId"]).endswith(':alias/aws/sns"]]}')
    (policy,) = [
        p["Properties"]
        for p in customised.of_type("AWS::SNS::TopicPolicy").values()
        if p["Properties"]["Topics"] == [{"Ref": topic_id}]
    ]
    (deny,) = policy["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    (mail,) = [
        s["Properties"]
        for s in customised.of_type("AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": topic_id}
    ]
    assert mail["Endpoint"] == ALERT_EMAIL and mail["Protocol"] == "email"
    assert customised.template["Outputs"]["AlertTopicArn"]["Value"] == {"Ref": topic_id}


def test_nag_is_clean_with_every_worker_key_set(customised: Synthesized) -> None:
    report = json.loads((customised.outdir / "validation-report.json").read_text())
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert plugin["conclusion"] == "success"
    acknowledged = {
        finding["acknowledgedId"].removeprefix("AwsSolutions::")
        for finding in plugin["suppressedViolations"]
    }
    assert f"AwsSolutions-IAM4[Policy::{AWS_MANAGED}]" in acknowledged
    assert f"AwsSolutions-IAM4[Policy::{OWN_POLICY}]" not in acknowledged


def test_worker_sizing_and_the_timings_that_follow(customised: Synthesized) -> None:
    worker = customised.function("worker")["Properties"]
    assert worker["Timeout"] == 900
    assert worker["MemorySize"] == 1024
    (mapping,) = [
        m["Properties"]
        for m in customised.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": customised.function_logical_id("worker")}
    ]
    assert mapping["BatchSize"] == 4
    queue = customised.resource(customised.stack.queues.queue)["Properties"]
    lease = int(customised.environment("worker")[env_names.ENV_LEASE_SECONDS])
    assert 900 < lease < queue["VisibilityTimeout"] <= 12 * 3600
    reconciler = ReconcilerSettings.from_env(resolved(customised.environment("reconciler")))
    assert reconciler.lease_seconds == lease < reconciler.effect_age_seconds
    worker_settings = WorkerSettings.from_env(resolved(customised.environment("worker")))
    assert worker_settings.lease_seconds == lease
    assert (worker_settings.batch_concurrency, worker_settings.workflow_seconds) == (2, 120)


@pytest.mark.parametrize("timeout", [30, 60, 180, 300, 600, 899, 900])
def test_every_allowed_timeout_keeps_the_timing_invariants(timeout: int) -> None:
    window = settings_table.WORKER_BATCHING_WINDOW_SECONDS.high
    timing = WorkerTiming.for_timeout(timeout, batching_window_seconds=window)
    assert timing.timeout_seconds < timing.lease_seconds < timing.visibility_timeout_seconds
    assert timing.lease_seconds < timing.effect_age_seconds
    assert timing.visibility_timeout_seconds >= (
        event_source_limits.VISIBILITY_TIMEOUT_FACTOR * timeout + window
    )


def test_the_default_timeout_keeps_the_timings_the_stack_always_had() -> None:
    window = settings_table.WORKER_BATCHING_WINDOW_SECONDS.default
    timing = WorkerTiming.for_timeout(180, batching_window_seconds=window)
    assert timing.lease_seconds == settings_table.WORKER_LEASE_SECONDS.default
    # AWS: six times the timeout, plus the batching window.
    assert timing.visibility_timeout_seconds == 1080 + window
    assert timing.effect_age_seconds == settings_table.RECONCILE_EFFECT_AGE_SECONDS.default


@pytest.mark.parametrize(
    ("timeout", "lease", "visibility", "effect_age"),
    [(180, 180, 1080, 3600), (180, 900, 900, 3600), (180, 900, 1080, 900)],
)
def test_check_timing_refuses_what_would_let_claims_and_redeliveries_fight(
    timeout: int, lease: int, visibility: int, effect_age: int
) -> None:
    with pytest.raises(ValueError, match="need"):
        check_timing(
            timeout_s=timeout, lease_s=lease, visibility_s=visibility, effect_age_s=effect_age
        )
