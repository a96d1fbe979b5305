"""A verified body, parsed into a typed delivery (docs/contract.md, Body).

Called only after the signature matched: everything here is about the contract,
not about authenticity. Each violation has one short, fixed reason code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from functions.core.models import EVENT_PACKAGE_RECEIVED, WorkItem

# docs/contract.md, Deliveries and attempts: lower-case, canonical 8-4-4-4-12.
_DELIVERY_ID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Unknown events are acknowledged and stored (docs/contract.md, Events): bound their
# names so that an event name cannot carry arbitrary text into the table.
_EVENT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


class InvalidReason(StrEnum):
    """Why a verified body violates the contract (the ``reason`` of a 400)."""

    NOT_JSON = "body_not_json"
    NOT_OBJECT = "body_not_object"
    DUPLICATE_FIELD = "body_duplicate_field"
    BAD_DELIVERY_ID = "delivery_id_not_canonical"
    DELIVERY_ID_MISMATCH = "delivery_id_mismatch"
    BAD_EVENT = "event_invalid"
    EVENT_MISMATCH = "event_mismatch"
    MISSING_PACKAGE_ID = "package_id_missing"
    MISSING_MCP_URL = "mcp_url_missing"


class InvalidDelivery(Exception):
    """The body breaks the contract; ``reason`` says how."""

    def __init__(self, reason: InvalidReason) -> None:
        self.reason = reason
        super().__init__(reason.value)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What the receiver keeps of one verified body (never the body itself)."""

    delivery_id: str
    event: str
    package_id: str | None = None  # set exactly when the event is package.received
    mcp_url: str | None = None

    def work_item(self) -> WorkItem | None:
        """The work this delivery needs: only ``package.received`` is processed.

        Ping and unknown events are acknowledged and recorded, never processed
        (docs/contract.md, Events).
        """
        if self.event != EVENT_PACKAGE_RECEIVED or self.package_id is None or self.mcp_url is None:
            return None
        return WorkItem(self.delivery_id, self.event, self.package_id, self.mcp_url)


def is_canonical_delivery_id(text: str) -> bool:
    """True for a lower-case canonical UUID (what RelayLink puts in every delivery)."""
    return _DELIVERY_ID.fullmatch(text) is not None


def parse_delivery(body: bytes, *, header_delivery_id: str, header_event: str | None) -> Delivery:
    """Parse and check a verified body against the headers it arrived with.

    Raises:
        InvalidDelivery: the body is not a UTF-8 JSON object, its ``delivery_id`` or
            ``event`` differ from the headers, or a ``package.received`` lacks a
            string ``package_id`` or ``mcp_url``.
    """
    data = _json_object(body)
    delivery_id = data.get("delivery_id")
    if not isinstance(delivery_id, str) or not is_canonical_delivery_id(delivery_id):
        raise InvalidDelivery(InvalidReason.BAD_DELIVERY_ID)
    # The header was signed; a canonical body id that differs from it is a contract
    # violation, not a second delivery (docs/contract.md, Body).
    if delivery_id != header_delivery_id:
        raise InvalidDelivery(InvalidReason.DELIVERY_ID_MISMATCH)
    event = data.get("event")
    if not isinstance(event, str) or _EVENT.fullmatch(event) is None:
        raise InvalidDelivery(InvalidReason.BAD_EVENT)
    if event != header_event:
        raise InvalidDelivery(InvalidReason.EVENT_MISMATCH)
    if event != EVENT_PACKAGE_RECEIVED:
        return Delivery(delivery_id, event)
    package_id = data.get("package_id")
    if not isinstance(package_id, str) or not package_id:
        raise InvalidDelivery(InvalidReason.MISSING_PACKAGE_ID)
    mcp_url = data.get("mcp_url")
    if not isinstance(mcp_url, str) or not mcp_url:
        raise InvalidDelivery(InvalidReason.MISSING_MCP_URL)
    return Delivery(delivery_id, event, package_id, mcp_url)


class _DuplicateField(ValueError):
    pass


def _unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of repeated keys; another parser might keep the first.
    # Refusing repeats means every reader of these bytes sees the same delivery.
    data = dict(pairs)
    if len(data) != len(pairs):
        raise _DuplicateField
    return data


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        # Decode explicitly: json.loads(bytes) would also guess UTF-16/32, which the
        # contract does not allow (docs/contract.md, Body: UTF-8 only).
        data: Any = json.loads(body.decode("utf-8"), object_pairs_hook=_unique_fields)
    except _DuplicateField:
        raise InvalidDelivery(InvalidReason.DUPLICATE_FIELD) from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidDelivery(InvalidReason.NOT_JSON) from None
    if not isinstance(data, dict):
        raise InvalidDelivery(InvalidReason.NOT_OBJECT)
    return data
