"""Two tools for the shipped ``agent`` workflow: ``-c agent_tools=team_tools.tools:TOOLS``.

* ``lookup_customer`` (read-only): answers from a table of this module;
* ``open_ticket`` (acting, mode ``checked``): POSTs the ticket to the team's
  ticket system (``ticket_url`` in ``settings.json`` beside this module) with the
  idempotency key the ledger hands it, ``<delivery_id>:tool:<tool-use id>``. A
  worker that died after the POST and before the ledger's record leaves the outcome
  unknown; the next attempt asks the ticket system (``GET <ticket_url>/<key>``: 200
  there, 404 not) before it POSTs again, so each key is POSTed once. (Mode
  ``keyed`` would POST again with the same key, for a ticket system that drops a
  repeated key.)
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Final

from functions.core.errors import NotApplied, Rejected, TransientError
from functions.workflows.tools import Tool, ToolError, ToolMode

SETTINGS_FILE = Path(__file__).with_name("settings.json")
CUSTOMERS: Final = {"acme": {"tier": "gold", "region": "eu-west-1"}}
SCHEMA: Final = {
    "type": "object",
    "properties": {"customer": {"type": "string"}, "priority": {"type": "string"}},
    "required": ["customer"],
}


def ticket_url() -> str:
    # Shipped with the code (the folder is the asset's root): the agent workflow's own
    # settings take no names it does not know.
    settings = json.loads(SETTINGS_FILE.read_text(encoding="utf-8"))
    url = settings.get("ticket_url")
    if not isinstance(url, str) or not url:
        raise ValueError(f"{SETTINGS_FILE}: ticket_url is missing")
    return url


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


def ticket_opened(key: str) -> bool:
    """The ``checked`` mode's lookup: does the ticket system hold this key's ticket?"""
    url = f"{ticket_url()}/{urllib.parse.quote(key, safe='')}"
    try:
        with urllib.request.urlopen(url, timeout=5):  # noqa: S310 - checked when POSTed
            return True
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise TransientError("ticket_lookup_failed") from exc


TOOLS: Final = (
    Tool(
        "lookup_customer",
        "Looks a customer's tier up.",
        SCHEMA,
        ToolMode.READ_ONLY,
        lookup_customer,
    ),
    Tool(
        "open_ticket",
        "Opens a support ticket.",
        SCHEMA,
        ToolMode.CHECKED,
        open_ticket,
        reconcile=ticket_opened,
    ),
)
