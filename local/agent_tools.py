"""Tools for the agent workflow on the local stack (``chaos --workflow agent --tools``).

``-c agent_tools=local.agent_tools:TOOLS`` as a team would write them:

* ``lookup_customer`` (read-only): answers from a table in memory;
* ``open_ticket`` (acting, outcome mode ``none``): POSTs to the local notification
  target (``NOTIFY_URL``, which counts each POST under its ``Idempotency-Key``,
  ``<delivery_id>:tool:<tool-use id>``). It waits :data:`ACT_SECONDS` before and after
  the POST, so worker kills land inside the tool's window: after the POST and before
  the ledger's done record, the outcome is unknown and the delivery waits in doubt.

:data:`SCRIPT` is what the Bedrock emulator asks for (``script_tools``): one turn
per tool, then the summary.
"""

from __future__ import annotations

import os
import time
from typing import Any, Final

from functions.core.adapters.notifier_http import HttpNotifier
from functions.workflows.tools import Tool, ToolError, ToolMode

ACT_SECONDS: Final = 0.1
TICKET_TOOL: Final = "open_ticket"
LOOKUP_TOOL: Final = "lookup_customer"
SCRIPT: Final = [
    [(LOOKUP_TOOL, {"customer": "acme"})],
    [(TICKET_TOOL, {"customer": "acme", "priority": "high"})],
]
_CUSTOMERS: Final = {"acme": {"tier": "gold", "region": "eu-west-1"}}
_SCHEMA: Final = {
    "type": "object",
    "properties": {"customer": {"type": "string"}, "priority": {"type": "string"}},
    "required": ["customer"],
}


def lookup_customer(tool_input: dict[str, Any], key: str) -> dict[str, Any]:
    customer = _CUSTOMERS.get(str(tool_input.get("customer")))
    if customer is None:
        raise ToolError("no such customer")
    return customer


def open_ticket(tool_input: dict[str, Any], key: str) -> dict[str, Any]:
    notifier = HttpNotifier(
        url=os.environ["NOTIFY_URL"], timeout_seconds=5.0, allow_insecure_loopback=True
    )
    time.sleep(ACT_SECONDS)
    notifier.notify({"ticket": tool_input}, idempotency_key=key)
    time.sleep(ACT_SECONDS)
    return {"opened": True}


TOOLS: Final = (
    Tool(LOOKUP_TOOL, "Looks a customer's tier up.", _SCHEMA, ToolMode.READ_ONLY, lookup_customer),
    Tool(TICKET_TOOL, "Opens a support ticket.", _SCHEMA, ToolMode.NONE, open_ticket),
)
