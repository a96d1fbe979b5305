"""The approval gate on the local stack, as an operator drives it from the CLI.

The stack is the one ``relaylink-receiver local --workflow agent --workflow-setting
approval=alert`` starts (a short timeout, so the undecided one expires within the
test). Three deliveries park and show in ``approvals list``; the first is approved
(twice: its alert still goes out once; naming another proposal is refused first), the
second denied (approving it then is refused, one line), the third left to its timeout
(approving it after is refused, ``approval_expired``); each ends terminal and ``inbox
show`` names the decision, who or what made it, when, and the proposal's digests.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from local.stack import LocalStack
from local.stack_options import StackOptions
from ops.cli import main
from tests.e2e.stacks import audited
from tests.e2e.test_pipeline_over_http import _send as send
from tests.polling import poll

TIMEOUT_MINUTES = 0.25  # 15 s: the undecided one expires within the test
DEADLINE_SECONDS = 45.0


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def show(capsys: pytest.CaptureFixture[str], state: Path, delivery_id: str) -> dict[str, Any]:
    status, out, _ = cli(capsys, "inbox", "show", delivery_id, "--local", str(state), "--json")
    assert status == 0
    shown: dict[str, Any] = json.loads(out)
    return shown


def waiting(capsys: pytest.CaptureFixture[str], state: Path) -> list[dict[str, Any]]:
    """``approvals list --json``: what waits, with what each proposes."""
    status, out, err = cli(capsys, "approvals", "list", "--local", str(state), "--json")
    assert status == 0, err
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def three_parked(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], state: Path
) -> tuple[list[str], list[dict[str, Any]]]:
    """Three deliveries sent, once ``approvals list`` shows all three: their ids, the list."""
    summary = send(stack, 3)
    assert summary.all_acknowledged
    sent = [r.delivery_id for r in summary.results]
    listed = poll(
        lambda: waiting(capsys, state),
        lambda items: len(items) == 3,
        deadline_seconds=DEADLINE_SECONDS,
    )
    assert {i["delivery_id"] for i in listed} == set(sent)
    return sent, listed


def test_parked_deliveries_are_approved_once_denied_or_expired_and_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "stack.json"
    options = StackOptions(
        seed=24,
        workflow="agent",
        workflow_settings={"approval": "alert", "approval_timeout_minutes": str(TIMEOUT_MINUTES)},
        state_file=str(state),
        reconcile_interval_seconds=1.0,
    )
    with audited(options) as stack:
        started = time.monotonic()
        (approved, denied, undecided), listed = three_parked(stack, capsys, state)
        local = ("--local", str(state))
        for entry in listed:
            assert entry["approval"] == "alert"
            assert entry["proposal"]["delivery_id"] == entry["delivery_id"]
            assert entry["proposal"]["summary"]  # what the alert will say
            assert entry["proposal"]["channels"] == ["alert"]
        assert _alerts(stack) == {}  # nothing goes out while they wait

        digests = {entry["delivery_id"]: entry["short_digest"] for entry in listed}
        # Naming another proposal than the one that waits is refused, and nothing moves.
        other = "0" * 12 if digests[approved] != "0" * 12 else "1" * 12
        argv = ("approvals", "approve", approved, *local, "--proposal", other)
        status, _, err = cli(capsys, *argv)
        assert status == 1
        assert err.startswith("relaylink-receiver approvals: error: approval_other_proposal: ")
        assert f"--proposal {digests[approved]}" in err
        argv = ("approvals", "approve", approved, *local, "--proposal", digests[approved])
        status, out, err = cli(capsys, *argv, "--note", "ok", "--by", "alice")
        assert (status, err) == (0, ""), err
        assert "a worker resumes it" in out
        status, out, _ = cli(capsys, "approvals", "approve", approved, *local)
        assert status == 0
        assert "already approved" in out
        assert "nothing changed" in out

        deny = ("approvals", "deny", denied, *local, "--note", "not now", "--by", "bob")
        status, _, err = cli(capsys, *deny)
        assert (status, err) == (0, "")
        status, _, err = cli(capsys, "approvals", "approve", denied, *local)
        assert status == 1
        assert err.count("\n") == 1
        assert err.startswith("relaylink-receiver approvals: error: approval_decided: ")

        ends = {approved: "completed", denied: "failed", undecided: "failed"}
        final = poll(
            lambda: {d: show(capsys, state, d) for d in ends},
            lambda shown: all(shown[d]["state"] == end for d, end in ends.items()),
            deadline_seconds=DEADLINE_SECONDS,
            pause_seconds=0.5,
        )
        took = time.monotonic() - started
        assert {d: final[d]["state"] for d in ends} == ends, final
        assert final[denied]["last_error"] == "approval_denied"
        assert final[undecided]["last_error"] == "approval_expired"
        # A decision after the deadline is refused naming approval_expired; nothing acts.
        argv = ("approvals", "approve", undecided, *local, "--proposal", digests[undecided])
        status, out, err = cli(capsys, *argv)
        assert (status, out) == (1, "")
        assert err.startswith("relaylink-receiver approvals: error: approval_expired: ")
        decisions = {
            d: [
                (a["name"], a["decision"], a["decided_by"], a["note"])
                for a in final[d]["approvals"]
            ]
            for d in ends
        }
        assert decisions == {
            approved: [("alert", "approved", "alice", "ok")],
            denied: [("alert", "denied", "bob", "not now")],
            undecided: [("alert", "expired", "timeout", None)],
        }
        assert all(final[d]["approvals"][0]["decided_at"] for d in ends)
        for d in ends:  # each decision is about the proposal listed, and its package
            (asked,) = final[d]["approvals"]
            assert asked["proposal_digest"].startswith(digests[d])
            assert len(asked["package_digest"]) == 64
        # The approved alert went out once; the denied and the expired ones never.
        assert stack.quiet(DEADLINE_SECONDS), stack.queue_depths()
        # The alert topic's subscriber counts from its own queue: wait until it has one.
        alerts = poll(lambda: _alerts(stack), bool, deadline_seconds=DEADLINE_SECONDS)
        assert alerts == {f"{approved}:alert": 1}
        assert set(stack.model_calls()) == {approved, denied, undecided}
        assert all(n == 1 for n in stack.model_calls().values())  # resumed, not re-asked
        print(f"approved, denied and expired ended terminal within {took:.1f} s")


def _alerts(stack: LocalStack) -> dict[str, int]:
    return {key: n for key, n in stack.effects().items() if key.endswith(":alert")}
