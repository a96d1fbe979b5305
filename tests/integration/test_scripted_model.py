"""A team's own test of its tool loop on the scripted model (docs/workflows.md, "Build
your own agent here"): the template's tools, its ticket system on loopback."""

from __future__ import annotations

import importlib
import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from examples.team_agent.team_tools import ticket_server, tools
from examples.team_agent.team_tools.tools import TOOLS
from functions.core.package import Package
from local.model_script import ModelScriptError
from local.scripted_model import DELIVERY_ID, ScriptedModel, run_tool_loop

SCRIPT = Path(__file__).parents[2] / "examples" / "team_agent" / "model-script.json"


def _package(title: str) -> Package:
    return Package("pkg_1", title, "The database is down.", (), datetime(2026, 1, 1, tzinfo=UTC))


@pytest.fixture
def tickets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ticket_server.Tickets]:
    tickets = ticket_server.Tickets()
    server = ticket_server.serve(tickets)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/tickets"
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"ticket_url": url}))
    monkeypatch.setattr(tools, "SETTINGS_FILE", settings)
    yield tickets
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_tool_loop_runs_on_the_scripted_model(tickets: ticket_server.Tickets) -> None:
    with ScriptedModel(SCRIPT) as model:
        run = run_tool_loop(TOOLS, _package("Outage at acme"), model)
        assert model.calls() == {DELIVERY_ID: 3}
    assert [call.tool for call in run.tool_calls] == ["lookup_customer", "open_ticket"]
    ticket = run.tool_calls[1]
    assert ticket.input == {"customer": "acme", "priority": "high"}
    assert ticket.key.startswith(f"{DELIVERY_ID}:tool:tooluse_")
    assert tickets.view() == {"posts": {ticket.key: 1}, "tickets": 1, "lookups": 0}
    assert run.reply.text == "Opened a high-priority ticket for acme (gold, eu-west-1)."
    # No usage in the script: the emulator's estimate of each turn (characters / 4).
    assert run.model_calls == 3 and run.input_tokens > run.output_tokens > 0


def test_a_matched_delivery_gets_its_own_turns(tickets: ticket_server.Tickets) -> None:
    with ScriptedModel(SCRIPT) as model:
        run = run_tool_loop(TOOLS, _package("A routine check"), model)
    assert (run.tool_calls, run.model_calls) == ([], 1)
    assert run.reply.text == "Routine: nothing to do."
    assert (run.input_tokens, run.output_tokens) == (450, 6)  # the script's usage
    assert tickets.view()["tickets"] == 0


def test_an_invalid_script_is_refused_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('{"turns": [{"tool_use": [{"name": ""}]}]}')
    with pytest.raises(ModelScriptError, match=r"turns\[0\]\.tool_use\[0\]\.name"):
        ScriptedModel(path)


def test_the_docs_pytest_example_runs_as_written(
    tickets: ticket_server.Tickets, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/workflows.md, "Build your own agent here", step 5: in the team's folder.
    docs = (Path(__file__).parents[2] / "docs" / "workflows.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", docs, re.DOTALL)
    (source,) = [block for block in blocks if "run_tool_loop(TOOLS" in block]
    monkeypatch.chdir(SCRIPT.parent)
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    team_tools = importlib.import_module("team_tools.tools")
    monkeypatch.setattr(team_tools, "SETTINGS_FILE", tools.SETTINGS_FILE)  # the test's server
    namespace: dict[str, Any] = {}
    exec(compile(source, "docs/workflows.md", "exec"), namespace)
    namespace["test_acme_gets_a_ticket"](_package("Outage at acme"))
    assert tickets.view()["tickets"] == 1
