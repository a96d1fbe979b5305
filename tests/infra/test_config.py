"""Deploy-time settings: parsed from CDK context, refusing what would misbehave."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from functions.core import env_names, settings_table
from functions.core.env_parsers import SettingsError, host_list
from functions.core.host_policy import HostPolicy
from functions.worker.settings import Settings as WorkerSettings
from functions.worker.settings import message_seconds
from functions.workflows.wiring import WORKFLOW_ALIASES
from infra import application, schema
from infra import config as config_module
from infra.application import build_app
from infra.config import ConfigError, StackConfig
from infra.environments import worker_environment
from infra.worker import WorkerTiming, check_timing

VALID: dict[str, Any] = {"mcp_allowed_hosts": ["*.relaylink.example"]}
ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/signing-AbC123"
KEY = "arn:aws:kms:eu-west-1:123456789012:key/1f2e3d4c-5b6a-4789-8abc-def012345678"


def test_defaults_come_from_the_shared_names() -> None:
    config = StackConfig.from_context(VALID)
    assert config.inbox_retention_days == settings_table.INBOX_RETENTION_DAYS.default
    assert config.worker_max_attempts == settings_table.WORKER_MAX_ATTEMPTS.default
    assert (
        config.worker_retry_horizon_seconds == settings_table.WORKER_RETRY_HORIZON_HOURS.env_default
    )
    assert config.workflow == settings_table.WORKFLOW.default
    assert config.alarm_email is None and config.notify_url is None


def test_the_api_stage_buffers_bursts_by_default() -> None:
    # The inbox takes bursts; worker concurrency, not the stage, protects the MCP server.
    config = StackConfig.from_context(VALID)
    assert config.api_rate_limit >= 1_000
    assert config.api_burst_limit >= 2_000
    assert config.worker_max_concurrency < config.api_rate_limit


def test_command_line_strings_are_parsed() -> None:
    config = StackConfig.from_context(
        {
            "mcp_allowed_hosts": "mcp.relaylink.example, *.backup.example",
            "worker_max_concurrency": "12",
            "log_level": "debug",
            "alarm_email": "ops@example.com",
            "signing_secrets_arn": ARN,
            "notify_url": "",
            "tracing": "True",
        }
    )
    assert config.tracing is True
    assert StackConfig.from_context({"mcp_allowed_hosts": "mcp.relaylink.example"}).tracing is False
    assert config.mcp_allowed_hosts == ("mcp.relaylink.example", "*.backup.example")
    assert config.worker_max_concurrency == 12
    assert config.log_level == "DEBUG"
    assert config.signing_secrets_arn == ARN
    assert config.notify_url is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mcp_allowed_hosts", []),
        ("mcp_allowed_hosts", ["https://mcp.example"]),
        ("stage", "Prod"),
        ("worker_max_concurrency", 1),  # the SQS event source needs at least 2
        ("worker_max_attempts", 0),
        ("worker_retry_horizon_hours", 0),
        ("worker_retry_horizon_hours", 73),  # beyond RelayLink's own 3 days
        ("inbox_retention_days", 3),  # shorter than RelayLink's 3-day retry horizon + 1
        ("log_level", "LOUD"),
        ("log_retention_days", 10),
        ("alarm_email", "not-an-address"),
        ("signing_secrets_arn", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x"),
        ("notify_url", "http://hooks.example.com"),
        ("workflow", "no_attribute"),
        ("api_burst_limit", 10),  # below the default rate limit
        ("api_burst_limit", 5_001),  # above the account's burst quota
        ("table_warm_write_units", 3_999),  # below a new table's own
        ("received_log_shards", 65),  # two digits in the key
        ("relay_parallelization_factor", 11),  # Lambda allows 10
        ("worker_max_concurrency", True),
        ("work_queue_age_alarm_minutes", 4),  # the back-off alone can take minutes
        ("worker_batch_concurrency", 0),
        ("worker_batch_concurrency", 11),  # more than a batch holds
        ("worker_workflow_seconds", 0),
        ("workflow", "summarise"),  # neither an alias nor module:attribute
        ("workflow_source", "/nowhere/my-agent"),
        ("workflow_requirements", "--index-url=https://elsewhere.example/simple"),
        ("workflow_requirements", {"pkg": "1"}),
        ("workflow_setting_Model_Id", "x"),  # setting names are lower-case
        ("workflow_setting_tags", ["a", "b"]),  # settings are strings
        ("alert_url", "http://alerts.example.com"),
        ("alert_email", "nobody"),
        ("worker_secret_arns", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x"),
        ("worker_managed_policy_arns", "arn:aws:iam::123456789012:role/not-a-policy"),
        ("worker_bedrock_model_arns", "arn:aws:bedrock:*::foundation-model/*"),
        ("worker_timeout_seconds", 29),
        ("worker_timeout_seconds", 901),  # Lambda's longest
        ("worker_memory_mb", 127),
        ("worker_batch_size", 11),  # SQS without a batching window
        ("tracing", "sometimes"),
        ("tracing", "yes"),  # true or false only
        ("tracing", 1),
        ("trace_sample_percent", 101),
        ("trace_sample_percent", -1),
        ("trace_sample_percent", "half"),
    ],
)
def test_bad_values_fail_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key):
        StackConfig.from_context(VALID | {key: value})


def test_no_dead_letter_outlives_its_inbox_item() -> None:
    # The worker's dead letter is a new message, kept from its own send: with the
    # defaults it could be sent a day and more after the receipt, so a 14-day DLQ would
    # keep it past the item's TTL (a redrive would find the item expired or gone).
    config = StackConfig.from_context(VALID)
    age = schema.worker_dead_letter_age(
        retry_horizon_seconds=config.worker_retry_horizon_seconds,
        max_attempts=config.worker_max_attempts,
        visibility_timeout_seconds=WorkerTiming.for_timeout(
            config.worker_timeout_seconds,
            batching_window_seconds=config.worker_batching_window_seconds,
        ).visibility_timeout_seconds,
    )
    assert age > settings_table.WORKER_RETRY_HORIZON_HOURS.env_default
    retention = config.dead_letter_retention_seconds
    assert age + retention <= config.inbox_retention_days * 86400
    assert retention >= schema.MIN_DEAD_LETTER_RETENTION_SECONDS
    # Longer kept items: the DLQ keeps what SQS allows.
    longer = StackConfig.from_context(VALID | {"inbox_retention_days": 30})
    assert longer.dead_letter_retention_seconds == schema.SQS_MAX_RETENTION_SECONDS


def test_synth_refuses_an_inbox_too_short_for_its_dead_letters() -> None:
    # Four days hold a day's horizon, but not RelayLink's three days plus a late start
    # and the crashed attempts: dead letters would be kept less than a day.
    assert StackConfig.from_context(VALID | {"inbox_retention_days": 4})
    with pytest.raises(ConfigError, match=r"^inbox_retention_days: .* at least 6 days"):
        StackConfig.from_context(
            VALID | {"inbox_retention_days": 4, "worker_retry_horizon_hours": 72}
        )
    with pytest.raises(ConfigError, match="inbox_retention_days"):
        StackConfig.from_context(
            VALID
            | {"inbox_retention_days": 10, "worker_max_attempts": 100}
            | {"worker_timeout_seconds": 900, "worker_retry_horizon_hours": 72}
        )


def test_a_customer_managed_key_goes_with_the_secret_it_encrypts() -> None:
    config = StackConfig.from_context(
        VALID | {"signing_secrets_arn": ARN, "signing_secrets_kms_key_arn": KEY}
    )
    assert config.signing_secrets_kms_key_arn == KEY
    assert config.mcp_token_kms_key_arn is None


@pytest.mark.parametrize(
    ("context", "key"),
    [
        # A secret the stack creates uses the AWS managed key: a key there is a mistake.
        ({"signing_secrets_kms_key_arn": KEY}, "signing_secrets_kms_key_arn"),
        ({"mcp_token_kms_key_arn": KEY}, "mcp_token_kms_key_arn"),
        # An alias names no key that IAM can authorise.
        (
            {
                "signing_secrets_arn": ARN,
                "signing_secrets_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:alias/x",
            },
            "signing_secrets_kms_key_arn",
        ),
        # Secrets Manager only uses a key of the secret's own region.
        (
            {
                "signing_secrets_arn": ARN,
                "signing_secrets_kms_key_arn": KEY.replace("eu-west-1", "us-east-1"),
            },
            "signing_secrets_kms_key_arn",
        ),
    ],
)
def test_misplaced_keys_fail_naming_the_key(context: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        StackConfig.from_context(VALID | context)


# Entries around the edges of the allowlist grammar: the synth must agree with the
# worker on every one of them.
ALLOWLIST_ENTRIES = [
    "*.relaylink.example",
    "mcp.relaylink.example",
    "MCP.Example.COM.",
    "203.0.113.7",
    "[::1]",
    "*.com",
    "*",
    "*.*.example.com",
    "mcp.example.123",
    "127.1",
    "0x7f.1",
    "bad host",
    "a..b",
    "-a.example",
]


def _worker_accepts(entry: str) -> bool:
    """What the worker does at cold start with MCP_ALLOWED_HOSTS."""
    env = {env_names.ENV_MCP_ALLOWED_HOSTS: entry}
    try:
        HostPolicy(host_list(env, env_names.ENV_MCP_ALLOWED_HOSTS))
    except ValueError:
        return False
    return True


def _synth_accepts(context: dict[str, Any]) -> bool:
    try:
        StackConfig.from_context(VALID | context)
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("entry", ALLOWLIST_ENTRIES)
def test_synth_and_worker_agree_on_every_allowlist_entry(entry: str) -> None:
    assert _synth_accepts({"mcp_allowed_hosts": [entry]}) == _worker_accepts(entry)


@pytest.mark.parametrize("entry", ["*.com", "mcp.example.123"])
def test_synth_refuses_an_allowlist_entry_the_worker_refuses_naming_it(entry: str) -> None:
    context = {"mcp_allowed_hosts": ["mcp.relaylink.example", entry]}
    with pytest.raises(ConfigError, match=rf"^mcp_allowed_hosts: .*{re.escape(repr(entry))}"):
        build_app(context=context)


def test_a_valid_allowlist_is_kept_as_the_worker_reads_it() -> None:
    config = StackConfig.from_context(
        {"mcp_allowed_hosts": ["*.relaylink.example", "MCP.Partner.Example.", "[::1]"]}
    )
    assert config.mcp_allowed_hosts == ("*.relaylink.example", "mcp.partner.example", "::1")
    env = {env_names.ENV_MCP_ALLOWED_HOSTS: ",".join(config.mcp_allowed_hosts)}
    worker = HostPolicy(host_list(env, env_names.ENV_MCP_ALLOWED_HOSTS))
    assert worker.allowed_hosts == config.mcp_allowed_hosts


def _worker_reads(
    *,
    max_attempts: int = settings_table.WORKER_MAX_ATTEMPTS.default,
    retry_horizon_seconds: int = settings_table.WORKER_RETRY_HORIZON_HOURS.env_default,
) -> bool:
    environment = worker_environment(
        table_name="table",
        work_queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/work",
        dead_letter_queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/dlq",
        mcp_token_secret_arn=ARN,
        mcp_allowed_hosts=["*.relaylink.example"],
        workflow=settings_table.WORKFLOW.default,
        archive_bucket="archive",
        lease_seconds=settings_table.WORKER_LEASE_SECONDS.default,
        max_attempts=max_attempts,
        retry_horizon_seconds=retry_horizon_seconds,
    )
    try:
        WorkerSettings.from_env(environment)
    except SettingsError:
        return False
    return True


@pytest.mark.parametrize("value", [1, 5, 100, 101, 1000])
def test_synth_and_worker_agree_on_worker_max_attempts(value: int) -> None:
    accepted = _synth_accepts({"worker_max_attempts": value})
    assert accepted == _worker_reads(max_attempts=value)


@pytest.mark.parametrize("hours", [1, 24, 72, 73, 1000])
def test_synth_and_worker_agree_on_worker_retry_horizon_hours(hours: int) -> None:
    accepted = _synth_accepts({"worker_retry_horizon_hours": str(hours)})
    assert accepted == _worker_reads(retry_horizon_seconds=hours * 3600)


def test_a_workflow_allowance_that_leaves_no_message_time_is_refused() -> None:
    fitting = message_seconds(
        mcp_timeout_seconds=settings_table.MCP_TIMEOUT_SECONDS.default,
        workflow_seconds=settings_table.WORKER_WORKFLOW_SECONDS.default,
    )
    timings = {"timeout_s": 180, "lease_s": 900, "visibility_s": 1080, "effect_age_s": 3600}
    check_timing(**timings, message_s=fitting)
    with pytest.raises(ValueError, match="worker_workflow_seconds"):
        check_timing(**timings, message_s=180)


def test_batch_settings_reach_the_worker_as_it_reads_them() -> None:
    config = StackConfig.from_context(
        VALID | {"worker_batch_concurrency": "4", "worker_workflow_seconds": 90}
    )
    environment = worker_environment(
        table_name="t",
        work_queue_url="https://sqs/q",
        dead_letter_queue_url="https://sqs/dlq",
        mcp_token_secret_arn=ARN,
        mcp_allowed_hosts=config.mcp_allowed_hosts,
        workflow=config.workflow,
        archive_bucket="b",
        max_attempts=config.worker_max_attempts,
        lease_seconds=900,
        batch_concurrency=config.batch_concurrency,
        workflow_seconds=config.worker_workflow_seconds,
    )
    settings = WorkerSettings.from_env(environment)
    assert (settings.batch_concurrency, settings.workflow_seconds) == (4, 90)


def test_the_default_workflow_is_an_alias_that_needs_nothing_outside_the_stack() -> None:
    config = StackConfig.from_context(VALID)
    assert config.workflow == settings_table.WORKFLOW.default == "archive"
    assert config.workflow_code.target == WORKFLOW_ALIASES["archive"]
    assert config.workflow_settings == {}


@pytest.mark.parametrize("workflow", [*WORKFLOW_ALIASES, "my_agent.flow:build"])
def test_a_workflow_is_an_alias_or_module_and_attribute(workflow: str) -> None:
    assert StackConfig.from_context(VALID | {"workflow": workflow}).workflow == workflow


def test_workflow_settings_come_from_prefixed_and_short_keys_as_strings() -> None:
    config = StackConfig.from_context(
        VALID
        | {
            "workflow_setting_model_id": "amazon.nova-lite-v1:0",
            "agent_max_tokens": 256,
            "agent_temperature": 0.5,
            "workflow_setting_verbose": True,
            "alert_url": "https://alerts.example.com/hook",
            "workflow_setting_empty": "",  # like notify_url: "" in cdk.json, unset
        }
    )
    assert config.workflow_settings == {
        "model_id": "amazon.nova-lite-v1:0",
        "max_tokens": "256",
        "temperature": "0.5",
        "verbose": "true",
        "alert_url": "https://alerts.example.com/hook",
    }


def test_a_setting_given_twice_differently_fails_naming_both_keys() -> None:
    with pytest.raises(
        ConfigError, match="workflow_setting_model_id and agent_model_id set model_id"
    ):
        StackConfig.from_context(VALID | {"agent_model_id": "a", "workflow_setting_model_id": "b"})
    same = VALID | {"agent_model_id": "a", "workflow_setting_model_id": "a"}
    assert StackConfig.from_context(same).workflow_settings == {"model_id": "a"}


def test_settings_that_would_not_fit_lambdas_environment_fail_the_synth() -> None:
    with pytest.raises(ConfigError, match="4 KB"):
        StackConfig.from_context(VALID | {"agent_system_prompt": "x" * 3000})


def test_the_app_passes_every_prefixed_setting_from_the_context() -> None:
    _, stack = build_app(
        context=VALID | {"aws:cdk:bundling-stacks": [], "workflow_setting_tone": "dry"}
    )
    assert stack.config.workflow_settings == {"tone": "dry"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("pkg", ("pkg",)),
        ("pkg>=1,<2,other[extra]==3", ("pkg>=1,<2", "other[extra]==3")),
        ("pkg>=1, !=1.5 , other", ("pkg>=1, !=1.5", "other")),
        ('["pkg>=1,<2", "other"]', ("pkg>=1,<2", "other")),
        (["pkg; python_version >= '3.12'", "pkg"], ("pkg; python_version >= '3.12'", "pkg")),
    ],
)
def test_workflow_requirements_split_between_requirements_only(
    value: Any, expected: tuple[str, ...]
) -> None:
    config = StackConfig.from_context(VALID | {"workflow_requirements": value})
    assert config.workflow_requirements == expected


def test_workflow_source_is_resolved_from_where_the_app_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my-agent").mkdir()
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    config = StackConfig.from_context(VALID | {"workflow_source": "../my-agent"})
    assert config.workflow_source == str(tmp_path / "my-agent")


def test_grant_lists_take_commas_or_json() -> None:
    other = ARN.replace("signing-AbC123", "other-XyZ789")
    config = StackConfig.from_context(
        VALID
        | {
            "worker_secret_arns": f"{ARN}, {other}",
            "worker_managed_policy_arns": '["arn:aws:iam::aws:policy/ReadOnlyAccess"]',
        }
    )
    assert config.worker_secret_arns == (ARN, other)
    assert config.worker_managed_policy_arns == ("arn:aws:iam::aws:policy/ReadOnlyAccess",)


@pytest.mark.parametrize(
    "policy",
    [
        "arn:aws:iam::aws:policy/AdministratorAccess",
        "arn:aws:iam::aws:policy/PowerUserAccess",
        "arn:aws:iam::aws:policy/AmazonS3FullAccess",
        "arn:aws:iam::aws:policy/job-function/SystemAdministrator",
    ],
)
def test_a_privileged_managed_policy_needs_an_acknowledgement_by_name(policy: str) -> None:
    name = policy.rsplit("/", 1)[-1]
    attached = VALID | {"worker_managed_policy_arns": policy}
    with pytest.raises(ConfigError, match=rf"{policy} .*-c worker_managed_policy_ack={name}$"):
        StackConfig.from_context(attached)
    with pytest.raises(ConfigError, match="worker_managed_policy_ack"):
        StackConfig.from_context(attached | {"worker_managed_policy_ack": policy})
    config = StackConfig.from_context(attached | {"worker_managed_policy_ack": name})
    assert config.worker_managed_policy_arns == (policy,)


def test_an_acknowledgement_naming_no_privileged_policy_is_refused() -> None:
    read_only = {"worker_managed_policy_arns": "arn:aws:iam::aws:policy/ReadOnlyAccess"}
    for ack in ("ReadOnlyAccess", "AdministratorAccess"):
        with pytest.raises(ConfigError, match=rf"worker_managed_policy_ack: '{ack}'"):
            StackConfig.from_context(VALID | read_only | {"worker_managed_policy_ack": ack})


def test_alert_secrets_are_named_by_complete_arn_for_the_agent_with_their_keys() -> None:
    agent = VALID | {"workflow": "agent"}
    config = StackConfig.from_context(
        agent
        | {"alert_url_secret_arn": ARN, "alert_url_kms_key_arn": KEY}
        | {"alert_signing_secret_arn": ARN.replace("signing", "sign2")}
    )
    assert config.alert_secrets == ((ARN, KEY), (ARN.replace("signing", "sign2"), None))
    for context, named in (
        ({"alert_url_secret_arn": "relaylink/alert-url"}, "alert_url_secret_arn"),
        ({"alert_url_kms_key_arn": KEY}, "alert_url_kms_key_arn: only with alert_url_secret"),
        ({"alert_url_secret_arn": ARN, "alert_url": "https://x.example"}, "one or the other"),
        ({"alert_signing_secret_arn": ARN}, "alert_signing_secret_arn signs the alert POST"),
    ):
        with pytest.raises(ConfigError, match=named):
            StackConfig.from_context(agent | context)
    with pytest.raises(ConfigError, match="only with the agent workflow"):
        StackConfig.from_context(VALID | {"alert_url_secret_arn": ARN})


def test_a_screening_guardrail_is_named_for_the_agent_by_id_and_version_refused_otherwise() -> None:
    agent = VALID | {"workflow": "agent"}
    config = StackConfig.from_context(agent | {"guardrail_id": "gr1", "guardrail_version": 2})
    assert config.workflow_settings == {"guardrail_id": "gr1", "guardrail_version": "2"}
    assert config.shipped_workflow_settings is not None
    assert config.shipped_workflow_settings.bedrock_guardrail_ids == ("gr1",)
    for context, named in (
        ({"guardrail_id": "gr1"}, "guardrail_id and guardrail_version: both or neither"),
        ({"guardrail_version": "1"}, "both or neither"),
        ({"guardrail_id": "Gr-1", "guardrail_version": "1"}, "guardrail_id: a guardrail id"),
        ({"guardrail_id": "gr1", "guardrail_version": "latest"}, "a version number or DRAFT"),
    ):
        with pytest.raises(ConfigError, match=named) as refused:
            StackConfig.from_context(agent | context)
        assert "\n" not in str(refused.value)  # one line
    for workflow in ("archive", "notify", "my_flows.triage:build"):
        with pytest.raises(ConfigError, match="guardrail_id: only with the agent workflow"):
            StackConfig.from_context(
                VALID
                | {"workflow": workflow, "notify_url": "https://n.example/in"}
                | {"guardrail_id": "gr1", "guardrail_version": "1"}
            )


def test_batch_concurrency_is_the_whole_batch_unless_set_and_never_more() -> None:
    assert StackConfig.from_context(VALID | {"worker_batch_size": 4}).batch_concurrency == 4
    config = StackConfig.from_context(
        VALID | {"worker_batch_size": "4", "worker_batch_concurrency": "2"}
    )
    assert (config.worker_batch_size, config.batch_concurrency) == (4, 2)
    with pytest.raises(ConfigError, match="worker_batch_concurrency"):
        StackConfig.from_context(VALID | {"worker_batch_size": 4, "worker_batch_concurrency": 5})


def test_the_agents_own_parser_checks_its_settings_at_synth() -> None:
    agent = VALID | {"workflow": "agent"}
    assert (
        StackConfig.from_context(agent | {"agent_max_tokens": 64}).shipped_workflow_settings
        is not None
    )
    with pytest.raises(ConfigError, match="temprature"):
        StackConfig.from_context(agent | {"workflow_setting_temprature": "0.1"})
    with pytest.raises(ConfigError, match="max_tokens"):
        StackConfig.from_context(agent | {"agent_max_tokens": "lots"})
    # Another workflow reads settings of its own: the synth leaves them to it.
    assert StackConfig.from_context(VALID | {"workflow_setting_temprature": "0.1"})


def test_every_key_the_config_reads_reaches_it_from_the_cdk_cli() -> None:
    # build_app passes the CLI's context on by name: a key missing from that list is
    # silently ignored (``-c key=value`` would change nothing). The config reads one
    # field per context row of the settings table, by the row's key.
    read = {field.name for field in dataclasses.fields(StackConfig)} - {"workflow_settings"}
    rows = {row.key for row in settings_table.SETTINGS if row.context}
    assert read <= rows
    assert read | set(config_module.SHORT_SETTING_KEYS) <= application._CONTEXT_KEYS


def test_the_notify_secret_is_named_by_complete_arn_for_the_notify_workflow_with_its_key() -> None:
    notify = VALID | {"workflow": "notify"}
    config = StackConfig.from_context(
        notify | {"notify_secret_arn": ARN, "notify_secret_kms_key_arn": KEY}
    )
    assert config.notify_secret == (ARN, KEY)
    assert config.workflow_settings == {"notify_secret_arn": ARN}
    # The long spelling is the same setting.
    assert StackConfig.from_context(notify | {"workflow_setting_notify_secret_arn": ARN}) == (
        StackConfig.from_context(notify | {"notify_secret_arn": ARN})
    )
    for context, named in (
        ({"notify_secret_arn": "relaylink/notify"}, "notify_secret_arn: a complete"),
        ({"notify_secret_kms_key_arn": KEY}, "notify_secret_kms_key_arn: only with notify_secret"),
    ):
        with pytest.raises(ConfigError, match=named):
            StackConfig.from_context(notify | context)
    with pytest.raises(ConfigError, match="only with the notify workflow"):
        StackConfig.from_context(VALID | {"workflow": "agent", "notify_secret_arn": ARN})


def test_agent_tools_is_one_spelling_in_context_and_the_construct() -> None:
    """``-c agent_tools=``, ``-c workflow_setting_agent_tools=`` and the construct's
    ``workflow_settings={"agent_tools": ...}`` all set ``tools``; ``tools`` stays an alias."""
    hosts = ("*.relaylink.example",)
    spellings = [
        StackConfig.from_context({"mcp_allowed_hosts": list(hosts), "agent_tools": "m:T"}),
        StackConfig.from_context(
            {"mcp_allowed_hosts": list(hosts), "workflow_setting_agent_tools": "m:T"}
        ),
        StackConfig(mcp_allowed_hosts=hosts, workflow_settings={"agent_tools": "m:T"}).checked(),
        StackConfig(mcp_allowed_hosts=hosts, workflow_settings={"tools": "m:T"}).checked(),
    ]
    assert [dict(c.workflow_settings) for c in spellings] == [{"tools": "m:T"}] * 4
    with pytest.raises(ConfigError, match="set tools differently"):
        StackConfig.from_context(
            {
                "mcp_allowed_hosts": list(hosts),
                "agent_tools": "m:T",
                "workflow_setting_tools": "n:T",
            }
        )
