"""Tools for the agent workflow on the local stack (``chaos --workflow agent --tools``).

``-c agent_tools=local.agent_tools:TOOLS`` as a team would write them:

* ``lookup_customer`` (read-only): answers from a table in memory;
* ``open_ticket`` (acting, outcome mode ``none``): POSTs to the local notification
  target (``NOTIFY_URL``, which counts each POST under its ``Idempotency-Key``,
  ``<delivery_id>:tool:<tool-use id>``). It waits :data:`ACT_SECONDS` before and after
  the POST, so worker kills land inside the tool's window: after the POST and before
  the ledger's done record, the outcome is unknown and the delivery waits in doubt.

``-c agent_tools=local.agent_tools:CHECKED_TOOLS`` (``make demo``): the same two, with
``open_ticket`` in mode ``checked``: an attempt that died after the POST asks the
target whether the ticket's key was applied (``GET <NOTIFY_URL>/<key>``) instead of
leaving it in doubt.

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


def _tickets() -> HttpNotifier:
    return HttpNotifier(
        url=os.environ["NOTIFY_URL"], timeout_seconds=5.0, allow_insecure_loopback=True
    )


def open_ticket(tool_input: dict[str, Any], key: str) -> dict[str, Any]:
    notifier = _tickets()
    time.sleep(ACT_SECONDS)
    notifier.notify({"ticket": tool_input}, idempotency_key=key)
    time.sleep(ACT_SECONDS)
    return {"opened": True}


def ticket_opened(key: str) -> bool:
    """The ``checked`` mode's lookup: does the ticket system have this key's ticket?"""
    return _tickets().was_applied(key)


_LOOKUP: Final = Tool(
    LOOKUP_TOOL, "Looks a customer's tier up.", _SCHEMA, ToolMode.READ_ONLY, lookup_customer
)
_TICKET_DESCRIPTION: Final = "Opens a support ticket."
TOOLS: Final = (
    _LOOKUP,
    Tool(TICKET_TOOL, _TICKET_DESCRIPTION, _SCHEMA, ToolMode.NONE, open_ticket),
)
CHECKED_TOOLS: Final = (
    _LOOKUP,
    Tool(
        TICKET_TOOL,
        _TICKET_DESCRIPTION,
        _SCHEMA,
        ToolMode.CHECKED,
        open_ticket,
        reconcile=ticket_opened,
    ),
)
