"""The curated hostile corpus: named requests, each with the answer it must get.

Data only: ``test_hostile_corpus.py`` runs every case through the real handler
against moto. Each case says what the receiver must answer (status, outcome, reason)
and what it must store: ``NOTHING``, ``INBOX`` (an ignored event) or ``WORK`` (inbox
item and work item, with the ``package_id`` and ``mcp_url`` of the case's body).

``mcp_url`` cases follow the architecture: the receiver stores a verified body's
``mcp_url`` as given and the worker's :class:`functions.core.host_policy.HostPolicy`
decides whether the token may go there; ``mcp_allowed`` says what the policy must say.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from functions.core import wire
from local.testkit import builders, vectors

NOW: Final = vectors.load_vectors().now
SECRET: Final = builders.SECRET
ALLOWED_HOSTS: Final = ("*.relaylink.example",)
LIMIT: Final = wire.MAX_BODY_BYTES

NOTHING: Final = "nothing"
INBOX: Final = "inbox"
WORK: Final = "work"

SIG: Final = "X-RelayLink-Signature"
TS: Final = "X-RelayLink-Timestamp"
DELIVERY: Final = "X-RelayLink-Delivery"
EVENT: Final = "X-RelayLink-Event"


@dataclass(frozen=True)
class HostileCase:
    name: str
    category: str
    event: Any  # what API Gateway (or an attacker with Lambda access) hands the handler
    status: int
    outcome: str
    reason: str | None
    stores: str = NOTHING
    body: bytes = b""  # the exact bytes, for the stored digest
    package_id: str | None = None
    mcp_url: str | None = None
    mcp_allowed: bool | None = None  # HostPolicy's verdict on mcp_url, when it matters
    before: tuple[Any, ...] = field(default=())  # events sent first; each must be accepted


def _unique_id(name: str) -> str:
    # Deterministic per case name, canonical lower case.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "relaylink-corpus/" + name))


def _request(name: str, *, timestamp: int = NOW, **kw: Any) -> builders.SignedRequest:
    kw.setdefault("delivery_id", _unique_id(name))
    return builders.signed_request(timestamp=timestamp, secrets=SECRET, **kw)


def _event(
    request: builders.SignedRequest,
    header_changes: Mapping[str, str | None] | None = None,
    *,
    b64: bool = False,
) -> dict[str, Any]:
    """``request``'s event with headers replaced (a value) or removed (None)."""
    headers = dict(request.headers)
    for header, value in (header_changes or {}).items():
        if value is None:
            headers.pop(header, None)
        else:
            headers[header] = value
    return builders.http_api_event(headers, request.body, base64_encoded=b64)


def _signed_raw(name: str, body: bytes, *, delivery_id: str | None = None) -> dict[str, Any]:
    """An event whose body is ``body`` exactly, correctly signed (base64 transport)."""
    delivery_id = delivery_id or _unique_id(name)
    headers = builders.signed_headers(body, delivery_id=delivery_id, timestamp=NOW)
    return builders.http_api_event(headers, body, base64_encoded=True)


def _signed_headers_for(name: str, body: bytes, delivery_id: str, **changes: str) -> dict[str, str]:
    headers = builders.signed_headers(body, delivery_id=delivery_id, timestamp=NOW)
    headers.update(changes)
    return headers


def _sig(request: builders.SignedRequest) -> str:
    return request.headers["X-RelayLink-Signature"]


def _b64_value(request: builders.SignedRequest) -> str:
    return _sig(request).removeprefix("v1,")


def _with_alphabet_chars(name: str) -> builders.SignedRequest:
    """A valid request whose signature contains '+' or '/' (so urlsafe differs)."""
    for offset in range(300):
        request = _request(name, timestamp=NOW - offset)
        if any(ch in _b64_value(request) for ch in "+/"):
            return request
    raise AssertionError("no signature with + or / within the tolerance")


