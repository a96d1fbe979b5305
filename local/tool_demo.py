"""The agent's tools in ``relaylink-receiver demo``: a tool call approved from the CLI,
and a worker killed between a tool call and its record.

It runs on a local stack of its own: the agent workflow with the tools of
:mod:`local.agent_tools` (``CHECKED_TOOLS``: a customer lookup, and ``open_ticket``,
which POSTs to the local ticket system and whose outcome the ledger can look up),
no ``approval`` setting (an acting tool waits for a person by default; only
``tools_without_approval`` would let it run unasked), and the Bedrock emulator
scripted to look the customer up, then open a ticket, then summarise. Each row counts
the emulator's ``Converse`` calls, the tickets the ticket system holds under the
delivery's tool keys (``<delivery_id>:tool:<tool-use id>``), the POSTs and the
ledger's lookups that reached it under them, and the alerts, for one delivery:

* the ticket call waits for a person: the delivery parks ``awaiting_approval`` with
  the proposed call, ``approvals list`` shows it, ``approvals approve ID`` resumes it;
  one ticket, three model calls (each turn asked once), one alert;
* approved the same way, the worker is SIGKILLed after the ticket was opened and
  before the ledger's done record (the emulator holds that write); after the
  restart the ledger finds the intent and asks the ticket system (mode ``checked``):
  the ticket is there (one lookup), so it is not opened again; one ticket, one alert.

The second scene runs first, up to its kill; the first runs on the restarted worker
while the killed delivery's message waits out its visibility timeout. Each scene
narrates into its own buffer, printed in order.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ClassVar, Final, TextIO

from cli.text_table import aligned
from functions.core import table_layout
from functions.core.adapters.dynamodb_effects import DynamoDbEffects
from functions.core.adapters.dynamodb_items import inbox_from_item, inbox_key
from functions.core.ports.effects import EffectStatus
from local import agent_tools
from local.agent_demo import AgentRow, AgentScenario
from local.sender import Sender
from local.stack import KilledProcess, LocalStack
from local.stack_options import StackOptions

# No approval setting: the ticket waits for a person because it acts.
SETTINGS: Final = {"tools": "local.agent_tools:CHECKED_TOOLS"}
_TURNS: Final = 3  # the lookup's turn, the ticket's, the summary
# How long the emulator holds the killed worker's done record: past the demo's end, so
# the resumed worker certainly finds the intent (the held write, if it ever lands, is
# refused by its condition).
_HOLD_DONE_SECONDS: Final = 90.0
# Where the scene running in this task narrates (None: straight to the output).
_VOICE: ContextVar[io.StringIO | None] = ContextVar("voice", default=None)


@dataclass
class ToolRow(AgentRow):
    """An agent row that also counts the tickets its tool calls opened."""

    tickets: int = 0
    expect_lookups: int = 0  # the ledger's checks of the ticket's key (mode checked)

    HEADER: ClassVar[tuple[str, ...]] = (
        "delivery",
        "model calls",
        "tickets",
        "alerts",
        "final state",
        "check",
    )

    def cells(self) -> tuple[str, ...]:
        label, calls, alerts, state, verdict = super().cells()
        return (label, calls, str(self.tickets), alerts, state, verdict)


class ToolScenario(AgentScenario):
    PREFIX: ClassVar = "T"

    def __init__(self, stack: LocalStack, out: TextIO) -> None:
        super().__init__(stack, out)
        self.effects = DynamoDbEffects(client=self.dynamodb, table_name=self.table)
        self.bedrock.script_tools(agent_tools.SCRIPT)

    def say(self, text: str) -> None:
        print(text, file=_VOICE.get() or self.out, flush=True)

    async def voiced(self, voice: io.StringIO, scene: Awaitable[None]) -> None:
        """Run ``scene`` narrating into ``voice``; run it as a task of its own (a task
        has its own context: the set below stays inside it)."""
        _VOICE.set(voice)
        await scene

    def tickets(self, row: AgentRow, counts: dict[str, int] | None = None) -> int:
        """The tickets opened under the delivery's tool keys (or the sum of ``counts``
        under them)."""
        prefix = f"{row.delivery.delivery_id}:tool:"
        counts = self.stack.effects() if counts is None else counts
        return sum(n for key, n in counts.items() if key.startswith(prefix))

    def waits_for(self, row: AgentRow) -> str | None:
        """The approval the delivery is parked for (its tool call's), or None."""
        found = self.dynamodb.get_item(
            TableName=self.table, Key=inbox_key(row.delivery.delivery_id)
        ).get("Item")
        item = None if found is None else inbox_from_item(found)
        return None if item is None else item.approval

    async def parked(self, sender: Sender, row: ToolRow) -> str:
        """Send the delivery; once it waits for its ticket call, the approval's name."""
        await sender.deliver(row.delivery)
        await self.until(f"{row.label} parked", lambda: self.waits_for(row) is not None)
        state, _ = await asyncio.to_thread(self.inbox, row)
        name = await asyncio.to_thread(self.waits_for, row)
        calls = self.bedrock.calls().get(row.delivery.delivery_id, 0)
        self.say(f"   -> {state}; model calls {calls}; tickets {self.tickets(row)}")
        if state != "awaiting_approval" or self.tickets(row) or name is None:
            row.failures.append(f"not parked before the ticket ({state})")
        return name or ""

    async def type(self, *arguments: str, showing: str | None = None) -> None:
        """Run a CLI command; print its answer (only its lines containing ``showing``)."""
        done = await asyncio.to_thread(self.command, *arguments)
        lines = (done.stdout or done.stderr).strip().splitlines()
        shown = [line for line in lines if showing is None or showing in line]
        self.say(f"   $ relaylink-receiver {' '.join(arguments)}  (exit {done.returncode})")
        for line in shown:
            self.say(f"     {' '.join(line.split())}")

    def check(self, row: AgentRow) -> None:
        if isinstance(row, ToolRow):
            assert self.stack.sink is not None
            sink = self.stack.sink.sink
            row.tickets = self.tickets(row)
            posts, asked = (self.tickets(row, dict(c)) for c in (sink.posts, sink.lookups))
            if (row.tickets, posts, asked) != (1, 1, row.expect_lookups):
                row.failures.append(
                    f"{row.tickets} ticket(s) from {posts} POST(s), {asked} lookup(s);"
                    f" expected 1 from 1, {row.expect_lookups}"
                )
            self.say(
                f"   -> tickets opened {row.tickets} (POSTs {posts}); the ledger asked the"
                f" ticket system {asked} time(s)"
            )
        super().check(row)

    # --- the steps ---------------------------------------------------------------
    async def approved(self, sender: Sender, row: ToolRow) -> None:
        self.say(
            "T1. An acting tool waits for a person by default (no approval setting): the "
            "model looks the customer up, then asks to open a ticket; the delivery parks with the "
            "proposed call, no worker holding it. Approved from the CLI, the ticket is "
            "opened once and the loop goes on: each turn asked once, one alert."
        )
        await self.parked(sender, row)
        await self.type("approvals", "list", showing=row.delivery.delivery_id)
        await self.type("approvals", "approve", row.delivery.delivery_id)
        await self.settle(row)

    async def killed_in_tool(self, sender: Sender, row: ToolRow, killed: asyncio.Event) -> None:
        self.say(
            "T2. Approved the same way, the worker is SIGKILLed between the tool call and its "
            "record: the ticket is opened, the ledger's done record not yet written. After "
            "the restart the ledger finds the intent and asks the ticket system (mode "
            "checked): the ticket is there, so it is not opened again; one alert."
        )
        name = await self.parked(sender, row)
        # The tool effect's done record, held: the worker waits just after the ticket.
        done_write = f'"{table_layout.SK_EFFECT_PREFIX}{name}"'
        self.faults.delay_next("UpdateItem", _HOLD_DONE_SECONDS, containing=done_write)
        await self.type("approvals", "approve", row.delivery.delivery_id)
        await self.until("the ticket opened", lambda: self.tickets(row) >= 1)

        def look(killed: KilledProcess) -> str:
            record = self.effects.get(row.delivery.delivery_id, name)
            status = "absent" if record is None else str(record.status)
            if record is None or record.status is not EffectStatus.INTENT:
                row.failures.append(f"the kill missed the window (the effect is {status})")
            return (
                f"killed worker pid {killed.pid}; tickets {self.tickets(row)}; "
                f"the tool's effect record: {status}"
            )

        self.say(f"   -> {await asyncio.to_thread(self.stack.kill_and_inspect, 'worker', look)}")
        killed.set()
        await self.settle(row)

    async def run(self) -> bool:
        approved = ToolRow("ticket approved", self.new(), _TURNS, None)
        killed_row = ToolRow(
            "ticket, killed before its record", self.new(), _TURNS, None, expect_lookups=1
        )
        self.rows += [approved, killed_row]
        first, second = io.StringIO(), io.StringIO()
        killed = asyncio.Event()
        async with Sender(self.config) as sender:
            scene = self.killed_in_tool(sender, killed_row, killed)
            kill = asyncio.create_task(self.voiced(second, scene))
            # The first scene runs on the worker restarted after the kill (or at once
            # when the second gave up before it: it has failed already).
            waiting = asyncio.create_task(killed.wait())
            await asyncio.wait([kill, waiting], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            await asyncio.create_task(self.voiced(first, self.approved(sender, approved)))
            await kill
        self.out.write(first.getvalue() + second.getvalue())
        self.say("")
        for line in aligned(ToolRow.HEADER, [row.cells() for row in self.rows]):
            self.say(line)
        return not any(row.failures for row in self.rows)


def run_tool_demo(out: TextIO) -> bool:
    """The tool scenarios on a stack of their own; True when every invariant holds."""
    print("The agent with tools, on a stack of its own (acting tools wait by default):", file=out)
    options = StackOptions(seed=7, workflow="agent", workflow_settings=SETTINGS)
    with LocalStack(options) as stack:
        return asyncio.run(ToolScenario(stack, out).run())
