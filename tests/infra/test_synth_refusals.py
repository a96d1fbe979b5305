"""The synth refuses, in one line, what the worker's cold start (and ``local``) refuses.

The three acceptance cases run the app as the CDK CLI does (``CDK_CONTEXT_JSON``,
``CDK_OUTDIR``), with bundling skipped (the refusals come while the stack is built,
before any bundling), and assert a non-zero exit within 120 s, one ``cdk app: error:``
line naming the problem, and no traceback. The other ways a tools setting fails go
through the same check (:func:`infra.workflow_check.check_workflow_loads`), called
directly: a synth each would cost a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from functions.core import settings_table
from infra.config import ConfigError, StackConfig
from infra.workflow_check import check_workflow_loads
from tests.infra.conftest import ROOT, cdk_json_context

NO_BUNDLING: dict[str, Any] = {"aws:cdk:bundling-stacks": []}
TOOLS = '''"""A team's tools: a read-only lookup and an acting ticket tool."""

from functions.workflows.tools import Tool, ToolMode

SCHEMA = {"type": "object", "properties": {"customer": {"type": "string"}}}


def lookup(tool_input, key):
    return {"tier": "gold"}


def build(settings):
    url = settings.of("open_ticket")["url"]
    return [
        Tool("lookup", "Looks a customer up.", SCHEMA, ToolMode.READ_ONLY, lookup),
        Tool("open_ticket", f"Opens a ticket at {url}.", SCHEMA, ToolMode.KEYED, lookup),
    ]


def broken():
    raise KeyError("https://user:password@tickets.example")
'''


@pytest.fixture(scope="module")
def team_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("team-agent")
    package = folder / "team_tools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(TOOLS)
    (package / "explodes.py").write_text("raise RuntimeError('at import')\n")
    return folder


def _synth(
    overrides: dict[str, Any], outdir: Path, *, python: tuple[str, ...] = ("app.py",)
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the app as ``npx cdk synth -c ...`` does (``python`` replaces ``app.py``'s argv)."""
    context = cdk_json_context() | NO_BUNDLING | overrides
    environment = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "18,20",
    }
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, *python],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, time.monotonic() - began


def _agent(folder: Path, **settings: Any) -> dict[str, Any]:
    return {
        "workflow": "agent",
        "workflow_source": str(folder),
        "agent_tool_settings": json.dumps({"open_ticket": {"url": "https://tickets.example"}}),
        **settings,
    }


def _refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("cdk app: error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


CASES: dict[str, tuple[dict[str, Any], str]] = {
    "tools module missing": (
        {"agent_tools": "team_tool.tools:build"},
        "no module named 'team_tool'",
    ),
    "tools module raises": (
        {"agent_tools": "team_tools.explodes:TOOLS"},
        "module team_tools.explodes raised RuntimeError",
    ),
    "tools function raises": (
        {"agent_tools": "team_tools.tools:broken"},
        "the function raised KeyError",
    ),
    "approval names a read-only tool": (
        {"agent_tools": "team_tools.tools:build", "workflow_setting_approval": "tools:lookup"},
        "approval: tools:lookup names no acting tool of the tools setting (lookup: read-only)",
    ),
    "tool settings name no tool": (
        {
            "agent_tools": "team_tools.tools:build",
            "agent_tool_settings": json.dumps({"open_tiket": {}, "open_ticket": {"url": "u"}}),
        },
        "tool_settings names no tool of team_tools.tools:build: open_tiket",
    ),
    "own workflow module raises": (
        {"workflow": "team_tools.explodes:build", "agent_tool_settings": None},
        "workflow team_tools.explodes:build: module team_tools.explodes raised RuntimeError",
    ),
    "tools not shipped": (
        {"workflow_source": None, "agent_tools": "local.agent_tools:TOOLS"},
        "module local.agent_tools is not shipped",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_check_refuses_tools_that_would_fail_the_cold_start(
    case: str, team_folder: Path
) -> None:
    settings, expected = CASES[case]
    context = cdk_json_context() | _agent(team_folder) | settings
    config = StackConfig.from_context({k: v for k, v in context.items() if v is not None})
    with pytest.raises(ConfigError) as refused:
        check_workflow_loads(config)
    line = str(refused.value)
    assert expected in line
    assert "\n" not in line
    assert "password" not in line  # the exception's type, never its message


def test_the_check_loads_tools_given_their_settings(team_folder: Path) -> None:
    context = cdk_json_context() | _agent(team_folder, agent_tools="team_tools.tools:build")
    check_workflow_loads(StackConfig.from_context(context))


def test_synth_refuses_tools_naming_a_missing_attribute(team_folder: Path, tmp_path: Path) -> None:
    overrides = _agent(team_folder, agent_tools="team_tools.tools:MISSING")
    done, took = _synth(overrides, tmp_path)
    line = _refusal(done)
    assert "module team_tools.tools has no attribute 'MISSING'" in line, line
    assert took < 120


def test_synth_refuses_an_approval_naming_a_missing_tool(team_folder: Path, tmp_path: Path) -> None:
    overrides = _agent(
        team_folder,
        agent_tools="team_tools.tools:build",
        workflow_setting_approval="tools:open_tiket",
    )
    done, took = _synth(overrides, tmp_path)
    line = _refusal(done)
    assert "approval: tools:open_tiket names no acting tool" in line, line
    assert took < 120


def test_synth_refuses_a_misspelt_context_key(tmp_path: Path) -> None:
    done, took = _synth({"worker_memroy_mb": 512}, tmp_path)
    line = _refusal(done)
    assert "unknown context key worker_memroy_mb: did you mean worker_memory_mb?" in line
    assert took < 120


def test_keys_the_team_names_or_namespaces_pass() -> None:
    allowed = ("my_team_owner",)
    assert settings_table.unknown_context_key("my_team_owner", allowed) is None
    assert settings_table.unknown_context_key("team:cost-center", allowed) is None
    assert settings_table.unknown_context_key("@aws-cdk/core:checkSecretUsage") is None
    assert settings_table.unknown_context_key("workflow_setting_anything") is None
    assert settings_table.unknown_context_key("worker_memory_mb") is None
    refused = settings_table.unknown_context_key("my_team_owner")
    assert refused is not None and "context_keys_allowed" in refused


def test_synth_without_pip_names_the_fix_in_one_line(tmp_path: Path) -> None:
    """An interpreter without pip (a venv uv made) reaches the pip step: the synth says
    how to get pip, in one line, before any bundling callback could bury it in jsii's
    traceback. (``sys.modules["pip"] = None`` is how Python marks a module absent.)"""
    without_pip = (
        "import runpy, sys; sys.modules['pip'] = None; sys.argv = ['app.py'];"
        " runpy.run_path('app.py', run_name='__main__')"
    )
    overrides = {"workflow_requirements": "never-installed==1.0"}
    done, _ = _synth(overrides, tmp_path, python=("-c", without_pip))
    line = _refusal(done)
    assert "the bundler installs the functions' wheels with pip" in line
    assert f"uv pip install --python {sys.executable} pip" in line
