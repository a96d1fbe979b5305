"""``relaylink-receiver demo``: the local stack through a scripted, narrated scenario.

Each step sends real signed requests over HTTP to the front door (the real
receiver handler in its own process) and waits for the worker side to finish,
then the closing table is read back from the store and from the notification
target's counter. The agent workflow's scenarios (:mod:`local.agent_demo`) and its
tools' (:mod:`local.tool_demo`) run beside them, each on a stack of its own. The exit
status is 1 when any step's expectation fails.
"""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO

from cli.text_table import aligned
from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem
from local.agent_demo import run_agent_demo
from local.sender import AttemptResult, Delivery, Sender, SenderConfig, forged_secret
from local.stack import LocalStack
from local.stack_options import StackOptions
from local.tool_demo import run_tool_demo

WAIT_SECONDS = 30.0
TIME_SCALE = 100.0  # RelayLink's 30 s back-off becomes 0.3 s


NOT_STORED = "(not stored)"  # how a delivery the receiver refused is narrated


@dataclass
class Row:
    """One scenario step and what it should end in."""

    label: str
    delivery: Delivery
    expect_state: str | None  # None: never stored
    expect_effects: int
    expect_answers: set[str] | None = None  # the set of HTTP answers seen
    attempts: list[AttemptResult] = field(default_factory=list)
    state: str | None = None
    effects: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def answers(self) -> list[str]:
        return [a.answer for a in sorted(self.attempts, key=lambda a: a.number)]


