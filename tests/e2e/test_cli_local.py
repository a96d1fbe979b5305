"""The CLI's acceptance path as a user types it: ``local`` in the background, ``send``,
``send --wait``, ``inbox list``, then SIGTERM — a clean stop, no traceback, the state
file gone."""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli.state import LocalState
from tests.polling import poll

CLI = [sys.executable, "-m", "ops.cli"]
DEADLINE_SECONDS = 60.0


def _wait_for(path: Path, process: subprocess.Popen[bytes]) -> LocalState:
    """The state file ``local`` writes once it serves (or its early exit)."""
    seen = poll(
        lambda: path.exists() or process.poll() is not None,
        bool,
        deadline_seconds=DEADLINE_SECONDS,
    )
    assert process.poll() is None, "local exited before it was ready"
    assert seen, "no state file in time"
    return LocalState.read(path)


def _inbox_items(state_file: Path, *options: str) -> list[dict[str, Any]]:
    """The inbox items ``inbox list`` prints (JSON)."""
    listed = subprocess.run(
        [*CLI, "inbox", "list", "--local", str(state_file), "--json", *options],
        capture_output=True,
        timeout=60,
        check=True,
    )
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


def _inbox_states(state_file: Path) -> list[str]:
    """Every inbox item's state, as ``inbox list`` prints them."""
    return [item["state"] for item in _inbox_items(state_file)]


def test_local_send_and_inbox_list_then_a_clean_stop(tmp_path: Path) -> None:
    state_file = tmp_path / "s.json"
    local = subprocess.Popen(
        [*CLI, "local", "--port", "0", "--state-file", str(state_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        state = _wait_for(state_file, local)
        assert set(state.pids) >= {"front_door", "worker"}
        # It holds the signing secret and the MCP token: its owner's only.
        assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
        sent = subprocess.run(
            [
                *CLI,
                "send",
                "--url",
                state.webhook_url,
                "--secret",
                state.signing_secrets[0],
                "--mcp-url",
                state.mcp_url,
                "--count",
                "30",
                "--duplicate-rate",
                "0.3",
                "--json",
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert sent.returncode == 0, sent.stderr.decode()
        summary = json.loads(sent.stdout)
        assert summary["deliveries"] == 30

        states = poll(
            lambda: _inbox_states(state_file),
            lambda states: states.count("completed") == 30,
            deadline_seconds=DEADLINE_SECONDS,
            pause_seconds=0.2,
        )
        assert states == ["completed"] * 30

        # --wait: back only once the sent deliveries are final, with their states.
        waited = subprocess.run(
            [*CLI, "send", "--local", str(state_file), "--count", "10", "--wait", "--json"],
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert waited.returncode == 0, waited.stderr.decode()
        summary = json.loads(waited.stdout)
        assert summary["states"] == {"completed": 10}
        assert _inbox_states(state_file).count("completed") == 40
        # Through the index's completed label (no scan), the package recorded on the inbox
        # item shown by its digest, and the local stack's notify workflow's repeatable
        # archive put shown done, marked by the completion.
        completed = _inbox_items(state_file, "--state", "completed")
        assert len(completed) == 40 and {i["state"] for i in completed} == {"completed"}
        shown = subprocess.run(
            [*CLI, "inbox", "show", completed[0]["delivery_id"], "--local", str(state_file)],
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout.decode()
        assert re.search(r"package\s+[0-9a-f]{64} \(\d+ bytes, recorded ", shown), shown
        assert "marked by the completion" in shown and "effect archive" in shown
    finally:
        local.send_signal(signal.SIGTERM)
        stdout, stderr = local.communicate(timeout=30)

    assert local.returncode == 0
    assert b"Traceback" not in stderr
    assert b"webhook URL" in stdout
    assert b"signing secret (generated)" in stdout
    assert not state_file.exists()
