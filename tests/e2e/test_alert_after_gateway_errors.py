"""The agent's HTTP alert on the local stack, against an endpoint that acts and then
answers 502 (a gateway that gave up): each alert arrives once; the operator settles the
effects left in doubt with one bulk command, and the deliveries complete."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from local.notify_sink import NotifySinkServer
from local.sender import Sender, SenderConfig
from local.stack_options import AGENT_WORKFLOW, StackOptions
from ops.cli import main
from tests.e2e.stacks import audited

QUIET_DEADLINE_SECONDS = 120.0
COUNT = 4


def test_alert_answered_502_after_acting_is_received_once_and_settled_in_bulk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_file = tmp_path / "state.json"
    with NotifySinkServer(path="/alerts") as endpoint:
        endpoint.sink.fail_next(COUNT, 502, applied=True)
        options = StackOptions(
            seed=11,
            workflow=AGENT_WORKFLOW,
            workflow_settings={"alert_url": endpoint.url},
            state_file=str(state_file),
        )
        with audited(options) as stack:
            state = stack.state

            async def send() -> set[str]:
                config = SenderConfig(
                    url=state.webhook_url,
                    secrets=tuple(state.signing_secrets),
                    timeout_seconds=10.0,
                    time_scale=300.0,
                    concurrency=4,
                    seed=11,
                )
                async with Sender(config) as sender:
                    summary = await sender.send_new(COUNT, mcp_url=state.mcp_url)
                assert summary.all_acknowledged
                return {result.delivery_id for result in summary.results}

            ids = asyncio.run(send())
            keys = {f"{i}:alert" for i in ids}
            assert stack.quiet(QUIET_DEADLINE_SECONDS, expected=len(ids)), stack.queue_depths()
            # The default mode: the 502 left each POST in doubt; none was sent again.
            assert dict(endpoint.sink.posts) == dict.fromkeys(keys, 1)
            assert endpoint.sink.counts() == dict.fromkeys(keys, 1)
            states = stack.inbox_states()
            assert {i: states.get(i) for i in ids} == dict.fromkeys(ids, "failed")

            local = ["--local", str(state_file)]
            resolve = ["effects", "resolve", "--all", "--effect", "alert.http", "--applied"]
            assert main([*resolve, "--older-than", "0", "--json", *local]) == 0
            resolved = json.loads(capsys.readouterr().out)
            assert (resolved["matched"], resolved["changed"]) == (COUNT, COUNT)
            requeue = ["requeue", "--state", "failed", "--reason", "uncertain_effect"]
            assert main([*requeue, *local]) == 0
            capsys.readouterr()
            assert stack.quiet(QUIET_DEADLINE_SECONDS, expected=len(ids)), stack.queue_depths()
            states = stack.inbox_states()
            assert {i: states.get(i) for i in ids} == dict.fromkeys(ids, "completed")
            assert dict(endpoint.sink.posts) == dict.fromkeys(keys, 1)  # still once each
            assert {k: stack.effects().get(k) for k in keys} == dict.fromkeys(keys, 1)  # SNS
