"""A verified body, parsed into a typed delivery (docs/contract.md, Body).

Called only after the signature matched: everything here is about the contract,
not about authenticity. Each violation has one short, fixed reason code.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from functions.core.models import EVENT_PACKAGE_RECEIVED, WorkItem

# docs/contract.md, Deliveries and attempts: lower-case, canonical 8-4-4-4-12.
_DELIVERY_ID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Unknown events are acknowledged and stored (docs/contract.md, Events): bound their
# names so that an event name cannot carry arbitrary text into the table.
_EVENT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# The worker fetches with these two strings, so the receiver refuses at once what could
# never be fetched (rather than storing it to fail every attempt). The URL bound is the
# one the worker's host policy applies.
MAX_PACKAGE_ID_LENGTH: Final = 512
MAX_MCP_URL_LENGTH: Final = 2048
# C0, DEL and C1: no identifier or URL carries them.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Unicode format characters (bidi overrides such as U+202E, zero-width characters, tag
# characters) and the line and paragraph separators: invisible, and in a package_id
# that alerts show they would let a sender disguise one package as another.
_INVISIBLE_IN_ID: Final = frozenset({"Cf", "Zl", "Zp"})


class InvalidReason(StrEnum):
    """Why a verified body violates the contract (the ``reason`` of a 400)."""

    NOT_JSON = "body_not_json"
    TOO_DEEP = "body_too_deep"
    NOT_OBJECT = "body_not_object"
    DUPLICATE_FIELD = "body_duplicate_field"
    BAD_DELIVERY_ID = "delivery_id_not_canonical"
    DELIVERY_ID_MISMATCH = "delivery_id_mismatch"
    BAD_EVENT = "event_invalid"
    EVENT_MISMATCH = "event_mismatch"
    MISSING_PACKAGE_ID = "package_id_missing"
    BAD_PACKAGE_ID = "package_id_invalid"
    MISSING_MCP_URL = "mcp_url_missing"
    BAD_MCP_URL = "mcp_url_invalid"


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

    def work_item(self, *, traceparent: str | None = None) -> WorkItem | None:
        """The work this delivery needs: only ``package.received`` is processed.

        Ping and unknown events are acknowledged and recorded, never processed
        (docs/contract.md, Events).

        Args:
            traceparent: the trace the work continues (the receipt's accept span).
        """
        if self.event != EVENT_PACKAGE_RECEIVED or self.package_id is None or self.mcp_url is None:
            return None
        return WorkItem(self.delivery_id, self.event, self.package_id, self.mcp_url, traceparent)


def is_canonical_delivery_id(text: str) -> bool:
    """True for a lower-case canonical UUID (what RelayLink puts in every delivery)."""
    return _DELIVERY_ID.fullmatch(text) is not None


def parse_delivery(body: bytes, *, header_delivery_id: str, header_event: str | None) -> Delivery:
    """Parse and check a verified body against the headers it arrived with.

    Raises:
        InvalidDelivery: the body is not a UTF-8 JSON object, nests deeper than the
            parser supports, repeats a top-level key, its ``delivery_id`` or ``event``
            differ from the headers, or a ``package.received`` lacks a valid
            ``package_id`` (one without control or Unicode format characters) or
            ``mcp_url``.
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
    package_id = _fetch_field(
        data.get("package_id"),
        max_length=MAX_PACKAGE_ID_LENGTH,
        missing=InvalidReason.MISSING_PACKAGE_ID,
        invalid=InvalidReason.BAD_PACKAGE_ID,
    )
    # Every such character lies above U+007F: an ASCII id (RelayLink's own) has none.
    if not package_id.isascii() and any(
        unicodedata.category(char) in _INVISIBLE_IN_ID for char in package_id
    ):
        raise InvalidDelivery(InvalidReason.BAD_PACKAGE_ID)
    mcp_url = _fetch_field(
        data.get("mcp_url"),
        max_length=MAX_MCP_URL_LENGTH,
        missing=InvalidReason.MISSING_MCP_URL,
        invalid=InvalidReason.BAD_MCP_URL,
    )
    return Delivery(delivery_id, event, package_id, mcp_url)


def _fetch_field(
    value: object, *, max_length: int, missing: InvalidReason, invalid: InvalidReason
) -> str:
    """A non-empty string of Unicode scalars, without control characters, within bounds."""
    if not isinstance(value, str) or not value:
        raise InvalidDelivery(missing)
    if len(value) > max_length or _CONTROL.search(value) is not None:
        raise InvalidDelivery(invalid)
    try:
        # JSON can spell a lone surrogate ("\ud800"): such a string has no UTF-8 form,
        # so no request to the MCP server and no DynamoDB item could carry it.
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidDelivery(invalid) from None
    return value


class _Object(dict[str, Any]):
    """A parsed JSON object that remembers whether its text repeated a key."""

    __slots__ = ("repeated",)
    repeated: bool


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    data = _Object(pairs)
    data.repeated = len(data) != len(pairs)
    return data


# json.loads with options builds this decoder for every call; one is kept (as json.loads
# keeps its default one, shared by every thread).
_DECODER: Final = json.JSONDecoder(object_pairs_hook=_object, parse_int=float)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        # Decode explicitly: json.loads(bytes) would also guess UTF-16/32, which the
        # contract does not allow (docs/contract.md, Body: UTF-8 only).
        # parse_int=float (_DECODER): the receiver reads no number, and int() refuses more than
        # 4,300 digits, which would make a valid body "not JSON".
        data: Any = _DECODER.decode(body.decode("utf-8"))
    except RecursionError:
        # Valid JSON, maybe, but nested beyond what the parser can hold.
        raise InvalidDelivery(InvalidReason.TOO_DEEP) from None
    except ValueError:  # UnicodeDecodeError is one
        raise InvalidDelivery(InvalidReason.NOT_JSON) from None
    if not isinstance(data, _Object):
        raise InvalidDelivery(InvalidReason.NOT_OBJECT)
    # json.loads keeps the last of repeated keys; another parser might keep the first.
    # Refusing repeated top-level keys means every reader of these bytes sees the same
    # delivery. Nested objects are never read, so a repeat inside one changes nothing.
    if data.repeated:
        raise InvalidDelivery(InvalidReason.DUPLICATE_FIELD)
    return data