def _body_with_padding(name: str, total: int) -> tuple[str, bytes]:
    delivery_id = _unique_id(name)
    base = builders.delivery_body(delivery_id, padding="")
    body = builders.delivery_body(delivery_id, padding="x" * (total - len(base)))
    assert len(body) == total
    return delivery_id, body


def _json_body(name: str, **fields: Any) -> tuple[str, bytes]:
    """A body whose fields are set (or removed with None-as-absent left to the caller)."""
    delivery_id = _unique_id(name)
    data: dict[str, Any] = {
        "delivery_id": delivery_id,
        "event": "package.received",
        "created_at": "2026-12-02T15:04:05Z",
        "package_id": builders.PACKAGE_ID,
        "mcp_url": builders.MCP_URL,
    }
    data.update(fields)
    return delivery_id, json.dumps(data).encode()


def _rest(request: builders.SignedRequest, *, b64: bool = False) -> dict[str, Any]:
    return builders.rest_api_event(request.headers, request.body, base64_encoded=b64)


def _accepted(
    name: str,
    category: str,
    event: Any,
    body: bytes,
    *,
    mcp_url: str = builders.MCP_URL,
    mcp_allowed: bool | None = None,
) -> HostileCase:
    return HostileCase(
        name,
        category,
        event,
        202,
        "accepted",
        None,
        WORK,
        body,
        builders.PACKAGE_ID,
        mcp_url,
        mcp_allowed,
    )


def _rejected(name: str, category: str, event: Any, reason: str) -> HostileCase:
    return HostileCase(name, category, event, 401, "rejected", reason)


def _invalid(name: str, category: str, event: Any, reason: str, **kw: Any) -> HostileCase:
    return HostileCase(name, category, event, 400, "invalid", reason, **kw)


NO_MATCH = "no_matching_signature"
BAD_TS = "malformed_timestamp"
STALE = "timestamp_out_of_tolerance"
MISSING = "missing_signature_headers"
NOT_JSON = "body_not_json"
MALFORMED = "malformed_request"
BAD_ID = "package_id_invalid"


def _digits(zero: int) -> dict[int, int]:
    """Translate ASCII digits to the ten digits starting at code point ``zero``."""
    return {ord("0") + i: zero + i for i in range(10)}


