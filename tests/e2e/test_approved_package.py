"""What a person approved is what runs, on the local stack, against an MCP server whose
packages change after their first fetch (``pkg_changing*``: another title and briefing
from the second fetch on).

With ``approval=alert`` the delivery parks with the alert its model wrote from the
first version; once approved, the resumed run reads the package recorded at the first
fetch: the alert that goes out carries the first title, never the second, the model
was never shown the second, and the MCP server saw one fetch for the delivery.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from local.mcp_server import CHANGED_BRIEFING, CHANGED_TITLE, demo_package
from local.sender import Sender, Summary
from local.stack import LocalStack
from local.stack_options import StackOptions
from tests.e2e.stacks import audited
from tests.e2e.test_approvals import DEADLINE_SECONDS, cli, show, waiting
from tests.e2e.test_pipeline_over_http import _config
from tests.polling import poll

CHANGING = "pkg_changing"


def send_changing(stack: LocalStack, count: int) -> Summary:
    async def send() -> Summary:
        async with Sender(_config(stack)) as sender:
            return await sender.send_new(
                count, mcp_url=stack.state.mcp_url, package_prefix=CHANGING
            )

    return asyncio.run(send())


def test_the_approved_alert_carries_the_first_fetch_and_the_package_is_fetched_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "stack.json"
    options = StackOptions(
        seed=32,
        workflow="agent",
        workflow_settings={"approval": "alert"},
        state_file=str(state),
        reconcile_interval_seconds=1.0,
    )
    with audited(options) as stack:
        assert stack.mcp is not None and stack.bedrock is not None
        summary = send_changing(stack, 2)
        assert summary.all_acknowledged
        sent = {r.delivery_id: r.package_id for r in summary.results}
        listed = poll(
            lambda: waiting(capsys, state),
            lambda items: len(items) == len(sent),
            deadline_seconds=DEADLINE_SECONDS,
        )
        firsts = {d: demo_package(str(p))["title"] for d, p in sent.items()}
        for entry in listed:  # the approval shows what the first fetch said
            assert entry["proposal"]["title"] == firsts[entry["delivery_id"]]
            assert CHANGED_TITLE not in json.dumps(entry["proposal"])
        local = ("--local", str(state))
        for entry in listed:
            argv = ("approvals", "approve", entry["delivery_id"], *local)
            status, _, err = cli(capsys, *argv, "--proposal", entry["short_digest"])
            assert (status, err) == (0, ""), err
        final = poll(
            lambda: {d: show(capsys, state, d) for d in sent},
            lambda shown: all(s["state"] == "completed" for s in shown.values()),
            deadline_seconds=DEADLINE_SECONDS,
            pause_seconds=0.5,
        )
        assert {d: s["state"] for d, s in final.items()} == dict.fromkeys(sent, "completed")
        alerts = poll(
            lambda: {d: stack.alerts.text(f"{d}:alert") if stack.alerts else None for d in sent},
            lambda texts: all(texts.values()),
            deadline_seconds=DEADLINE_SECONDS,
        )
        fetched = stack.mcp.controls.packages_requested()
        for delivery_id, package_id in sent.items():
            alert = str(alerts[delivery_id])
            assert firsts[delivery_id] in alert
            assert CHANGED_TITLE not in alert
            # The model was asked once, and what it was shown held the first version only.
            request = json.dumps(stack.bedrock.emulator.last_request(delivery_id))
            assert firsts[delivery_id] in request
            assert CHANGED_TITLE not in request
            assert CHANGED_BRIEFING.strip() not in request
            assert fetched[str(package_id)] == 1  # one fetch for the delivery
            assert final[delivery_id]["package"]["refetched_sha256"] is None
        assert stack.model_calls() == dict.fromkeys(sent, 1)
        assert stack.quiet(DEADLINE_SECONDS), stack.queue_depths()
        print(
            f"{len(sent)} approved deliveries: alerts with the first title, "
            f"fetches per package {sorted(fetched.values())}, "
            f"model calls {sorted(stack.model_calls().values())}"
        )
