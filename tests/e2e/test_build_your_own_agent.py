"""Acceptance of docs/workflows.md, "Build your own agent here", typed as a team types it.

The team's folder is examples/team_agent: a read-only ``lookup_customer`` and an acting
``open_ticket`` (mode ``checked``) that POSTs to the team's ticket system on loopback
with the delivery-derived key ``<delivery_id>:tool:<tool-use id>``, and a model script
asking for both. ``relaylink-receiver local --model-script ... --workflow-setting
approval=tools:open_ticket`` runs it; ``send --wait`` stops at the five deliveries
awaiting approval (exit 3); each is approved from the CLI. Five POSTs, one per key;
and again with ``--kill-worker after:tool:open_ticket``, which SIGKILLs the worker
right after a ticket's POST, before the ledger's record: still five POSTs, each key
once (the restarted worker asks the ticket system, finds the ticket, POSTs nothing).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.team_agent.team_tools import ticket_server
from tests.e2e.test_cli_local import CLI, _inbox_items, _wait_for
from tests.polling import poll

ROOT = Path(__file__).resolve().parents[2]
TEAM = ROOT / "examples" / "team_agent"
DELIVERIES = 5
DEADLINE_SECONDS = 180.0
EXIT_AWAITING_APPROVAL = 3


@pytest.fixture
def tickets() -> Iterator[tuple[ticket_server.Tickets, str]]:
    """The team's ticket system on loopback, and its URL."""
    tickets = ticket_server.Tickets()
    server = ticket_server.serve(tickets)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield tickets, f"http://127.0.0.1:{server.server_address[1]}/tickets"
    server.shutdown()
    server.server_close()
    thread.join()


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv], capture_output=True, text=True, timeout=DEADLINE_SECONDS, check=False
    )


def _team_folder(where: Path, ticket_url: str) -> Path:
    """The template copied as a team starts from it, pointed at its ticket system."""
    folder = Path(shutil.copytree(TEAM, where / "my-agent"))
    (folder / "team_tools" / "settings.json").write_text(json.dumps({"ticket_url": ticket_url}))
    return folder


def _run(state_file: Path, ticket_url: str, *extra: str) -> tuple[str, str, list[dict[str, Any]]]:
    """The walk-through, start to end; returns ``local``'s stdout, ``send``'s stderr and
    what ``inbox show`` says of each delivery."""
    team = _team_folder(state_file.parent, ticket_url)
    local = subprocess.Popen(
        [
            *CLI,
            *["local", "--port", "0", "--state-file", str(state_file), "--workflow", "agent"],
            *["--workflow-source", str(team)],
            *["--workflow-setting", "tools=team_tools.tools:TOOLS"],
            *["--workflow-setting", "approval=tools:open_ticket"],
            *["--model-script", str(team / "model-script.json"), *extra],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(state_file, local)  # type: ignore[arg-type]
        here = ("--local", str(state_file))
        sent = _cli("send", *here, "--count", str(DELIVERIES), "--wait", "--json")
        assert sent.returncode == EXIT_AWAITING_APPROVAL, sent.stderr
        assert json.loads(sent.stdout)["states"] == {"awaiting_approval": DELIVERIES}
        listed = _cli("approvals", "list", *here, "--json")
        waiting: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
        assert len(waiting) == DELIVERIES
        assert {w["proposal"]["tool"] for w in waiting} == {"open_ticket"}
        for item in waiting:
            approved = _cli("approvals", "approve", item["delivery_id"], *here)
            assert approved.returncode == 0, approved.stderr
        completed = poll(
            lambda: _inbox_items(state_file, "--state", "completed"),
            lambda items: len(items) == DELIVERIES,
            deadline_seconds=DEADLINE_SECONDS,
        )
        assert len(completed) == DELIVERIES, _inbox_items(state_file)
        shown = [
            json.loads(_cli("inbox", "show", item["delivery_id"], *here, "--json").stdout)
            for item in completed
        ]
    finally:
        local.send_signal(signal.SIGTERM)
        out, err = local.communicate(timeout=60)
    assert local.returncode == 0, err
    assert "Traceback" not in err
    return out, sent.stderr, shown


def _report(
    label: str, tickets: ticket_server.Tickets, local_out: str, shown: list[dict[str, Any]]
) -> None:
    """What the run did, for a person reading ``pytest -s``."""
    view = tickets.view()
    lines = [f"{label}: {sum(view['posts'].values())} POSTs, {view['tickets']} tickets,"]
    lines[0] += f" {view['lookups']} lookups"
    lines += [f"  {key}: {posts} POST(s)" for key, posts in sorted(view["posts"].items())]
    lines += [f"  local: {line}" for line in local_out.splitlines() if "kill point" in line]
    lines += [
        f"  {d['delivery_id']}: {d['model_calls']} model calls, {d['input_tokens']} input"
        f" and {d['output_tokens']} output tokens"
        for d in shown
    ]
    print("\n".join(lines), file=sys.stderr)


def test_five_approved_deliveries_open_five_tickets(
    tmp_path: Path, tickets: tuple[ticket_server.Tickets, str]
) -> None:
    system, url = tickets
    local_out, send_err, shown = _run(tmp_path / "stack.json", url)
    _report("without a kill", system, local_out, shown)
    assert "awaiting_approval: 5 of 5 deliveries await a person's decision" in send_err
    posts = system.view()["posts"]
    assert len(posts) == DELIVERIES and set(posts.values()) == {1}
    assert all(":tool:tooluse_" in key for key in posts)
    # Three turns each: the lookup's, the ticket's, the answer; each asked once.
    assert {d["model_calls"] for d in shown} == {3}


def test_killed_right_after_the_ticket_post_still_five_posts_each_key_once(
    tmp_path: Path, tickets: tuple[ticket_server.Tickets, str]
) -> None:
    system, url = tickets
    point = ("--kill-worker", "after:tool:open_ticket")
    local_out, _, shown = _run(tmp_path / "stack.json", url, *point)
    _report("killed after:tool:open_ticket", system, local_out, shown)
    assert "kill point    after:tool:open_ticket (once)" in local_out
    killed = [line for line in local_out.splitlines() if "SIGKILLed worker pid" in line]
    assert len(killed) == 1, local_out
    view = system.view()
    assert len(view["posts"]) == DELIVERIES and set(view["posts"].values()) == {1}
    # The restarted worker found the killed attempt's intent and asked; nothing else did.
    assert view["lookups"] == 1
