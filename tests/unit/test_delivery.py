"""Parsing a verified body against the contract (section 3)."""

from __future__ import annotations

import json

import pytest

from functions.core.delivery import (
    Delivery,
    InvalidDelivery,
    InvalidReason,
    is_canonical_delivery_id,
    parse_delivery,
)
from functions.core.models import WorkItem
from local.testkit import builders

DELIVERY_ID = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"


def _parse(body: bytes, *, header_id: str = DELIVERY_ID, event: str | None = None) -> Delivery:
    if event is None:
        event = json.loads(body).get("event") if body.startswith(b"{") else "package.received"
    return parse_delivery(body, header_delivery_id=header_id, header_event=event)


def _reason(body: bytes, **kwargs: object) -> InvalidReason:
    with pytest.raises(InvalidDelivery) as caught:
        _parse(body, **kwargs)  # type: ignore[arg-type]
    return caught.value.reason


def test_delivery_package_received_becomes_a_work_item() -> None:
    delivery = _parse(builders.delivery_body(DELIVERY_ID, note="ünïcödé", nested={"a": [1]}))
    assert delivery == Delivery(
        DELIVERY_ID, "package.received", builders.PACKAGE_ID, builders.MCP_URL
    )
    assert delivery.work_item() == WorkItem(
        DELIVERY_ID, "package.received", builders.PACKAGE_ID, builders.MCP_URL
    )


@pytest.mark.parametrize("event", ["ping", "package.archived", "x:y-z_1"])
def test_delivery_other_events_need_no_work(event: str) -> None:
    body = builders.delivery_body(DELIVERY_ID, event=event, package_id=None, mcp_url=None)
    delivery = _parse(body, event=event)
    assert (delivery.event, delivery.work_item()) == (event, None)


def test_delivery_unknown_event_with_package_fields_is_still_not_work() -> None:
    body = builders.delivery_body(DELIVERY_ID, event="package.archived")
    assert _parse(body, event="package.archived").work_item() is None


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"this is not json", InvalidReason.NOT_JSON),
        (b"", InvalidReason.NOT_JSON),
        (b"\xff\xfe{}", InvalidReason.NOT_JSON),
        ('{"a":1}'.encode("utf-16"), InvalidReason.NOT_JSON),  # JSON, but not UTF-8
        (b"\xef\xbb\xbf{}", InvalidReason.NOT_JSON),  # a BOM is not JSON text
        (b"[1,2]", InvalidReason.NOT_OBJECT),
        (b'"text"', InvalidReason.NOT_OBJECT),
        (b"[" * 100_000, InvalidReason.NOT_JSON),  # deep nesting is refused, not a crash
    ],
)
def test_delivery_refuses_bodies_that_are_not_a_json_object(
    body: bytes, reason: InvalidReason
) -> None:
    assert _reason(body, event="package.received") is reason


def test_delivery_refuses_repeated_fields() -> None:
    body = (
        f'{{"delivery_id":"{DELIVERY_ID}","event":"package.received",'
        f'"package_id":"a","package_id":"b","mcp_url":"https://x"}}'
    ).encode()
    assert _reason(body, event="package.received") is InvalidReason.DUPLICATE_FIELD


@pytest.mark.parametrize(
    "delivery_id",
    [
        DELIVERY_ID.upper(),
        DELIVERY_ID.replace("-", ""),
        "{" + DELIVERY_ID + "}",
        DELIVERY_ID + " ",
        "not-a-uuid",
        "",
    ],
)
def test_delivery_ids_must_be_canonical(delivery_id: str) -> None:
    assert not is_canonical_delivery_id(delivery_id)
    body = builders.delivery_body(DELIVERY_ID).replace(DELIVERY_ID.encode(), delivery_id.encode())
    assert _reason(body, header_id=delivery_id) is InvalidReason.BAD_DELIVERY_ID


def test_delivery_id_must_equal_the_header() -> None:
    other = builders.new_delivery_id()
    body = builders.delivery_body(other)
    assert _reason(body) is InvalidReason.DELIVERY_ID_MISMATCH


def test_delivery_non_string_delivery_id_is_refused() -> None:
    body = json.dumps({"delivery_id": 7, "event": "ping"}).encode()
    assert _reason(body, event="ping") is InvalidReason.BAD_DELIVERY_ID


@pytest.mark.parametrize(
    ("header", "body_event"), [("package.deleted", "package.received"), (None, "ping")]
)
def test_delivery_event_must_equal_the_header(header: str | None, body_event: str) -> None:
    body = builders.delivery_body(DELIVERY_ID, event=body_event)
    with pytest.raises(InvalidDelivery) as caught:
        parse_delivery(body, header_delivery_id=DELIVERY_ID, header_event=header)
    assert caught.value.reason is InvalidReason.EVENT_MISMATCH


@pytest.mark.parametrize("event", ["", " ping", "a" * 129, "ping\n", 5, None])
def test_delivery_event_must_be_a_short_name(event: object) -> None:
    body = json.dumps({"delivery_id": DELIVERY_ID, "event": event}).encode()
    assert _reason(body, event=str(event)) is InvalidReason.BAD_EVENT


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"package_id": None}, InvalidReason.MISSING_PACKAGE_ID),
        ({"package_id": ""}, InvalidReason.MISSING_PACKAGE_ID),
        ({"package_id": 12}, InvalidReason.MISSING_PACKAGE_ID),
        ({"mcp_url": None}, InvalidReason.MISSING_MCP_URL),
        ({"mcp_url": ["https://x"]}, InvalidReason.MISSING_MCP_URL),
    ],
)
def test_delivery_package_received_needs_string_package_id_and_mcp_url(
    fields: dict[str, object], reason: InvalidReason
) -> None:
    data = json.loads(builders.delivery_body(DELIVERY_ID))
    data.update(fields)
    data = {k: v for k, v in data.items() if v is not None}
    assert _reason(json.dumps(data).encode()) is reason
