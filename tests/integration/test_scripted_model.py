"""A team's own test of its tool loop on the scripted model (docs/workflows.md, "Build
your own agent here"): the template's tools, its ticket system on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

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
    # The script's usage, as the model reported it per turn.
    assert (run.model_calls, run.input_tokens, run.output_tokens) == (3, 1550, 83)


def test_a_matched_delivery_gets_its_own_turns(tickets: ticket_server.Tickets) -> None:
    with ScriptedModel(SCRIPT) as model:
        run = run_tool_loop(TOOLS, _package("A routine check"), model)
    assert (run.tool_calls, run.model_calls) == ([], 1)
    assert run.reply.text == "Routine: nothing to do."
    assert tickets.view()["tickets"] == 0


def test_an_invalid_script_is_refused_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('{"turns": [{"tool_use": [{"name": ""}]}]}')
    with pytest.raises(ModelScriptError, match=r"turns\[0\]\.tool_use\[0\]\.name"):
        ScriptedModel(path)
