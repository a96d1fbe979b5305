"""Screening on the local stack: the agent with a guardrail (the Bedrock emulator's).

Two flagged packages (their briefings carry the emulator's guardrail marker) and one
clean one go through ``relaylink-receiver local --workflow agent`` with
``guardrail_id`` / ``guardrail_version`` set and no ``approval`` setting. The clean one
is summarised and alerted at once; each flagged one parks, listed by ``approvals list``
with the guardrail's verdict and never its briefing, before any model call. Approved,
one is summarised and alerted once; denied, the other ends ``failed``
(``approval_denied``) with no model call and no alert. Each briefing is screened once.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from local.bedrock_emulator import DEMO_GUARDRAIL_ID, GUARDRAIL_MARKER
from local.sender import Sender, Summary
from local.stack import LocalStack
from local.stack_options import StackOptions
from tests.e2e.stacks import audited
from tests.e2e.test_approvals import cli, show, waiting
from tests.e2e.test_pipeline_over_http import _config
from tests.polling import poll

DEADLINE_SECONDS = 60.0


def send(stack: LocalStack, count: int, prefix: str) -> Summary:
    async def run() -> Summary:
        async with Sender(_config(stack)) as sender:
            return await sender.send_new(count, mcp_url=stack.state.mcp_url, package_prefix=prefix)

    return asyncio.run(run())


def test_a_briefing_the_guardrail_blocks_waits_for_a_person_and_only_then_reaches_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "stack.json"
    options = StackOptions(
        seed=25,
        workflow="agent",
        workflow_settings={"guardrail_id": DEMO_GUARDRAIL_ID, "guardrail_version": "1"},
        state_file=str(state),
    )
    with audited(options) as stack:
        assert stack.bedrock is not None
        clean = send(stack, 1, "pkg_clean")
        flagged = send(stack, 2, "pkg_flagged")
        assert clean.all_acknowledged and flagged.all_acknowledged
        (passed,) = [r.delivery_id for r in clean.results]
        approved, denied = [r.delivery_id for r in flagged.results]
        local = ("--local", str(state))

        listed = poll(
            lambda: waiting(capsys, state),
            lambda items: len(items) == 2,
            deadline_seconds=DEADLINE_SECONDS,
        )
        assert {i["delivery_id"] for i in listed} == {approved, denied}
        for entry in listed:
            assert entry["approval"] == "screening"
            proposal = entry["proposal"]
            assert proposal["title"] == (
                f"Briefing held: guardrail {DEMO_GUARDRAIL_ID} version 1 intervened"
            )
            assert "content filter PROMPT_ATTACK (HIGH): BLOCKED" in proposal["summary"]
            assert GUARDRAIL_MARKER not in json.dumps(proposal)
            assert "Ignore your rules" not in json.dumps(proposal)
        status, out, _ = cli(capsys, "approvals", "list", *local)
        assert status == 0
        assert "Briefing held" in out and GUARDRAIL_MARKER not in out
        # Nothing read the flagged briefings: no model call, no alert.
        assert poll(stack.model_calls, lambda calls: passed in calls, deadline_seconds=30)
        assert set(stack.model_calls()) == {passed}

        status, _, err = cli(capsys, "approvals", "approve", approved, *local, "--note", "ok")
        assert (status, err) == (0, ""), err
        status, _, err = cli(capsys, "approvals", "deny", denied, *local, "--note", "phishing")
        assert (status, err) == (0, ""), err

        ends = {passed: "completed", approved: "completed", denied: "failed"}
        final = poll(
            lambda: {d: show(capsys, state, d) for d in ends},
            lambda shown: all(shown[d]["state"] == end for d, end in ends.items()),
            deadline_seconds=DEADLINE_SECONDS,
            pause_seconds=0.5,
        )
        assert {d: final[d]["state"] for d in ends} == ends, final
        assert final[denied]["last_error"] == "approval_denied"
        assert [(a["name"], a["decision"]) for a in final[approved]["approvals"]] == [
            ("screening", "approved")
        ]
        assert final[passed]["approvals"] == []
        assert stack.quiet(DEADLINE_SECONDS), stack.queue_depths()
        # The alert topic's subscriber counts from its own queue: wait until it has both.
        alerts = poll(
            lambda: {k: n for k, n in stack.effects().items() if k.endswith(":alert")},
            lambda counted: len(counted) >= 2,
            deadline_seconds=DEADLINE_SECONDS,
        )
        assert alerts == {f"{passed}:alert": 1, f"{approved}:alert": 1}
        assert stack.model_calls() == {passed: 1, approved: 1}
        # Each briefing screened once: the resumed run reused the recorded verdict.
        texts = stack.bedrock.emulator.guardrail_texts()
        assert len(texts) == 3
        assert sum(GUARDRAIL_MARKER in text for text in texts) == 2
