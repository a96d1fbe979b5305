"""Acting tools that wait for a person, on the local stack, driven from the CLI.

The stack is the one ``relaylink-receiver local --workflow agent --workflow-setting
tools=local.agent_tools:TOOLS --workflow-setting approval=tools:open_ticket`` starts,
the Bedrock emulator scripted to look a customer up and then open a ticket (a short
timeout, so the undecided one expires within the test). Three deliveries park on
their ticket call and ``approvals list`` shows each proposed call; the first is
approved while the emulator loses the decision's answer (the write happened, the CLI
hears a 500): the CLI still reports it applied, the ticket is opened once with the
key ``<delivery_id>:tool:<tool-use id>`` and the loop goes on to its alert; the second
is denied (no ticket, no alert, ``approval_denied``); the third expires.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from functions.core import table_layout
from local import agent_tools
from local.stack import LocalStack
from local.stack_options import StackOptions
from tests.e2e.stacks import audited
from tests.e2e.test_approvals import DEADLINE_SECONDS, TIMEOUT_MINUTES, cli, show, three_parked
from tests.polling import poll


def test_tool_calls_wait_for_a_person_and_an_approval_whose_answer_was_lost_acts_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "stack.json"
    options = StackOptions(
        seed=25,
        workflow="agent",
        workflow_settings={
            "tools": "local.agent_tools:TOOLS",
            "approval": f"tools:{agent_tools.TICKET_TOOL}",
            "approval_timeout_minutes": str(TIMEOUT_MINUTES),
        },
        state_file=str(state),
        reconcile_interval_seconds=1.0,
    )
    with audited(options) as stack:
        assert stack.bedrock is not None and stack.emulator is not None
        stack.bedrock.emulator.script_tools(agent_tools.SCRIPT)
        (approved, denied, undecided), listed = three_parked(stack, capsys, state)
        local = ("--local", str(state))
        names = {i["delivery_id"]: i["approval"] for i in listed}
        for entry in listed:
            proposal = entry["proposal"]
            assert entry["approval"].startswith("tool.")
            assert (proposal["tool"], proposal["input"]) == (
                agent_tools.TICKET_TOOL,
                {"customer": "acme", "priority": "high"},
            )
            assert proposal["key"] == f"{entry['delivery_id']}:tool:{proposal['tool_use_id']}"
        status, out, _ = cli(capsys, "approvals", "list", *local)
        assert status == 0
        assert f"{names[approved]}: tool open_ticket " in out
        assert _tickets(stack) == {}  # nothing acts while they wait

        # The decision's transaction commits and its answer is lost.
        lost = f"{table_layout.SK_APPROVAL_PREFIX}{names[approved]}"
        stack.emulator.faults.lose_next("TransactWriteItems", containing=lost)
        digests = {i["delivery_id"]: i["short_digest"] for i in listed}
        argv = ("approvals", "approve", approved, *local, "--proposal", digests[approved])
        status, out, err = cli(capsys, *argv, "--json", "--by", "alice")
        assert (status, err) == (0, ""), err
        decided = json.loads(out)
        assert (decided["outcome"], decided["resumed"]) == ("applied", True)
        assert stack.emulator.faults.counts().get("lost_answer") == 1
        status, out, _ = cli(capsys, "approvals", "approve", approved, *local)
        assert status == 0
        assert "already approved" in out

        deny = ("approvals", "deny", denied, *local, "--note", "no ticket", "--by", "bob")
        status, _, err = cli(capsys, *deny)
        assert (status, err) == (0, "")

        ends = {approved: "completed", denied: "failed", undecided: "failed"}
        final = poll(
            lambda: {d: show(capsys, state, d) for d in ends},
            lambda shown: all(shown[d]["state"] == end for d, end in ends.items()),
            deadline_seconds=DEADLINE_SECONDS,
            pause_seconds=0.5,
        )
        assert {d: final[d]["state"] for d in ends} == ends, final
        assert final[denied]["last_error"] == "approval_denied"
        assert final[undecided]["last_error"] == "approval_expired"
        decisions = {
            d: [(a["name"], a["decision"], a["decided_by"]) for a in final[d]["approvals"]]
            for d in ends
        }
        assert decisions == {
            approved: [(names[approved], "approved", "alice")],
            denied: [(names[denied], "denied", "bob")],
            undecided: [(names[undecided], "expired", "timeout")],
        }
        # The ticket call approved is the one listed: its arguments and its package.
        (asked,) = final[approved]["approvals"]
        assert asked["proposal_digest"].startswith(digests[approved])
        assert asked["proposal"]["input"] == {"customer": "acme", "priority": "high"}
        assert stack.quiet(DEADLINE_SECONDS), stack.queue_depths()
        # The approved ticket was opened once, under its tool-use's key; the others never.
        (approved_item,) = [i for i in listed if i["delivery_id"] == approved]
        assert _tickets(stack) == {approved_item["proposal"]["key"]: 1}
        alerts = {k: n for k, n in stack.effects().items() if k.endswith(":alert")}
        assert alerts == {f"{approved}:alert": 1}
        # Each turn asked once: the lookup's, the ticket's, and (approved only) the summary.
        assert stack.model_calls() == {approved: 3, denied: 2, undecided: 2}


def _tickets(stack: LocalStack) -> dict[str, int]:
    return {key: n for key, n in stack.effects().items() if ":tool:" in key}
