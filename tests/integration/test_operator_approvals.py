"""``approvals list|approve|deny`` and ``inbox show`` as an operator reads them (moto)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

import pytest

from functions.core.ports.approvals import ApprovalRecord
from ops import approvals
from tests.operator_harness import NOW, Stack, run_cli

PACKAGE = "e" * 64
ALERT_PROPOSAL = {"title": "Quarterly review", "summary": "Pick offer B.", "channels": ["alert"]}


def parked(
    stack: Stack,
    name: str = "alert",
    proposal: Mapping[str, Any] = ALERT_PROPOSAL,
    *,
    deadline: int = NOW + 3600,
    delivery_id: str | None = None,
) -> str:
    """A delivery the agent's gate parked, as the worker leaves it."""
    delivery_id = delivery_id or stack.accept()
    claim = stack.claims.claim(delivery_id, owner="w0", now=NOW, lease_seconds=300).claim
    assert claim is not None
    approvals.approvals_store(stack.target).request(
        ApprovalRecord(delivery_id, name, proposal, NOW, deadline, package_digest=PACKAGE),
        expires_at=NOW + 86400,
    )
    stack.claims.park(claim, now=NOW, approval=name, deadline=deadline)
    return delivery_id


def record_of(stack: Stack, delivery_id: str, name: str = "alert") -> ApprovalRecord:
    record = approvals.approvals_store(stack.target).get(delivery_id, name)
    assert record is not None
    return record


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
    assert line.endswith(f'{name}: tool open_ticket {{"customer":"acme","priority":"high"}}')
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
        capsys, stack.cli("approvals", "approve", delivery_id, "--note", "checked", "--by", "alice")
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
    assert "approved" in line and "by alice (note: checked)" in line


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


# --- a decision names what it decides, in time, and who made it ----------------------


def test_approve_naming_another_proposal_is_one_refusing_line_and_nothing_moves(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = parked(stack)
    short = record_of(stack, delivery_id).short_digest()
    status, out, _ = run_cli(capsys, stack.cli("approvals", "list"))
    (line,) = [x for x in out.splitlines() if delivery_id in x]
    assert f"  {short}  " in line
    other = "0" * 12 if short != "0" * 12 else "1" * 12
    argv = stack.cli("approvals", "approve", delivery_id, "--proposal", other)
    status, out, err = run_cli(capsys, argv)
    assert (status, out, err.count("\n")) == (1, "", 1)
    assert err.startswith("relaylink-receiver approvals: error: approval_other_proposal: ")
    assert f"--proposal {short}" in err
    item = stack.claims.get(delivery_id)
    assert item is not None and item.state.value == "awaiting_approval"
    assert stack.drain(stack.target.work_queue_url) == []
    argv = stack.cli("approvals", "approve", delivery_id, "--proposal", short.upper())
    status, out, _ = run_cli(capsys, argv)
    assert status == 0
    decided = record_of(stack, delivery_id).decided
    assert decided is not None
    assert decided.proposal == record_of(stack, delivery_id).proposal_digest()
    status, _, err = run_cli(
        capsys, stack.cli("approvals", "deny", delivery_id, "--proposal", "xyz")
    )
    assert status == 2
    assert "bad_option: --proposal is a proposal's digest" in err


def test_approve_without_a_proposal_is_refused_once_the_delivery_asked_for_another(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    """Approved once; the resumed run proposed something else (say, from a changed
    package): approving that one needs its digest, read first."""
    delivery_id = parked(stack)
    status, _, _ = run_cli(capsys, stack.cli("approvals", "approve", delivery_id))
    assert status == 0
    stack.drain(stack.target.work_queue_url)
    changed = {**ALERT_PROPOSAL, "title": "Totally different title"}
    parked(stack, "alert.0123456789ab", changed, delivery_id=delivery_id)
    waiting = record_of(stack, delivery_id, "alert.0123456789ab")
    status, out, err = run_cli(capsys, stack.cli("approvals", "approve", delivery_id))
    assert (status, out) == (1, "")
    assert err.startswith("relaylink-receiver approvals: error: approval_proposal_required: ")
    assert f"--proposal {waiting.short_digest()}" in err
    assert stack.drain(stack.target.work_queue_url) == []
    status, out, _ = run_cli(capsys, stack.cli("approvals", "list", "--full"))
    assert "Totally different title" in out
    assert f"package {PACKAGE}" in out
    argv = stack.cli("approvals", "approve", delivery_id, "--proposal", waiting.short_digest())
    status, _, _ = run_cli(capsys, argv)
    assert status == 0
    assert len(stack.drain(stack.target.work_queue_url)) == 1


def test_approve_after_the_deadline_exits_non_zero_naming_approval_expired(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    deadline = int(time.time()) - 60  # the CLI decides at the wall clock's now
    delivery_id = parked(stack, deadline=deadline)
    for action in ("approve", "deny"):
        status, out, err = run_cli(capsys, stack.cli("approvals", action, delivery_id))
        assert (status, out, err.count("\n")) == (1, "", 1)
        assert err.startswith("relaylink-receiver approvals: error: approval_expired: ")
    item = stack.claims.get(delivery_id)
    assert item is not None and item.state.value == "awaiting_approval"  # nothing acts
    assert record_of(stack, delivery_id).decided is None
    assert stack.drain(stack.target.work_queue_url) == []


def test_list_escapes_what_a_reader_would_not_see_and_says_where_it_cut(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = "Pay \u202eacme\u202c now\u200b\x85 " + "x" * 400
    delivery_id = parked(stack, proposal={**ALERT_PROPOSAL, "summary": summary})
    status, out, _ = run_cli(capsys, stack.cli("approvals", "list"))
    (line,) = [x for x in out.splitlines() if delivery_id in x]
    for hidden in ("\u202e", "\u202c", "\u200b", "\x85"):
        assert hidden not in line
    assert "Pay \\u202eacme\\u202c now\\u200b\\u0085" in line
    assert "… [cut at 160 of " in line
    status, out, _ = run_cli(capsys, stack.cli("approvals", "list", "--full"))
    assert status == 0
    assert "cut at" not in out
    assert "x" * 400 in out
    assert "\u202e" not in out


def test_who_decided_is_recorded_and_inbox_show_prints_it_with_the_whole_proposal(
    stack: Stack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAYLINK_OPERATOR", "bob")
    delivery_id = parked(stack)
    status, _, _ = run_cli(capsys, stack.cli("approvals", "deny", delivery_id, "--note", "no"))
    assert status == 0
    decided = record_of(stack, delivery_id).decided
    assert decided is not None and decided.decided_by == "bob"
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert "denied" in out and "by bob (note: no)" in out
    assert re.search(rf"^  package +{PACKAGE}$", out, re.MULTILINE)
    assert "Quarterly review" in out and "Pick offer B." in out
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id, "--json"))
    (shown,) = json.loads(out)["approvals"]
    assert (shown["decided_by"], shown["package_digest"]) == ("bob", PACKAGE)
    assert shown["proposal"] == ALERT_PROPOSAL
    status, _, err = run_cli(
        capsys, stack.cli("approvals", "deny", parked(stack), "--by", "eve\u202e")
    )
    assert status == 2 and "bad_option: --by" in err
