"""Two tools for the shipped ``agent`` workflow: ``-c agent_tools=team_tools.tools:TOOLS``.

* ``lookup_customer`` (read-only): answers from a table of this module;
* ``open_ticket`` (acting, mode ``keyed``): POSTs the ticket to the team's ticket
  system (the workflow setting ``ticket_url``) with the idempotency key the ledger
  hands it, ``<delivery_id>:tool:<tool-use id>``; the ticket system keeps one ticket
  per key, so a retry after a worker died mid-call opens nothing twice.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any, Final

from functions.core.errors import NotApplied, Rejected
from functions.workflows.tools import Tool, ToolError, ToolMode

CUSTOMERS: Final = {"acme": {"tier": "gold", "region": "eu-west-1"}}
SCHEMA: Final = {
    "type": "object",
    "properties": {"customer": {"type": "string"}, "priority": {"type": "string"}},
    "required": ["customer"],
}


def ticket_url() -> str:
    # The worker's WORKFLOW_SETTINGS carry every workflow setting
    # (`--workflow-setting ticket_url=...` locally, `-c workflow_setting_ticket_url=...`).
    settings = json.loads(os.environ.get("WORKFLOW_SETTINGS") or "{}")
    url = settings.get("ticket_url")
    if not url:
        raise ValueError("open_ticket needs the workflow setting ticket_url")
    return str(url)


def lookup_customer(tool_input: dict[str, Any], key: str) -> dict[str, Any]:
    customer = CUSTOMERS.get(str(tool_input.get("customer")))
    if customer is None:
        raise ToolError("no such customer")  # the model is told; nothing was done
    return customer


def open_ticket(tool_input: dict[str, Any], key: str) -> dict[str, Any]:
    body = json.dumps({"ticket": tool_input}).encode()
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    url = ticket_url()
    if not url.startswith(("http://", "https://")):
        raise Rejected("ticket_url_not_http")
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - our URL
            return {"ticket": json.loads(answer.read() or b"{}").get("ticket", key)}
    except urllib.error.HTTPError as exc:
        if exc.code in (429, 425):
            raise NotApplied("tickets_throttled") from exc  # proven not done: retried later
        if 400 <= exc.code < 500:
            raise Rejected("ticket_rejected") from exc  # refused for good
        raise  # a 5xx: unknown outcome, settled by the keyed mode (same key again)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            raise NotApplied("tickets_unavailable") from exc  # never connected
        raise


TOOLS: Final = (
    Tool(
        "lookup_customer",
        "Looks a customer's tier up.",
        SCHEMA,
        ToolMode.READ_ONLY,
        lookup_customer,
    ),
    Tool("open_ticket", "Opens a support ticket.", SCHEMA, ToolMode.KEYED, open_ticket),
)
