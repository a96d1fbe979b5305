"""Your own workflow against the local stack, as docs/workflows.md says to test it: a
folder outside the project, its settings, the alert topic's name, a step and one effect
each."""

from __future__ import annotations

import asyncio
from pathlib import Path

from local.sender import Sender, SenderConfig
from local.stack_options import StackOptions
from tests.e2e.stacks import audited

QUIET_DEADLINE_SECONDS = 90.0
COUNT = 5

FLOW = '''"""Tags each package and posts the tag, once, to the local effects URL."""

import json
import urllib.request


def build(context):
    if not context.alert_topic_arn:
        raise ValueError("no ALERT_TOPIC_ARN")
    return Tagger(context.notify_url, context.settings["tag"])


class Tagger:
    def __init__(self, url, tag):
        self.url, self.tag = url, tag

    def run(self, work, package, effects):
        tag = effects.step("tag", lambda: f"{self.tag}:{len(package.briefing)}")
        body = json.dumps({"tag": tag, "package": package.package_id}).encode()
        request = lambda key: urllib.request.Request(
            self.url, data=body, headers={"Idempotency-Key": key}
        )
        effects.run("tag", lambda key: urllib.request.urlopen(request(key), timeout=5).close())
'''


def test_the_local_stack_runs_a_workflow_from_a_folder_with_its_settings(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "my-agent"
    (folder / "my_tags").mkdir(parents=True)
    (folder / "my_tags" / "__init__.py").write_text("")
    (folder / "my_tags" / "flow.py").write_text(FLOW)
    options = StackOptions(
        seed=5,
        workflow="my_tags.flow:build",
        workflow_source=str(folder),
        workflow_settings={"tag": "blue"},
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
                seed=5,
            )
            async with Sender(config) as sender:
                summary = await sender.send_new(COUNT, mcp_url=state.mcp_url)
            assert summary.all_acknowledged
            return {result.delivery_id for result in summary.results}

        ids = asyncio.run(send())
        assert stack.quiet(QUIET_DEADLINE_SECONDS, expected=len(ids)), stack.queue_depths()
        states = stack.inbox_states()
        assert {i: states.get(i) for i in ids} == dict.fromkeys(ids, "completed")
        effects = stack.effects()
        assert {i: effects.get(f"{i}:tag") for i in ids} == dict.fromkeys(ids, 1)
        assert not any(key.endswith(":notify") for key in effects)
        assert state.resources.alert_topic_arn.endswith("-alerts")
