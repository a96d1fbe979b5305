"""``local`` builds the worker's workflow before it says ready: a workflow that cannot
be loaded or built refuses the start in one line naming it, instead of a stack whose
deliveries all stay pending."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "ops.cli"]
DEADLINE_SECONDS = 60.0
FACTORY_THAT_RAISES = "def build(context):\n    raise ValueError()\n"


@pytest.mark.parametrize(
    ("workflow", "reason"),
    [
        ("team_flow_absent:build", "no module named 'team_flow_absent'"),
        ("team_flow:absent", "module team_flow has no attribute 'absent'"),
        ("team_flow:build", ": ValueError"),
    ],
)
def test_local_refuses_to_start_a_workflow_it_cannot_build(
    tmp_path: Path, workflow: str, reason: str
) -> None:
    (tmp_path / "team_flow.py").write_text(FACTORY_THAT_RAISES)
    started = subprocess.run(
        [*CLI, "local", "--workflow", workflow, "--workflow-source", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert started.returncode == 2
    assert "ready" not in started.stdout
    (line,) = started.stderr.splitlines()
    assert line.startswith(
        "relaylink-receiver local: error: workflow_invalid: the worker cannot build"
        f" workflow {workflow!r}: "
    )
    assert reason in line


TOOLS_SAY_WHICH = (
    "from functions.workflows.tools import Tool, ToolMode\n"
    "TOOLS = [Tool('lookup', 'Looks up.', {'type': 'object'}, ToolMode.READ_ONLY,"
    " lambda i, k: {})]\n"
)


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        (["agent_tools=team_tools:MISSING"], "module team_tools has no attribute 'MISSING'"),
        (
            ["agent_tools=team_tools:TOOLS", "approval=tools:lookup"],
            "approval: tools:lookup names no acting tool of the tools setting (lookup: read-only)",
        ),
    ],
)
def test_local_refuses_tools_as_the_synth_does(
    tmp_path: Path, settings: list[str], reason: str
) -> None:
    """The same check and the same words as ``make synth`` (tests/infra/test_synth_refusals.py)."""
    (tmp_path / "team_tools.py").write_text(TOOLS_SAY_WHICH)
    options = [arg for setting in settings for arg in ("--workflow-setting", setting)]
    started = subprocess.run(
        [*CLI, "local", "--workflow", "agent", "--workflow-source", str(tmp_path), *options],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert started.returncode == 2, started.stderr
    (line,) = started.stderr.splitlines()
    assert reason in line
