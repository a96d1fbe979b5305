"""A team's tools for the agent, as ``-c agent_tools=tests.integration.agent_tools:TOOLS``.

``lookup`` reads (a recorded step); ``open_ticket`` acts on a far side that drops a
repeated idempotency key (mode keyed). :data:`FAR_SIDE` keeps what each saw, and can
be armed to kill the worker right after the ticket is opened.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from functions.workflows.tools import Tool, ToolMode
from tests.integration.test_pipeline import Crash

SCHEMA = {"type": "object", "properties": {"customer": {"type": "string"}}}


@dataclass
class FarSide:
    lookups: list[dict[str, Any]] = field(default_factory=list)
    ticket_posts: Counter[str] = field(default_factory=Counter)  # key -> POSTs seen
    crash_after_ticket: bool = False

    def reset(self) -> None:
        self.lookups.clear()
        self.ticket_posts.clear()
        self.crash_after_ticket = False

    def lookup(self, tool_input: dict[str, Any], key: str) -> dict[str, Any]:
        self.lookups.append(tool_input)
        return {"customer": tool_input.get("customer"), "tier": "gold"}

    def open_ticket(self, tool_input: dict[str, Any], key: str) -> dict[str, Any]:
        self.ticket_posts[key] += 1
        if self.crash_after_ticket:
            self.crash_after_ticket = False
            raise Crash("after the ticket was opened, before its record")
        return {"ticket": "T-1"}

    @property
    def tickets(self) -> int:
        """Tickets that exist: the far side keeps one per key."""
        return len(self.ticket_posts)


FAR_SIDE = FarSide()
TOOLS = (
    Tool("lookup", "Looks a customer up.", SCHEMA, ToolMode.READ_ONLY, FAR_SIDE.lookup),
    Tool("open_ticket", "Opens a support ticket.", SCHEMA, ToolMode.KEYED, FAR_SIDE.open_ticket),
)