def _cases() -> list[HostileCase]:
    cases: list[HostileCase] = []
    add = cases.append

    # --- Duplicated, folded and control-character headers ---------------------------
    h = "headers"
    r = _request("dup-sig")
    add(
        _rejected(
            "signature header repeated (HTTP API joins with a comma)",
            h,
            _event(r, {SIG: _sig(r) + "," + _sig(r)}),
            NO_MATCH,
        )
    )
    r = _request("dup-ts")
    add(_rejected("timestamp header repeated", h, _event(r, {TS: f"{NOW},{NOW}"}), BAD_TS))
    r = _request("dup-delivery")
    add(
        _rejected(
            "delivery header repeated",
            h,
            _event(r, {DELIVERY: r.delivery_id + "," + r.delivery_id}),
            NO_MATCH,
        )
    )
    r = _request("rest-multi-sig")
    rest = _rest(r)
    rest["multiValueHeaders"][SIG] = [_sig(r), _sig(r)]
    add(_rejected("REST multiValueHeaders with two signature values", h, rest, NO_MATCH))
    r = _request("case-dup")
    ev = _event(r)
    ev["headers"] = {**r.headers, SIG.lower(): _sig(r)}  # two spellings of one name
    add(_rejected("signature header under two spellings of its name", h, ev, NO_MATCH))
    r = _request("folded")
    add(
        _rejected(
            "signature folded over two lines (obs-fold)",
            h,
            _event(r, {SIG: _sig(r)[:12] + "\r\n " + _sig(r)[12:]}),
            NO_MATCH,
        )
    )
    r = _request("crlf-sig")
    add(
        _rejected(
            "signature with a trailing CR LF", h, _event(r, {SIG: _sig(r) + "\r\n"}), NO_MATCH
        )
    )
    r = _request("nul-ts")
    add(_rejected("timestamp with a trailing NUL", h, _event(r, {TS: f"{NOW}\x00"}), BAD_TS))
    did = _unique_id("nul-delivery")
    body = builders.delivery_body(did)
    add(
        _invalid(
            "delivery header with a NUL, signed over it",
            h,
            builders.http_api_event(_signed_headers_for("x", body, did + "\x00"), body),
            "delivery_id_mismatch",
        )
    )
    r = _request("tab-event")
    headers = builders.signed_headers(
        r.body, delivery_id=r.delivery_id, timestamp=NOW, event="package.received\t"
    )
    add(
        _invalid(
            "event header with a tab (signature does not cover it)",
            h,
            builders.http_api_event(headers, r.body),
            "event_mismatch",
        )
    )
    r = _request("surrogate-delivery")
    add(
        _rejected(
            "delivery header with a lone surrogate",
            h,
            _event(r, {DELIVERY: r.delivery_id[:8] + "\ud800"}),
            NO_MATCH,
        )
    )
    r = _request("missing-delivery")
    add(_rejected("no delivery header", h, _event(r, {DELIVERY: None}), MISSING))
    r = _request("empty-sig")
    add(_rejected("empty signature header", h, _event(r, {SIG: ""}), MISSING))
    r = _request("dup-event")
    add(
        _invalid(
            "event header repeated (not signed, so compared with the body)",
            h,
            _event(r, {EVENT: "package.received,package.received"}),
            "event_mismatch",
        )
    )
    r = _request("nul-sig")
    add(
        _rejected(
            "NUL inside the signature value",
            h,
            _event(r, {SIG: _sig(r)[:9] + "\x00" + _sig(r)[9:]}),
            NO_MATCH,
        )
    )
    r = _request("crlf-injection")
    add(
        _rejected(
            "CR LF and a forged header inside the delivery header",
            h,
            _event(r, {DELIVERY: r.delivery_id + "\r\nX-RelayLink-Signature: v1,AAAA"}),
            NO_MATCH,
        )
    )

    # --- Signature lists ----------------------------------------------------------------
    s = "signature list"
    r = _request("spaces-around")
    add(
        _accepted(
            "valid entry between doubled, leading and trailing spaces",
            s,
            _event(r, {SIG: "  " + _sig(r) + "   "}),
            r.body,
        )
    )
    r = _request("only-spaces")
    add(_rejected("signature header of spaces only", s, _event(r, {SIG: "   "}), NO_MATCH))
    r = _request("empty-v1")
    add(_rejected("v1 entry with an empty value", s, _event(r, {SIG: "v1,"}), NO_MATCH))
    r = _request("space-after-comma")
    add(
        _rejected("space after the v1 comma", s, _event(r, {SIG: "v1, " + _b64_value(r)}), NO_MATCH)
    )
    r = _request("bad-then-good")
    add(
        _accepted(
            "bad entry, then the valid one", s, _event(r, {SIG: "v1,AAAA " + _sig(r)}), r.body
        )
    )
    r = _request("tab-separated")
    add(
        _rejected(
            "entries separated by a tab", s, _event(r, {SIG: "v1,AAAA\t" + _sig(r)}), NO_MATCH
        )
    )
    r = _request("upper-version")
    add(
        _rejected(
            "version prefix in upper case (V1)",
            s,
            _event(r, {SIG: "V1," + _b64_value(r)}),
            NO_MATCH,
        )
    )
    r = _request("v2-only")
    add(
        _rejected(
            "only an unknown version carries the right value",
            s,
            _event(r, {SIG: "v2," + _b64_value(r)}),
            NO_MATCH,
        )
    )
    r = _request("v1a")
    add(_rejected("version prefix v1a", s, _event(r, {SIG: "v1a," + _b64_value(r)}), NO_MATCH))
    r = _request("many-entries")
    add(
        _accepted(
            "one hundred wrong entries, then the valid one",
            s,
            _event(r, {SIG: " ".join(["v1,AAAA"] * 100 + [_sig(r)])}),
            r.body,
        )
    )
    r = _request("empty-entries")
    add(
        _accepted(
            "empty entries between a wrong and the valid entry",
            s,
            _event(r, {SIG: "v1,AAAA    " + _sig(r) + "  "}),
            r.body,
        )
    )
    r = _request("commas-only")
    add(_rejected("entries of bare commas", s, _event(r, {SIG: ", ,, ,"}), NO_MATCH))
    r = _request("rotation-pair")
    two = builders.signed_request(
        timestamp=NOW, delivery_id=r.delivery_id, secrets=[builders.OTHER_SECRET, SECRET]
    )
    add(
        _accepted(
            "rotation: an unknown secret's entry, then the known one",
            s,
            builders.http_api_event(two.headers, two.body),
            two.body,
        )
    )

    # --- base64 padding and alphabet games -----------------------------------------
    b = "base64"
    r = _request("no-padding")
    add(
        _rejected(
            "signature without its '=' padding",
            b,
            _event(r, {SIG: _sig(r).rstrip("=")}),
            NO_MATCH,
        )
    )
    r = _request("extra-padding")
    add(_rejected("signature with an extra '='", b, _event(r, {SIG: _sig(r) + "="}), NO_MATCH))
    r = _with_alphabet_chars("urlsafe")
    urlsafe = _sig(r).replace("+", "-").replace("/", "_")
    add(_rejected("signature in the urlsafe alphabet", b, _event(r, {SIG: urlsafe}), NO_MATCH))
    r = _request("inner-space")
    add(
        _rejected(
            "whitespace inside the base64",
            b,
            _event(r, {SIG: _sig(r)[:10] + "\n" + _sig(r)[10:]}),
            NO_MATCH,
        )
    )
    r = _request("hex-digest")
    hex_mac = hmac.new(
        base64.b64decode(SECRET[6:]), f"{r.delivery_id}.{NOW}.".encode() + r.body, hashlib.sha256
    ).hexdigest()
    add(
        _rejected(
            "right HMAC in hex instead of base64", b, _event(r, {SIG: "v1," + hex_mac}), NO_MATCH
        )
    )
    r = _request("undecoded-key")
    raw_key_mac = hmac.new(
        SECRET.encode(), f"{r.delivery_id}.{NOW}.".encode() + r.body, hashlib.sha256
    ).digest()
    add(
        _rejected(
            "HMAC keyed with the secret text, not its decoded key",
            b,
            _event(r, {SIG: "v1," + base64.b64encode(raw_key_mac).decode()}),
            NO_MATCH,
        )
    )
    r = _request("double-padding")
    add(
        _rejected(
            "signature with its padding doubled",
            b,
            _event(r, {SIG: _sig(r).rstrip("=") + "=" * 4}),
            NO_MATCH,
        )
    )
    r = _request("double-b64")
    add(
        _rejected(
            "signature base64-encoded twice",
            b,
            _event(r, {SIG: "v1," + base64.b64encode(_b64_value(r).encode()).decode()}),
            NO_MATCH,
        )
    )

    # --- Timestamps -----------------------------------------------------------------------
    t = "timestamp"
    for offset in (300, -300):
        r = _request(f"ts{offset}", timestamp=NOW + offset)
        add(_accepted(f"timestamp {offset:+d} s (edge of tolerance)", t, _event(r), r.body))
    for offset in (301, -301):
        r = _request(f"ts{offset}", timestamp=NOW + offset)
        add(_rejected(f"timestamp {offset:+d} s", t, _event(r), STALE))
    absurd = {
        "twenty digits": "99999999999999999999",
        "negative": f"-{NOW}",
        "float": f"{NOW}.0",
        "leading plus": f"+{NOW}",
        "leading zero": f"0{NOW}",
        "Arabic-Indic digits": str(NOW).translate(_digits(0x0660)),
        "fullwidth digits": str(NOW).translate(_digits(0xFF10)),
        "leading space": f" {NOW}",
        "milliseconds": f"{NOW}000",  # 13 digits
        "exponent": "1.764687845e9",
    }
    for label, value in absurd.items():
        r = _request(f"ts-{label}")
        headers = builders.signed_headers(r.body, delivery_id=r.delivery_id, timestamp=0)
        headers[TS] = value
        # Signed over the absurd value itself: the value alone must condemn it.
        headers[SIG] = builders.sign(
            SECRET, delivery_id=r.delivery_id, timestamp=value, body=r.body
        )
        add(_rejected(f"timestamp as {label}", t, builders.http_api_event(headers, r.body), BAD_TS))
    r = _request("ts-twelve")
    headers = dict(r.headers)
    headers[TS] = "999999999999"
    add(
        _rejected(
            "timestamp of twelve digits, far future",
            t,
            builders.http_api_event(headers, r.body),
            STALE,
        )
    )
    r = _request("ts-empty")
    add(_rejected("empty timestamp", t, _event(r, {TS: ""}), MISSING))
    r = _request("ts-zero")
    zero = builders.signed_headers(r.body, delivery_id=r.delivery_id, timestamp=0)
    add(
        _rejected(
            "timestamp 0 (1970), validly signed", t, builders.http_api_event(zero, r.body), STALE
        )
    )

    # --- Body encodings -------------------------------------------------------------------
    e = "body encoding"
    did = _unique_id("non-utf8")
    body = builders.delivery_body(did, note="caf\u00e9").replace("é".encode(), b"\xe9")
    add(
        _invalid(
            "Latin-1 byte in the body (not UTF-8)",
            e,
            _signed_raw("non-utf8", body, delivery_id=did),
            NOT_JSON,
        )
    )
    did = _unique_id("bom")
    body = b"\xef\xbb\xbf" + builders.delivery_body(did)
    add(
        _invalid(
            "UTF-8 BOM before the JSON", e, _signed_raw("bom", body, delivery_id=did), NOT_JSON
        )
    )
    did = _unique_id("utf16")
    body = builders.delivery_body(did).decode().encode("utf-16")
    add(_invalid("UTF-16 body", e, _signed_raw("utf16", body, delivery_id=did), NOT_JSON))
    did = _unique_id("bom-text")
    body = "\ufeff".encode() + builders.delivery_body(did)
    headers = builders.signed_headers(body, delivery_id=did, timestamp=NOW)
    add(
        _invalid(
            "UTF-8 BOM before the JSON, text transport",
            e,
            builders.http_api_event(headers, body),
            NOT_JSON,
        )
    )
    did = _unique_id("overlong")
    body = builders.delivery_body(did, note="/")
    body = body.replace(b'"/"', b'"\xc0\xaf"')
    add(
        _invalid(
            "overlong UTF-8 encoding of '/'",
            e,
            _signed_raw("overlong", body, delivery_id=did),
            NOT_JSON,
        )
    )
    did = _unique_id("cesu")
    body = builders.delivery_body(did, note="x").replace(b'"x"', b'"\xed\xa0\x80"')
    add(
        _invalid(
            "UTF-8-encoded surrogate (CESU-8 bytes)",
            e,
            _signed_raw("cesu", body, delivery_id=did),
            NOT_JSON,
        )
    )
    r = _request("surrogate-body")
    ev = _event(r)
    ev["body"] = ev["body"][:-1] + ',"x":"\ud800"}'
    add(_invalid("text body with a lone surrogate (no exact bytes)", e, ev, MALFORMED))
    r = _request("bad-b64")
    ev = _event(r, b64=True)
    ev["body"] = ev["body"][:-2] + "*="
    add(_invalid("isBase64Encoded body that is not base64", e, ev, MALFORMED))
    r = _request("b64-string-flag")
    ev = _event(r, b64=True)
    ev["isBase64Encoded"] = "true"
    add(_rejected("isBase64Encoded as the string 'true' (body taken as text)", e, ev, NO_MATCH))
    r = _request("b64-non-ascii")
    ev = _event(r, b64=True)
    ev["body"] = "\u00e9" + ev["body"]
    add(_invalid("base64 body with a non-ASCII character", e, ev, MALFORMED))
    r = _request("b64-newlines")
    ev = _event(r, b64=True)
    ev["body"] = ev["body"][:8] + "\n" + ev["body"][8:]
    add(_invalid("base64 body with a newline", e, ev, MALFORMED))

    # --- JSON shapes and sizes ------------------------------------------------------------
    j = "json"
    did = _unique_id("deep")
    body = builders.delivery_body(did)[:-1] + b',"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    add(
        _invalid(
            "array nested 100,000 deep",
            j,
            _signed_raw("deep", body, delivery_id=did),
            "body_too_deep",
        )
    )
    did = _unique_id("nested-ok")
    body = builders.delivery_body(did)[:-1] + b',"x":' + b'{"a":' * 50 + b"1" + b"}" * 50 + b"}"
    add(
        _accepted(
            "object nested 50 deep in an unknown field",
            j,
            _signed_raw("nested-ok", body, delivery_id=did),
            body,
        )
    )
    did = _unique_id("huge-int")
    body = builders.delivery_body(did)[:-1] + b',"n":1' + b"0" * 5000 + b"}"
    add(
        _accepted(
            "5,000-digit integer in an unknown field",
            j,
            _signed_raw("huge-int", body, delivery_id=did),
            body,
        )
    )
    did = _unique_id("nan")
    body = builders.delivery_body(did)[:-1] + b',"x":NaN}'
    add(_accepted("NaN in an unknown field", j, _signed_raw("nan", body, delivery_id=did), body))
    did = _unique_id("dup-key")
    body = builders.delivery_body(did)[:-1] + b',"delivery_id":"' + did.encode() + b'"}'
    add(
        _invalid(
            "delivery_id key twice",
            j,
            _signed_raw("dup-key", body, delivery_id=did),
            "body_duplicate_field",
        )
    )
    did = _unique_id("dup-nested")
    body = builders.delivery_body(did)[:-1] + b',"x":{"a":1,"a":2}}'
    add(
        _accepted(
            "duplicate key in a nested object",
            j,
            _signed_raw("dup-nested", body, delivery_id=did),
            body,
        )
    )
    add(_invalid("empty body, signed", j, _signed_raw("empty", b""), NOT_JSON))
    add(_invalid("JSON array body", j, _signed_raw("array", b"[]"), "body_not_object"))
    add(_invalid("JSON null body", j, _signed_raw("null", b"null"), "body_not_object"))
    did, body = _body_with_padding("at-limit", LIMIT)
    add(
        _accepted(
            "body of exactly 256 KiB", j, _signed_raw("at-limit", body, delivery_id=did), body
        )
    )
    did, body = _body_with_padding("under-limit", LIMIT - 1)
    add(
        _accepted(
            "body of 256 KiB - 1 byte", j, _signed_raw("under-limit", body, delivery_id=did), body
        )
    )
    did, body = _body_with_padding("over-limit", LIMIT + 1)
    add(
        HostileCase(
            "body of 256 KiB + 1 byte, validly signed",
            j,
            _signed_raw("over-limit", body, delivery_id=did),
            413,
            "too_large",
            "body_too_large",
        )
    )
    did = _unique_id("wide")
    base = builders.delivery_body(did)
    unknown_fields = b"".join(b',"f%05d":0' % i for i in range(23_000))
    body = base[:-1] + unknown_fields + b"}"
    assert LIMIT - 32 * 1024 < len(body) < LIMIT
    add(
        _accepted(
            "object with 23,000 unknown fields, just under the limit",
            j,
            _signed_raw("wide", body, delivery_id=did),
            body,
        )
    )
    did, body = _body_with_padding("text-over-limit", LIMIT + 1)
    headers = builders.signed_headers(body, delivery_id=did, timestamp=NOW)
    add(
        HostileCase(
            "text body of 256 KiB + 1 byte, validly signed",
            j,
            builders.http_api_event(headers, body),
            413,
            "too_large",
            "body_too_large",
        )
    )
    did, body = _body_with_padding("text-at-limit", LIMIT)
    headers = builders.signed_headers(body, delivery_id=did, timestamp=NOW)
    add(_accepted("text body of exactly 256 KiB", j, builders.http_api_event(headers, body), body))
    did = _unique_id("multibyte")
    base = builders.delivery_body(did, padding="")
    body = builders.delivery_body(did, padding="é" * ((LIMIT - len(base)) // 2 + 1))
    headers = builders.signed_headers(body, delivery_id=did, timestamp=NOW)
    add(
        HostileCase(
            "text of fewer characters than the limit but more bytes",
            j,
            builders.http_api_event(headers, body),
            413,
            "too_large",
            "body_too_large",
        )
    )
    add(
        HostileCase(
            "unsigned base64 body far over the limit",
            j,
            builders.http_api_event({}, b"\x00" * (LIMIT * 2), base64_encoded=True),
            413,
            "too_large",
            "body_too_large",
        )
    )

    # --- Delivery ids ---------------------------------------------------------------------
    d = "delivery id"
    upper = _unique_id("upper").upper()
    r = _request("upper", delivery_id=upper)
    add(_invalid("upper-case id in header and body", d, _event(r), "delivery_id_not_canonical"))
    lower = _unique_id("upper-header")
    body = builders.delivery_body(lower)
    add(
        _invalid(
            "upper-case header, lower-case body",
            d,
            builders.http_api_event(_signed_headers_for("x", body, lower.upper()), body),
            "delivery_id_mismatch",
        )
    )
    first = _request("case-replay")
    again = _request("case-replay-upper", delivery_id=first.delivery_id.upper(), timestamp=NOW + 5)
    add(
        HostileCase(
            "upper-case replay of an accepted id",
            d,
            _event(again),
            400,
            "invalid",
            "delivery_id_not_canonical",
            WORK,
            first.body,
            builders.PACKAGE_ID,
            builders.MCP_URL,
            before=(_event(first),),
        )
    )
    plain = _unique_id("no-hyphens").replace("-", "")
    add(
        _invalid(
            "id without hyphens",
            d,
            _event(_request("nh", delivery_id=plain)),
            "delivery_id_not_canonical",
        )
    )
    braced = "{" + _unique_id("braces") + "}"
    add(
        _invalid(
            "id in braces",
            d,
            _event(_request("br", delivery_id=braced)),
            "delivery_id_not_canonical",
        )
    )

    mixed = _unique_id("mixed-case")
    mixed = "".join(ch.upper() if i % 2 else ch for i, ch in enumerate(mixed))
    assert mixed not in (mixed.lower(), mixed.upper())
    add(
        _invalid(
            "mixed-case id in header and body",
            d,
            _event(_request("mx", delivery_id=mixed)),
            "delivery_id_not_canonical",
        )
    )
    # --- Wrong types ----------------------------------------------------------------------
    w = "wrong types"
    for label, fields, reason in (
        ("delivery_id as a number", {"delivery_id": 12345}, "delivery_id_not_canonical"),
        ("event as an array", {"event": ["package.received"]}, "event_invalid"),
        ("event as null", {"event": None}, "event_invalid"),
        ("package_id as null", {"package_id": None}, "package_id_missing"),
        ("package_id empty", {"package_id": ""}, "package_id_missing"),
        ("package_id with a right-to-left override", {"package_id": "pkg_\u202e1gpj"}, BAD_ID),
        ("package_id with a zero-width space", {"package_id": "pkg_\u200b1"}, BAD_ID),
        ("package_id with a line separator", {"package_id": "pkg_1\u2028Archived"}, BAD_ID),
        ("mcp_url as a number", {"mcp_url": 443}, "mcp_url_missing"),
        ("mcp_url as an object", {"mcp_url": {"host": "x"}}, "mcp_url_missing"),
    ):
        did, body = _json_body(label, **fields)
        add(_invalid(label, w, _signed_raw(label, body, delivery_id=did), reason))
    add(_invalid("Lambda event is a list", w, [], MALFORMED))
    add(_invalid("Lambda event is null", w, None, MALFORMED))
    r = _request("body-number")
    ev = _event(r)
    ev["body"] = 12345
    add(_invalid("body is a number", w, ev, MALFORMED))
    r = _request("headers-list")
    ev = _event(r)
    ev["headers"] = list(ev["headers"].items())
    add(_rejected("headers as a list of pairs", w, ev, MISSING))
    r = _request("ts-int")
    ev = _event(r)
    ev["headers"]["x-relaylink-timestamp"] = NOW
    add(_rejected("timestamp header as a JSON number", w, ev, MISSING))

    # --- mcp_url: stored as given, refused by the worker's host policy ------------------
    m = "mcp_url"
    for label, url in (
        ("with userinfo", "https://user:pw@mcp.relaylink.example/mcp"),
        ("with an @ hiding the real host", "https://mcp.relaylink.example@evil.example/mcp"),
        ("as an IPv4 literal", "https://192.0.2.7/mcp"),
        ("as an IPv6 literal", "https://[2001:db8::7]/mcp"),
        ("as a decimal IPv4", "https://3221225991/mcp"),
        ("over plain http", "http://mcp.relaylink.example/mcp"),
        ("on a host outside the allowlist", "https://mcp.evil.example/mcp"),
        ("on a look-alike suffix", "https://mcp.relaylink.example.evil.example/mcp"),
        ("on the bare allowlisted domain", "https://relaylink.example/mcp"),
        ("with a file scheme", "file:///etc/passwd"),
        ("as loopback", "https://127.0.0.1/mcp"),
        ("as localhost", "https://localhost/mcp"),
        ("as an IPv4-mapped IPv6 literal", "https://[::ffff:192.0.2.7]/mcp"),
        ("with a backslash before the host", "https://evil.example\\@mcp.relaylink.example/"),
    ):
        r = _request("mcp " + label, mcp_url=url)
        add(_accepted(f"mcp_url {label}", m, _event(r), r.body, mcp_url=url, mcp_allowed=False))
    r = _request("mcp allowed")
    add(
        _accepted(
            "mcp_url on an allowlisted host (control)", m, _event(r), r.body, mcp_allowed=True
        )
    )

    # --- Content-Type and event shapes ----------------------------------------------------
    c = "shape"
    r = _request("no-ct")
    add(_accepted("no Content-Type header", c, _event(r, {"Content-Type": None}), r.body))
    r = _request("text-ct")
    add(_accepted("Content-Type text/plain", c, _event(r, {"Content-Type": "text/plain"}), r.body))
    r = _request("rest")
    add(_accepted("REST API (1.0) event", c, _rest(r), r.body))
    r = _request("rest-b64")
    add(_accepted("REST API (1.0) event, base64 body", c, _rest(r, b64=True), r.body))
    r = _request("rest-upper")
    upper_headers = {k.upper(): v for k, v in r.headers.items()}
    add(
        _accepted(
            "REST API event with upper-case header names",
            c,
            builders.rest_api_event(upper_headers, r.body),
            r.body,
        )
    )
    r = _request("ping", event="ping")
    add(
        HostileCase(
            "signed ping", c, _event(r), 200, "ignored", "event_not_processed", INBOX, r.body
        )
    )
    r = builders.signed_request(timestamp=NOW, secrets=builders.OTHER_SECRET, event="ping")
    add(_rejected("ping signed with another secret", c, _event(r), NO_MATCH))
    return cases


CORPUS: Final = _cases()
