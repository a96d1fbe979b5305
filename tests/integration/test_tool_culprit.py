"""A tool that raises is named, with its exception's type, where operators look.

The tool loop runs in the real processor over moto (the step records in the table);
the tool raises a ``KeyError`` whose message holds a secret. ``inbox show`` (text and
JSON) names the tool and the exception's type beside the step's digest, and never the
message; the delivery retries as an error of unknown nature, ``tool_raised``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from functions.core.adapters.dynamodb_package_record import DynamoDbPackageRecords
from functions.core.adapters.dynamodb_steps import DynamoDbSteps
from functions.core.model_step import ToolUse
from functions.core.models import WorkItem
from functions.core.package import Package
from functions.core.package_record import PackageStorage
from functions.core.ports.workflow import Ledger
from functions.core.process import ProcessConfig, Processor, Result
from functions.core.steps import StepStorage
from functions.workflows.agent_prompt import AgentPrompt, fenced_prompt
from functions.workflows.model_client import ModelAnswer, ModelClient
from functions.workflows.tool_loop import ToolCaps, converse_with_tools, tool_record_name
from functions.workflows.tools import Tool, ToolMode
from local.mcp_server import demo_package
from local.testkit.clock import FakeClock
from tests.fakes import FakeMetrics
from tests.operator_harness import MCP, Stack, run_cli

SECRET = "https://user:hunter2@crm.example"  # what no message may show
PROMPT = fenced_prompt({"title": "t"}, instructions="Summarise.", task="Go.")


class AsksForLookup:
    """A model that asks for the lookup tool, with a fixed tool-use id."""

    def converse(self, prompt: AgentPrompt, **_: Any) -> ModelAnswer:
        use = ToolUse("tooluse_lookup_1", "lookup", {"customer": "acme"})
        return ModelAnswer("", "tool_use", 10, 2, tool_uses=(use,))


def lookup(tool_input: dict[str, Any], key: str) -> dict[str, Any]:
    raise KeyError(SECRET)


class ToolFlow:
    def __init__(self, clock: FakeClock) -> None:
        self.client = ModelClient(model=AsksForLookup(), clock=clock, metrics=FakeMetrics())
        self.tools = [Tool("lookup", "Looks up.", {"type": "object"}, ToolMode.READ_ONLY, lookup)]

    def run(self, work: WorkItem, package: Any, effects: Ledger) -> None:
        converse_with_tools(effects, self.client, PROMPT, self.tools, caps=ToolCaps())


class OnePackage:
    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        return Package.from_mapping(demo_package(package_id))


def test_a_tool_that_raises_is_named_with_its_exception_type_in_inbox_show(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    work = WorkItem(delivery_id, "package.received", "pkg_TEST", MCP)
    clock = FakeClock(int(time.time()))
    steps = DynamoDbSteps(client=stack.target.dynamodb, table_name=stack.target.table_name)
    processor = Processor(
        claims=stack.claims,
        effects=stack.target.effects(),
        workflow=ToolFlow(clock),
        clock=clock,
        metrics=FakeMetrics(),
        config=ProcessConfig(max_attempts=5, lease_seconds=60),
        packages=PackageStorage(
            DynamoDbPackageRecords(client=stack.target.dynamodb, table_name=stack.target.table_name)
        ),
        steps=StepStorage(records=steps, metrics=FakeMetrics()),
    )
    decision = asyncio.run(processor.process(work, OnePackage()))
    assert (decision.result, decision.error_code) == (Result.RETRYING, "tool_raised")

    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert status == 0
    step = tool_record_name("tooluse_lookup_1")
    (line,) = [line for line in out.splitlines() if line.startswith(f"step {step}")]
    assert f"step {step} (tool lookup)" in line
    assert "failed: tool lookup raised KeyError" in line
    assert "last_error" in out and "tool_raised" in out
    assert "hunter2" not in out

    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id, "--json"))
    shown = {s["name"]: s for s in json.loads(out)["steps"]}
    assert shown[step]["label"] == "tool lookup"
    assert shown[step]["error"] == "tool lookup raised KeyError"
