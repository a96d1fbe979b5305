"""load_workflow: the shipped workflows by alias, each checking its context at cold start."""

from __future__ import annotations

import dataclasses

import pytest

from functions.core.effects import EffectMode
from functions.core.workflow import WorkflowContext
from functions.workflows.agent import AgentWorkflow
from functions.workflows.archive import ArchiveWorkflow
from functions.workflows.notify import NotifyWorkflow
from functions.workflows.wiring import WORKFLOW_ALIASES, model_client
from functions.workflows.wiring import load as load_workflow
from local.testkit.clock import FakeClock

TOPIC = "arn:aws:sns:us-east-1:123456789012:relaylink-alerts"
CONTEXT = WorkflowContext(
    notify_url="https://notify.example/hook",
    archive_bucket="relaylink-archive",
    allow_insecure_loopback=False,
    timeout_seconds=5.0,
    clock=FakeClock(),
    table_name="relaylink",
    alert_topic_arn=TOPIC,
)


def test_aliases_name_the_shipped_workflows() -> None:
    assert isinstance(load_workflow("archive", CONTEXT), ArchiveWorkflow)
    assert isinstance(load_workflow("notify", CONTEXT), NotifyWorkflow)
    assert isinstance(load_workflow("agent", CONTEXT), AgentWorkflow)
    for alias, spec in WORKFLOW_ALIASES.items():
        assert type(load_workflow(spec, CONTEXT)) is type(load_workflow(alias, CONTEXT))


def test_archive_needs_only_its_bucket() -> None:
    bare = dataclasses.replace(CONTEXT, notify_url=None, alert_topic_arn=None)
    assert isinstance(load_workflow("archive", bare), ArchiveWorkflow)
    with pytest.raises(ValueError, match="ARCHIVE_BUCKET"):
        load_workflow("archive", dataclasses.replace(bare, archive_bucket=None))


def test_agent_needs_somewhere_to_send_its_alert() -> None:
    no_topic = dataclasses.replace(CONTEXT, alert_topic_arn=None)
    with pytest.raises(ValueError, match="alert"):
        load_workflow("agent", no_topic)
    with_url = dataclasses.replace(no_topic, settings={"alert_url": "https://alerts.example/a"})
    assert isinstance(load_workflow("agent", with_url), AgentWorkflow)
    plain_http = dataclasses.replace(no_topic, settings={"alert_url": "http://alerts.example/a"})
    with pytest.raises(ValueError, match="https"):
        load_workflow("agent", plain_http)


def test_agent_refuses_unknown_or_bad_settings() -> None:
    for settings in ({"model": "x"}, {"max_tokens": "0"}, {"bedrock_endpoint_url": "ftp://x"}):
        with pytest.raises(ValueError):
            load_workflow("agent", dataclasses.replace(CONTEXT, settings=settings))


def test_agent_budget_needs_the_table_unless_it_is_off() -> None:
    no_table = dataclasses.replace(CONTEXT, table_name="")
    with pytest.raises(ValueError, match="TABLE_NAME"):
        load_workflow("agent", no_table)
    off = dataclasses.replace(no_table, settings={"daily_token_budget": "0"})
    assert isinstance(load_workflow("agent", off), AgentWorkflow)


def test_unknown_alias_is_refused() -> None:
    with pytest.raises(ValueError, match="archive"):
        load_workflow("summarise", CONTEXT)


def test_http_effects_are_declared_keyed_only_by_their_setting() -> None:
    notify = load_workflow("notify", CONTEXT)
    assert isinstance(notify, NotifyWorkflow)
    assert notify.notify_mode is EffectMode.CHECKED
    keyed = {"notify_url_deduplicates": "true"}
    notify = load_workflow("notify", dataclasses.replace(CONTEXT, settings=keyed))
    assert isinstance(notify, NotifyWorkflow)
    assert notify.notify_mode is EffectMode.KEYED
    with pytest.raises(ValueError, match="notify_url_deduplicates must be true or false"):
        load_workflow(
            "notify", dataclasses.replace(CONTEXT, settings={"notify_url_deduplicates": "maybe"})
        )
    url = {"alert_url": "https://alerts.example/a"}
    for value, mode in (("false", EffectMode.OPERATOR), ("true", EffectMode.KEYED)):
        settings = {**url, "alert_url_deduplicates": value}
        agent = load_workflow("agent", dataclasses.replace(CONTEXT, settings=settings))
        assert isinstance(agent, AgentWorkflow)
        assert [channel.mode for channel in agent.channels()] == [EffectMode.OPERATOR, mode]


def test_any_workflow_gets_a_model_client_from_the_model_settings() -> None:
    """Settings the model does not read are the workflow's own: no error for them."""
    settings = {"max_tokens": "64", "temperature": "0.5", "ticket_url": "https://t.example"}
    client = model_client(dataclasses.replace(CONTEXT, settings=settings))
    assert (client.max_tokens, client.temperature) == (64, 0.5)
    for bad in ({"max_tokens": "0"}, {"bedrock_endpoint_url": "http://bedrock.example"}):
        with pytest.raises(ValueError):
            model_client(dataclasses.replace(CONTEXT, settings=bad))
    with pytest.raises(ValueError, match="TABLE_NAME"):
        model_client(dataclasses.replace(CONTEXT, table_name=""))
    off = dataclasses.replace(CONTEXT, table_name="", settings={"daily_token_budget": "0"})
    assert model_client(off).max_tokens == 512


def test_agent_loads_its_tools_at_cold_start() -> None:
    tools = {"tools": "local.agent_tools:TOOLS", "max_turns": "3"}
    assert isinstance(
        load_workflow("agent", dataclasses.replace(CONTEXT, settings=tools)), AgentWorkflow
    )
    with pytest.raises(ValueError, match="tools"):
        load_workflow("agent", dataclasses.replace(CONTEXT, settings={"tools": "nowhere:TOOLS"}))