class Scenario:
    def __init__(self, stack: LocalStack, out: TextIO) -> None:
        self.stack = stack
        self.out = out
        state = stack.state
        self.config = SenderConfig(
            url=state.webhook_url,
            secrets=tuple(state.signing_secrets),
            time_scale=TIME_SCALE,
            concurrency=4,
        )
        self.rows: list[Row] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def new(self, **fields: Any) -> Delivery:
        return Delivery.new(mcp_url=self.stack.state.mcp_url, receiver_id="rcv_demo", **fields)

    def inbox(self, delivery_id: str) -> InboxItem | None:
        dynamodb = self.stack.client("dynamodb")
        table = self.stack.state.resources.table_name
        item = dynamodb.get_item(TableName=table, Key=dynamodb_items.inbox_key(delivery_id))
        return dynamodb_items.inbox_from_item(item["Item"]) if "Item" in item else None

    async def settle(self, row: Row) -> None:
        """Wait (with a deadline) until the delivery is finished, then read it back."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            item = await asyncio.to_thread(self.inbox, row.delivery.delivery_id)
            row.state = item.state.value if item is not None else None
            if row.state not in ("pending", "processing") or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        row.effects = self.stack.effects().get(f"{row.delivery.delivery_id}:notify", 0)
        self.check(row)

    def check(self, row: Row) -> None:
        if row.state != row.expect_state:
            row.failures.append(f"state {row.state}, expected {row.expect_state}")
        if row.effects != row.expect_effects:
            row.failures.append(f"{row.effects} effect(s), expected {row.expect_effects}")
        if row.expect_answers is not None and set(row.answers) != row.expect_answers:
            row.failures.append(f"answers {row.answers}, expected {sorted(row.expect_answers)}")
        verdict = "ok" if not row.failures else "FAILED: " + "; ".join(row.failures)
        answers, state = " ".join(row.answers), row.state or NOT_STORED
        self.say(f"   -> answers {answers}; {state}; effects {row.effects}; {verdict}")

    # --- the steps ---------------------------------------------------------------
    async def normal(self, sender: Sender) -> None:
        self.say("1. A normal delivery: accepted (202), processed once.")
        row = Row("normal", self.new(), "completed", 1, {"202"})
        row.attempts = (await sender.deliver(row.delivery)).attempts
        await self.settle(row)
        self.rows.append(row)

    async def timeout_then_retry(self, sender: Sender) -> None:
        self.say(
            "2. The receiver is slow: RelayLink gives up on the first attempt (timeout) and "
            "retries; the retry finds the delivery already accepted (200)."
        )
        assert self.stack.emulator is not None
        self.stack.emulator.faults.delay_next("TransactWriteItems", 1.5)
        row = Row("timeout + retry", self.new(), "completed", 1, {"timeout", "200"})
        impatient = Sender(
            SenderConfig(
                url=self.config.url,
                secrets=self.config.secrets,
                timeout_seconds=0.5,
                time_scale=TIME_SCALE / 10,  # the retry comes after the slow write ends
            )
        )
        async with impatient:
            row.attempts = (await impatient.deliver(row.delivery)).attempts
        await self.settle(row)
        self.rows.append(row)

    async def overlapping(self, sender: Sender) -> None:
        self.say("3. Two attempts of one delivery at the same moment: one 202, one 200.")
        row = Row("overlapping attempts", self.new(), "completed", 1, {"202", "200"})
        row.attempts = list(
            await asyncio.gather(
                sender.attempt(row.delivery, number=1), sender.attempt(row.delivery, number=2)
            )
        )
        await self.settle(row)
        self.rows.append(row)

    async def conflicting(self, sender: Sender) -> None:
        self.say(
            "4. The same delivery id with a different body: quarantined (409), an alarm "
            "metric, the original untouched and processed once."
        )
        original = self.new()
        row = Row("same id, other body", original, "completed", 1, {"202", "409"})
        first = await sender.attempt(original, number=1)
        second = await sender.attempt(original.conflicting(package_id="pkg_conflict"), number=2)
        row.attempts = [first, second]
        await self.settle(row)
        table = self.stack.state.resources.table_name
        quarantined = self.stack.client("dynamodb").query(
            TableName=table,
            KeyConditionExpression="pk = :id AND begins_with(sk, :q)",
            ExpressionAttributeValues={
                ":id": {"S": original.delivery_id},
                ":q": {"S": "quarantine#"},
            },
        )["Count"]
        self.say(f"   -> quarantine records: {quarantined}")
        if quarantined != 1:
            row.failures.append(f"{quarantined} quarantine records, expected 1")
        self.rows.append(row)

    async def forged(self, sender: Sender) -> None:
        self.say("5. A forged request (signed with a secret we do not know): 401, nothing stored.")
        row = Row("forged signature", self.new(), None, 0, {"401"})
        row.attempts = [await sender.attempt(row.delivery, secrets=[forged_secret()])]
        await self.settle(row)
        self.rows.append(row)

    async def mcp_transient(self, sender: Sender) -> None:
        self.say(
            "6. The MCP server fails transiently: the worker records the error, backs off "
            "and retries from its own queue; the effect still happens once."
        )
        mcp = self.stack.mcp
        assert mcp is not None
        mcp.set_failure_rate(1.0)
        row = Row("MCP transient failure", self.new(), "completed", 1, {"202"})
        row.attempts = (await sender.deliver(row.delivery)).attempts
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            item = await asyncio.to_thread(self.inbox, row.delivery.delivery_id)
            if item is not None and item.last_error:
                self.say(f"   -> attempt {item.attempts} failed: {item.last_error}; MCP recovers")
                break
            await asyncio.sleep(0.05)
        mcp.set_failure_rate(0.0)
        await self.settle(row)
        item = await asyncio.to_thread(self.inbox, row.delivery.delivery_id)
        if item is None or item.attempts < 2:
            row.failures.append("the worker did not retry")
        self.rows.append(row)

    async def receiver_killed(self, sender: Sender) -> None:
        self.say(
            "7. The receiver process is killed (SIGKILL) mid-request; the supervisor restarts "
            "it and RelayLink's retry is answered: nothing lost, processed once."
        )
        assert self.stack.emulator is not None
        self.stack.emulator.faults.delay_next("TransactWriteItems", 1.0)
        row = Row("receiver killed mid-flight", self.new(), "completed", 1)
        delivering = asyncio.create_task(sender.deliver(row.delivery))
        await asyncio.sleep(0.3)  # the request is inside the receiver now
        pid = self.stack.kill("front_door")
        self.say(f"   -> killed front door pid {pid}")
        row.attempts = (await delivering).attempts
        if not any(a.answer == "connection_error" for a in row.attempts):
            row.failures.append("the kill did not cut the request")
        await self.settle(row)
        self.rows.append(row)

    async def not_found(self, sender: Sender) -> None:
        self.say("8. A package that does not exist: accepted, then failed at once, no effect.")
        row = Row(
            "package not found", self.new(package_id="pkg_missing_demo"), "failed", 0, {"202"}
        )
        row.attempts = (await sender.deliver(row.delivery)).attempts
        await self.settle(row)
        self.rows.append(row)

    async def run(self) -> bool:
        steps: list[Callable[[Sender], Awaitable[None]]] = [
            self.normal,
            self.timeout_then_retry,
            self.overlapping,
            self.conflicting,
            self.forged,
            self.mcp_transient,
            self.receiver_killed,
            self.not_found,
        ]
        async with Sender(self.config) as sender:
            for step in steps:
                await step(sender)
        self.say("")
        self.table()
        return all(not row.failures for row in self.rows)

    def table(self) -> None:
        header = ("delivery", "attempts", "HTTP answers", "final state", "effects", "check")
        lines = [
            (
                row.label,
                str(len(row.attempts)),
                " ".join(row.answers),
                row.state or NOT_STORED,
                str(row.effects),
                "ok" if not row.failures else "FAILED",
            )
            for row in self.rows
        ]
        for line in aligned(header, lines):
            self.say(line)


def run_demo(out: TextIO = sys.stdout) -> int:
    started = time.monotonic()
    print("Starting the local stack (moto, demo MCP server, front door, worker) ...", file=out)
    # The agent's scenarios, and its tools', run meanwhile on stacks of their own (mostly
    # waiting out a killed worker's visibility timeout); their narration follows these.
    agent_outs = [io.StringIO(), io.StringIO()]
    with ThreadPoolExecutor(2, thread_name_prefix="agent-demo") as pool:
        agents = [
            pool.submit(scenes, text)
            for scenes, text in zip((run_agent_demo, run_tool_demo), agent_outs, strict=True)
        ]
        with LocalStack(StackOptions(seed=7)) as stack:
            print(f"webhook URL {stack.state.webhook_url}; logs in {stack.run_dir}\n", file=out)
            healthy = asyncio.run(Scenario(stack, out).run())
        healthy = all([agent.result() for agent in agents]) and healthy
    for text in agent_outs:
        print(f"\n{text.getvalue()}", end="", file=out)
    elapsed = time.monotonic() - started
    verdict = "every invariant holds" if healthy else "INVARIANTS FAILED"
    print(f"\n{verdict} ({elapsed:.1f} s)", file=out)
    return 0 if healthy else 1
