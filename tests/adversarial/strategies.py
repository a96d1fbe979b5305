"""Hypothesis strategies for hostile and for validly signed requests."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from functions.core import wire
from local.testkit import builders, vectors

NOW = vectors.load_vectors().now
EXAMPLES = 1000  # what each property states explicitly: @settings(max_examples=1000, ...)
# Reproducible in CI: derandomized, no example database. Each property adds
# max_examples=1000 and deadline=None (no per-example deadline on a shared 2-core box).
REPRODUCIBLE = settings(
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Surrogates included: a Lambda event is JSON, and JSON can spell a lone surrogate.
any_char = st.characters(exclude_categories=()) | st.sampled_from("\ud800\udfff\x00\r\n\t ,=")
any_text = st.text(any_char, max_size=40)
canonical_ids = st.uuids().map(str)
near_timestamps = st.integers(NOW - 400, NOW + 400).map(str)
b64_text = st.binary(min_size=0, max_size=40).map(lambda b: base64.b64encode(b).decode())
signature_values = st.lists(
    st.tuples(st.sampled_from(["v1,", "v2,", "v1", "", "V1,"]), b64_text | any_text).map("".join),
    max_size=4,
).map(" ".join)


def fetch_text(max_size: int) -> st.SearchStrategy[str]:
    """Text the receiver accepts in ``package_id`` and ``mcp_url``: scalars, no controls."""
    return st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=max_size)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=6,
)
HEADER_NAMES = [
    wire.HEADER_DELIVERY,
    wire.HEADER_EVENT,
    wire.HEADER_TIMESTAMP,
    wire.HEADER_SIGNATURE,
    "X-RelayLink-Signature",
    "content-type",
    wire.HEADER_ATTEMPT,
]


@st.composite
def hostile_events(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """An unsigned (or wrongly signed) Lambda event, and the input strings it carries."""
    headers = draw(
        st.dictionaries(
            st.sampled_from(HEADER_NAMES) | any_text,
            canonical_ids | near_timestamps | signature_values | any_text,
            max_size=7,
        )
    )
    inputs = [v for v in headers.values() if isinstance(v, str)]
    shape = draw(st.sampled_from(["http", "rest", "mangled", "garbage"]))
    if shape == "garbage":
        return draw(json_values), inputs
    build = builders.rest_api_event if shape == "rest" else builders.http_api_event
    b64 = draw(st.booleans())
    event = build(headers, b"", base64_encoded=b64)
    # The body as API Gateway would pass it: arbitrary bytes in base64 transport, or any
    # text (also text that is not base64 although the flag says it is, and text with
    # lone surrogates, which has no exact bytes).
    raw = draw(st.binary(max_size=400) | st.none())
    if raw is not None and b64:
        event["body"] = base64.b64encode(raw).decode()
    else:
        text = raw.decode("latin-1") if raw is not None else draw(st.text(any_char, max_size=400))
        event["body"] = text
        inputs.append(text)
    if shape == "mangled":
        key = draw(st.sampled_from(["body", "headers", "isBase64Encoded", "requestContext"]))
        event[key] = draw(json_values)
    return event, inputs


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


EVENT_NAMES = ["package.received", "package.received", "ping", "package.deleted", "x:y-1"]
FIELDS = ["delivery_id", "event", "created_at", "package_id", "mcp_url"]


@dataclass(frozen=True)
class SignedBody:
    delivery_id: str  # the header value
    event: str  # the header value
    body: bytes
    clean: bool  # built from the contract with nothing broken


@st.composite
def signed_bodies(draw: st.DrawFn, delivery_id: str | None = None) -> SignedBody:
    """A body (contract-shaped, altered, or arbitrary bytes) and the headers it goes with."""
    did = delivery_id or draw(canonical_ids)
    if draw(st.integers(0, 9)) == 0:
        did = did.upper()
    event = draw(st.sampled_from(EVENT_NAMES))
    if draw(st.integers(0, 5)) == 0:
        return SignedBody(did, event, draw(st.binary(max_size=300)), False)
    clean = did == did.lower()
    data: dict[str, Any] = {
        "delivery_id": did,
        "event": event,
        "created_at": "2026-12-02T15:04:05Z",
        "package_id": draw(fetch_text(30)),
        "mcp_url": draw(
            st.sampled_from([builders.MCP_URL, "https://x.relaylink.example/m"]) | fetch_text(40)
        ),
    }
    for key in FIELDS:
        action = draw(st.sampled_from(["keep"] * 6 + ["drop", "replace"]))
        if action == "drop":
            del data[key]
            clean = clean and key == "created_at"
        elif action == "replace":
            data[key] = draw(json_values)
            clean = clean and key == "created_at"
    for key, value in draw(st.dictionaries(any_text, json_values, max_size=3)).items():
        if key not in data:
            data[key] = value
    text = json.dumps(
        data,
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.none() | st.integers(0, 2)),
    )
    if not _encodable(text):
        text = json.dumps(data)
    damage = draw(st.sampled_from(["none"] * 6 + ["bom", "junk", "dup", "truncate"]))
    if damage == "bom":
        text = "\ufeff" + text
    elif damage == "junk":
        text += draw(st.text(min_size=1, max_size=5))
    elif damage == "dup":
        text = '{"event": "ping", ' + text[1:] if data else text
    elif damage == "truncate":
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    return SignedBody(did, event, text.encode("utf-8"), clean and damage == "none")


def signed_event(case: SignedBody, *, timestamp: int = NOW) -> dict[str, Any]:
    headers = builders.signed_headers(
        case.body, delivery_id=case.delivery_id, timestamp=timestamp, event=case.event
    )
    # base64 transport: the exact bytes, UTF-8 or not.
    return builders.http_api_event(headers, case.body, base64_encoded=True)


def fresh_id(counter: list[int]) -> str:
    """A canonical id no earlier example used (ids are never reused across examples)."""
    counter[0] += 1
    # uuid5, not UUID(int=n): small ints give all-digit ids, which upper() leaves unchanged.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"relaylink-property/{counter[0]}"))


TAMPERINGS = [
    "body byte",
    "body appended",
    "delivery id",
    "timestamp",
    "signature byte",
    "signature truncated",
    "other secret",
    "signature of another body",
    "signature version",
]


@st.composite
def tampered_events(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A validly signed request with one thing changed after signing, and what changed.

    Every change keeps the headers well-formed and fresh, so the request reaches the
    HMAC comparison: only the signature check stands between it and the table.
    """
    case = draw(signed_bodies())
    timestamp = draw(st.integers(NOW - 300, NOW + 300))
    headers = builders.signed_headers(
        case.body, delivery_id=case.delivery_id, timestamp=timestamp, event=case.event
    )
    body = case.body
    how = draw(st.sampled_from(TAMPERINGS))
    sig = wire.HEADER_SIGNATURE
    header = {name.lower(): name for name in headers}
    if how == "body byte":
        if not body:
            body = b"\x00"
        else:
            at = draw(st.integers(0, len(body) - 1))
            flip = draw(st.integers(1, 255))
            body = body[:at] + bytes([body[at] ^ flip]) + body[at + 1 :]
    elif how == "body appended":
        body += draw(st.binary(min_size=1, max_size=8))
    elif how == "delivery id":
        other = draw(canonical_ids.filter(lambda d: d != case.delivery_id))
        headers[header[wire.HEADER_DELIVERY]] = other
    elif how == "timestamp":
        moved = draw(st.integers(NOW - 300, NOW + 300).filter(lambda t: t != timestamp))
        headers[header[wire.HEADER_TIMESTAMP]] = str(moved)
    elif how in ("signature byte", "signature truncated"):
        value = bytearray(base64.b64decode(headers[header[sig]].removeprefix("v1,")))
        if how == "signature byte":
            value[draw(st.integers(0, len(value) - 1))] ^= draw(st.integers(1, 255))
        else:
            value = value[: draw(st.integers(0, len(value) - 1))]
        headers[header[sig]] = "v1," + base64.b64encode(bytes(value)).decode()
    elif how == "other secret":
        headers[header[sig]] = builders.sign(
            builders.OTHER_SECRET, delivery_id=case.delivery_id, timestamp=timestamp, body=body
        )
    elif how == "signature of another body":
        other_body = draw(st.binary(max_size=60).filter(lambda b: b != body))
        headers[header[sig]] = builders.sign(
            builders.SECRET, delivery_id=case.delivery_id, timestamp=timestamp, body=other_body
        )
    else:  # the right value under a version the receiver does not accept
        version = draw(st.sampled_from(["v0", "v2", "V1", "v1a", "v11"]))
        headers[header[sig]] = version + headers[header[sig]].removeprefix("v1")
    # Sometimes alongside extra wrong entries (rotation sends several).
    if draw(st.booleans()):
        noise = draw(st.lists(b64_text.map(lambda text: "v1," + text), max_size=3))
        headers[header[sig]] = " ".join([*noise, headers[header[sig]]])
    return builders.http_api_event(headers, body, base64_encoded=True), how
