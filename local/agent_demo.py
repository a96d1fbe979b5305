"""The agent workflow's part of ``relaylink-receiver demo``: the crash windows around
the model call, and the token budget.

It runs on a local stack of its own (``--workflow agent``: the Bedrock emulator, the
alert topic counted through a subscribed queue). Each row counts the emulator's
``Converse`` calls and the alerts the topic's subscriber received for one delivery:

* one delivery, nothing in the way: one model call, one alert;
* the worker SIGKILLed while it holds two deliveries: one inside its model call (the
  emulator's latency knob holds the answer back), the other with its model answer
  recorded and its alert not yet sent (the emulator holds the alert effect's first
  read). After the restart the first runs the model again (its run was never
  recorded), the second reads its recorded answer back; each alerts once;
* the day's token budget spent: the delivery waits, never failed, until the operator
  raises the limit and requeues it; then one model call, one alert.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Final, TextIO

from cli.text_table import aligned
from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_budget import DynamoDbBudget
from functions.core.adapters.dynamodb_steps import DynamoDbSteps
from functions.core.budget import TokenBudget
from functions.core.errors import BudgetExhausted
from functions.core.ports.steps import StepRecord, StepStatus
from functions.workflows.agent import ALERT_EFFECT, MODEL_STEP
from local.sender import Delivery, Sender, SenderConfig
from local.stack import KilledProcess, LocalStack
from local.stack_options import StackOptions

WAIT_SECONDS: Final = 40.0  # a killed worker's messages come back after 8 s
# How long the emulators hold a model answer or the alert's first read: far longer
# than the demo waits to kill inside it (the kill ends the wait for the worker).
HOLD_SECONDS: Final = 15.0
_POLL_SECONDS: Final = 0.05
_DAY_LIMIT: Final = 100_000_000  # the local stack's daily token budget


@dataclass
class AgentRow:
    """One delivery of the agent scenarios and what it should end in."""

    label: str
    delivery: Delivery
    expect_calls: int
    # The model step's runs (a budget refusal is a run too): None, not checked.
    expect_runs: int | None
    state: str | None = None
    last_error: str | None = None
    calls: int = 0
    alerts: int = 0
    runs: int = 0
    failures: list[str] = field(default_factory=list)

    HEADER: ClassVar[tuple[str, ...]] = (
        "delivery",
        "model calls",
        "alerts",
        "final state",
        "check",
    )

    def cells(self) -> tuple[str, ...]:
        verdict = "ok" if not self.failures else "FAILED"
        return (self.label, str(self.calls), str(self.alerts), str(self.state), verdict)


class AgentScenario:
    PREFIX: ClassVar = "A"  # the steps are A1, A2, ...

    def __init__(self, stack: LocalStack, out: TextIO) -> None:
        assert stack.bedrock is not None and stack.emulator is not None
        self.stack = stack
        self.bedrock = stack.bedrock.emulator
        self.faults = stack.emulator.faults
        self.out = out
        self.number = 1
        state = stack.state
        self.config = SenderConfig(
            url=state.webhook_url, secrets=tuple(state.signing_secrets), time_scale=100.0
        )
        self.dynamodb = state.aws_client("dynamodb")
        self.table = state.resources.table_name
        self.steps = DynamoDbSteps(client=self.dynamodb, table_name=self.table)
        self.budget_store = TokenBudget(
            DynamoDbBudget(client=self.dynamodb, table_name=self.table, default_limit=_DAY_LIMIT)
        )
        self.state_file = stack.run_dir / "agent-demo-state.json"
        state.write(self.state_file)
        self.rows: list[AgentRow] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def step(self, text: str) -> None:
        self.say(f"{self.PREFIX}{self.number}. {text}")
        self.number += 1

    def new(self) -> Delivery:
        return Delivery.new(mcp_url=self.stack.state.mcp_url, receiver_id="rcv_demo")

    def model_step(self, row: AgentRow) -> StepRecord | None:
        return self.steps.get(row.delivery.delivery_id, MODEL_STEP)

    def inbox(self, row: AgentRow) -> tuple[str | None, str | None]:
        """The delivery's state and last error."""
        item = self.dynamodb.get_item(
            TableName=self.table, Key=dynamodb_items.inbox_key(row.delivery.delivery_id)
        )
        inbox = dynamodb_items.inbox_from_item(item["Item"]) if "Item" in item else None
        return (None, None) if inbox is None else (inbox.state.value, inbox.last_error)

    def command(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """``relaylink-receiver <arguments> --local <state file>``, as an operator types it."""
        return subprocess.run(
            [sys.executable, "-m", "ops.cli", *arguments, "--local", str(self.state_file)],
            capture_output=True,
            text=True,
            timeout=WAIT_SECONDS,
            check=False,
        )

    def operator(self, *arguments: str) -> str:
        """``relaylink-receiver <arguments> --json --local <state file>``; what it answered."""
        done = self.command(*arguments, "--json")
        try:  # one line of it
            answer = json.dumps(json.loads(done.stdout))
        except ValueError:
            answer = (done.stdout or done.stderr).strip()
        return f"{answer} (exit {done.returncode})"

    def alerts(self, row: AgentRow) -> int:
        return self.stack.effects().get(f"{row.delivery.delivery_id}:{ALERT_EFFECT}", 0)

    async def until(self, what: str, condition: Callable[[], bool]) -> bool:
        """Poll ``condition`` until it holds or the deadline passes (then say so)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while not await asyncio.to_thread(condition):
            if time.monotonic() > deadline:
                self.say(f"   -> gave up waiting: {what}")
                return False
            await asyncio.sleep(_POLL_SECONDS)
        return True

    async def settle(self, row: AgentRow) -> None:
        """Until the delivery is finished and its alert counted, then check the row."""
        await self.until(
            f"{row.label} finished", lambda: self.inbox(row)[0] not in ("pending", "processing")
        )
        row.state, row.last_error = self.inbox(row)
        if row.state == "completed":  # the subscriber's queue is read about once a second
            await self.until(f"{row.label}'s alert", lambda: self.alerts(row) >= 1)
        record = await asyncio.to_thread(self.model_step, row)
        row.runs = record.runs if record is not None else 0
        row.calls = self.bedrock.calls().get(row.delivery.delivery_id, 0)
        row.alerts = self.alerts(row)
        self.check(row)

    def check(self, row: AgentRow) -> None:
        if row.state != "completed":
            row.failures.append(f"state {row.state} ({row.last_error}), expected completed")
        if row.calls != row.expect_calls:
            row.failures.append(f"{row.calls} model call(s), expected {row.expect_calls}")
        if row.expect_runs is not None and row.runs != row.expect_runs:
            row.failures.append(f"{row.runs} model step run(s), expected {row.expect_runs}")
        if row.alerts != 1:
            row.failures.append(f"{row.alerts} alert(s), expected 1")
        verdict = "ok" if not row.failures else "FAILED: " + "; ".join(row.failures)
        self.say(
            f"   -> {row.label}: {row.state}; model calls {row.calls}; "
            f"alerts {row.alerts}; {verdict}"
        )

    # --- the steps ---------------------------------------------------------------
    async def normal(self, sender: Sender) -> None:
        self.step("The agent workflow: the package is summarised by the model once, one alert.")
        row = AgentRow("agent, normal", self.new(), expect_calls=1, expect_runs=1)
        await sender.deliver(row.delivery)
        await self.settle(row)
        self.rows.append(row)

    async def worker_killed(self, sender: Sender) -> None:
        self.step(
            "The worker is SIGKILLed while it holds two deliveries: one inside its model "
            "call, one with its model answer recorded and its alert not yet sent. After the "
            "restart the first calls the model again (its answer was never recorded), the "
            "second reuses its recorded answer; each alerts once."
        )
        recorded = AgentRow("killed after the model answer", self.new(), 1, 1)
        in_call = AgentRow("killed mid-model-call", self.new(), 2, 2)
        # The alert effect's first read, held: the worker waits just before its alert.
        alert_key = f'"{table_layout.SK_EFFECT_PREFIX}{ALERT_EFFECT}"'
        self.faults.delay_next("GetItem", HOLD_SECONDS, containing=alert_key)
        await sender.deliver(recorded.delivery)
        await self.until("the model answer recorded", lambda: self._recorded(recorded))
        self.bedrock.set_latency(HOLD_SECONDS)  # the next model call is held open
        await sender.deliver(in_call.delivery)
        calls_started = lambda: in_call.delivery.delivery_id in self.bedrock.calls()  # noqa: E731
        await self.until("the model call in flight", calls_started)

        def look(killed: KilledProcess) -> str:
            statuses = [self.model_step(row) for row in (in_call, recorded)]
            first, second = (str(r.status) if r else "absent" for r in statuses)
            return (
                f"killed worker pid {killed.pid}; model steps left: mid-call {first}, "
                f"answered {second}"
            )

        self.say(f"   -> {await asyncio.to_thread(self.stack.kill_and_inspect, 'worker', look)}")
        self.bedrock.set_latency(0.0)
        await self.settle(in_call)
        await self.settle(recorded)
        self.rows += [in_call, recorded]

    def _recorded(self, row: AgentRow) -> bool:
        record = self.model_step(row)
        return record is not None and record.status is StepStatus.RECORDED

    async def budget(self, sender: Sender) -> None:
        self.step(
            "The day's token budget is spent: the delivery waits (deferred, not failed) "
            "until the operator raises the limit and requeues it; one model call, one alert."
        )
        row = AgentRow("budget spent, then raised", self.new(), 1, None)
        # A limit of 0 pauses model calls (a limit above 0 but below one call fails them).
        await asyncio.to_thread(self.budget_store.set_limit, 0, int(time.time()))
        await sender.deliver(row.delivery)
        waiting = await self.until(
            "the delivery deferred", lambda: self.inbox(row)[1] == BudgetExhausted.code
        )
        state, error = await asyncio.to_thread(self.inbox, row)
        calls = self.bedrock.calls().get(row.delivery.delivery_id, 0)
        self.say(f"   -> {state}, last error {error}; model calls {calls}")
        if not waiting or state != "pending" or calls:
            row.failures.append(f"not deferred before the model call ({state}, {calls} calls)")
        for command in (("budget", "set", str(_DAY_LIMIT)), ("requeue", row.delivery.delivery_id)):
            answer = await asyncio.to_thread(self.operator, *command)
            self.say(f"   $ relaylink-receiver {' '.join(command)}: {answer}")
        await self.settle(row)
        self.rows.append(row)

    async def run(self) -> bool:
        async with Sender(self.config) as sender:
            await self.normal(sender)
            await self.worker_killed(sender)
            await self.budget(sender)
        self.say("")
        for line in aligned(AgentRow.HEADER, [row.cells() for row in self.rows]):
            self.say(line)
        return not any(row.failures for row in self.rows)


def run_agent_demo(out: TextIO) -> bool:
    """The agent scenarios on a stack of their own; True when every invariant holds."""
    print(
        "The agent workflow, on a stack of its own (Bedrock emulated, alerts over SNS):", file=out
    )
    with LocalStack(StackOptions(seed=7, workflow="agent")) as stack:
        return asyncio.run(AgentScenario(stack, out).run())
