"""Each tool's own settings: parsed once, secrets named and never inlined, one spelling."""

from __future__ import annotations

import json

import pytest

from functions.core.settings_table import canonical_workflow_settings
from functions.workflows.agent import AgentSettings, configured_tools
from functions.workflows.tool_settings import ToolSettings
from functions.workflows.tools import Tool, ToolMode

SCHEMA = {"type": "object"}
GIVEN: list[ToolSettings] = []


def build(settings: ToolSettings) -> list[Tool]:
    """A team's tools function: it takes its settings."""
    GIVEN.append(settings)
    return [Tool("open_ticket", "Opens a ticket.", SCHEMA, ToolMode.KEYED, lambda i, k: {})]


SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tickets-AbC123"


def test_tool_settings_are_read_by_tool_name() -> None:
    settings = ToolSettings.parse(
        json.dumps(
            {
                "open_ticket": {
                    "url": "https://t.example",
                    "retries": 2,
                    "token_secret_arn": SECRET_ARN,
                }
            }
        )
    )
    assert settings.of("open_ticket")["url"] == "https://t.example"
    assert settings.of("lookup") == {}
    assert settings.secret_arns == (SECRET_ARN,)


@pytest.mark.parametrize(
    ("document", "refusal"),
    [
        ({"open_ticket": {"api_token": "abc"}}, "open_ticket.api_token looks like a credential"),
        ({"open_ticket": {"url": "whsec_abc"}}, "open_ticket.url: holds a secret"),
        ({"open_ticket": {"token_secret_arn": "not a name!"}}, "a Secrets Manager secret"),
        ({"open_ticket": {"url": ["a"]}}, "a string, number or boolean"),
        (["open_ticket"], "a JSON object keyed by tool name"),
    ],
)
def test_a_secret_or_a_malformed_value_is_refused_in_one_line(
    document: object, refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal) as refused:
        ToolSettings.parse(json.dumps(document))
    assert "abc" not in str(refused.value)


def test_a_short_key_is_the_settings_name_everywhere() -> None:
    assert canonical_workflow_settings({"agent_tools": "m:T", "approval": "alert"}) == {
        "tools": "m:T",
        "approval": "alert",
    }
    assert canonical_workflow_settings({"agent_tools": "m:T", "tools": "m:T"}) == {"tools": "m:T"}
    with pytest.raises(ValueError, match="set tools differently"):
        canonical_workflow_settings({"agent_tools": "m:T", "tools": "n:T"})


def test_the_tools_function_is_given_its_settings() -> None:
    settings = AgentSettings.from_mapping(
        {
            "tools": f"{__name__}:build",
            "tool_settings": json.dumps({"open_ticket": {"url": "https://t.example"}}),
            "approval": "tools:open_ticket",
        }
    )
    (tool,) = configured_tools(settings)
    assert tool.name == "open_ticket"
    assert GIVEN[-1].of("open_ticket") == {"url": "https://t.example"}
    unknown = AgentSettings.from_mapping(
        {"tools": f"{__name__}:build", "tool_settings": json.dumps({"open_tiket": {}})}
    )
    with pytest.raises(ValueError, match=r"tool_settings names no tool of .*: open_tiket"):
        configured_tools(unknown)
