"""``approvals list|approve|deny`` and ``inbox show`` as an operator reads them (moto)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from functions.core.ports.approvals import ApprovalRecord
from ops import approvals
from tests.operator_harness import NOW, Stack, run_cli

ALERT_PROPOSAL = {"title": "Quarterly review", "summary": "Pick offer B.", "channels": ["alert"]}


def parked(stack: Stack, name: str = "alert", proposal: Mapping[str, Any] = ALERT_PROPOSAL) -> str:
    """A delivery the agent's gate parked, as the worker leaves it."""
    delivery_id = stack.accept()
    claim = stack.claims.claim(delivery_id, owner="w0", now=NOW, lease_seconds=300).claim
    approvals.approvals_store(stack.target).request(
        ApprovalRecord(delivery_id, name, proposal, NOW, NOW + 3600), expires_at=NOW + 86400
    )
    stack.claims.park(claim, now=NOW, approval=name, deadline=NOW + 3600)
    return delivery_id


def test_list_shows_a_proposed_tool_call_with_its_input(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "tool.0123456789abcdef"
    call = {
        "tool": "open_ticket",
        "input": {"priority": "high", "customer": "acme"},
        "tool_use_id": "tooluse_1",
        "key": "k",
    }
    delivery_id = parked(stack, name, call)
    status, out, _ = run_cli(capsys, stack.cli("approvals", "list"))
    assert status == 0
    (line,) = [x for x in out.splitlines() if delivery_id in x]
    assert line.endswith(f'{name}: tool open_ticket {{"customer": "acme", "priority": "high"}}')
    status, out, _ = run_cli(capsys, stack.cli("approvals", "list", "--json"))
    (item,) = json.loads(out)["items"]
    assert (item["approval"], item["proposal"]) == (name, call)
    status, out, _ = run_cli(capsys, stack.cli("approvals", "approve", delivery_id))
    assert (status, out) == (
        0,
        f"approved {delivery_id} ({name}): its work item is sent: a worker resumes it\n",
    )


def test_list_shows_what_each_proposes_and_approve_resumes_it_once(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = parked(stack)
    status, out, _ = run_cli(capsys, stack.cli("approvals", "list"))
    assert status == 0
    assert delivery_id in out
    assert "'Quarterly review' 'Pick offer B.'" in out
    assert out.endswith("1 waiting\n")
    status, out, _ = run_cli(capsys, stack.cli("inbox", "list", "--state", "awaiting_approval"))
    assert status == 0 and delivery_id in out

    status, out, err = run_cli(
        capsys, stack.cli("approvals", "approve", delivery_id, "--note", "checked")
    )
    assert (status, err) == (0, "")
    assert out == f"approved {delivery_id} (alert): its work item is sent: a worker resumes it\n"
    assert [json.loads(b)["delivery_id"] for b in stack.drain(stack.target.work_queue_url)] == [
        delivery_id
    ]
    status, out, _ = run_cli(capsys, stack.cli("approvals", "approve", delivery_id, "--json"))
    assert status == 0
    assert json.loads(out)["outcome"] == "unchanged"
    assert stack.drain(stack.target.work_queue_url) == []
    status, out, _ = run_cli(capsys, stack.cli("approvals", "list", "--json"))
    assert json.loads(out) == {"count": 0, "items": []}

    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert status == 0
    (line,) = [x for x in out.splitlines() if x.startswith("approval alert")]
    assert "approved" in line and "by operator (note: checked)" in line


def test_deny_ends_it_failed_and_approve_then_is_one_refusing_line(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = parked(stack)
    status, out, _ = run_cli(capsys, stack.cli("approvals", "deny", delivery_id))
    assert status == 0
    assert out == f"denied {delivery_id} (alert): it ends failed\n"
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id, "--json"))
    shown = json.loads(out)
    assert (shown["state"], shown["last_error"]) == ("failed", "approval_denied")
    assert shown["approvals"][0]["decision"] == "denied"
    status, out, err = run_cli(capsys, stack.cli("approvals", "approve", delivery_id))
    assert (status, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith("relaylink-receiver approvals: error: approval_decided: ")
    assert stack.drain(stack.target.work_queue_url) == []


def test_a_delivery_that_waits_for_nothing_is_refused(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    status, _, err = run_cli(capsys, stack.cli("approvals", "deny", delivery_id))
    assert status == 1
    assert err.startswith("relaylink-receiver approvals: error: not_awaiting_approval: ")
    status, _, err = run_cli(
        capsys, stack.cli("approvals", "deny", delivery_id, "--note", "x" * 501)
    )
    assert status == 2
    assert "--note is longer than 500" in err
