"""Parsing a verified body against the contract (docs/contract.md, Body)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.core.delivery import (
    MAX_MCP_URL_LENGTH,
    MAX_PACKAGE_ID_LENGTH,
    Delivery,
    InvalidDelivery,
    InvalidReason,
    is_canonical_delivery_id,
    parse_delivery,
)
from functions.core.models import WorkItem
from local.testkit import builders

DELIVERY_ID = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"


def _parse(
    body: bytes, *, header_id: str = DELIVERY_ID, event: str = "package.received"
) -> Delivery:
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
        (b"[" * 100_000, InvalidReason.TOO_DEEP),  # deep nesting is refused, not a crash
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


def test_delivery_refuses_a_repeated_unknown_top_level_field() -> None:
    body = builders.delivery_body(DELIVERY_ID)[:-1] + b',"note":1,"note":2}'
    assert _reason(body) is InvalidReason.DUPLICATE_FIELD


def test_delivery_tolerates_repeated_keys_inside_unknown_objects() -> None:
    body = builders.delivery_body(DELIVERY_ID)[:-1] + b',"x":{"a":1,"a":2,"y":{"b":[],"b":{}}}}'
    assert _parse(body) == _parse(builders.delivery_body(DELIVERY_ID))


def test_delivery_tolerates_integers_of_any_length_in_unknown_fields() -> None:
    # Python's int() refuses more than 4,300 digits; the body is valid JSON all the same.
    body = builders.delivery_body(DELIVERY_ID)[:-1] + b',"n":-1' + b"0" * 10_000 + b"}"
    assert _parse(body) == _parse(builders.delivery_body(DELIVERY_ID))


def test_delivery_huge_integer_in_a_required_field_is_not_a_string() -> None:
    data = json.loads(builders.delivery_body(DELIVERY_ID))
    data["package_id"] = "<n>"
    body = json.dumps(data).replace('"<n>"', "9" * 5000).encode()
    assert _reason(body) is InvalidReason.MISSING_PACKAGE_ID


def test_delivery_tolerates_nesting_of_five_hundred_levels() -> None:
    body = builders.delivery_body(DELIVERY_ID)[:-1] + b',"x":' + b"[" * 500 + b"]" * 500 + b"}"
    assert _parse(body) == _parse(builders.delivery_body(DELIVERY_ID))


def test_delivery_nesting_beyond_the_parser_is_too_deep_not_malformed() -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    body = builders.delivery_body(DELIVERY_ID)[:-1] + b',"x":' + nested + b"}"
    assert _reason(body) is InvalidReason.TOO_DEEP


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


def test_delivery_id_with_a_lone_surrogate_is_not_canonical() -> None:
    spelled = DELIVERY_ID[:-1] + "\\ud800"
    body = builders.delivery_body(DELIVERY_ID).replace(DELIVERY_ID.encode(), spelled.encode())
    assert _reason(body, header_id=DELIVERY_ID[:-1] + "\ud800") is InvalidReason.BAD_DELIVERY_ID


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


@pytest.mark.parametrize("event", ["", " ping", "a" * 129, "ping\n", "ping\ud800", 5, None])
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


def _package_body(**fields: object) -> bytes:
    data = json.loads(builders.delivery_body(DELIVERY_ID))
    data.update(fields)
    return json.dumps(data).encode()  # ASCII: a lone surrogate travels as "\ud800"


@pytest.mark.parametrize(
    "package_id",
    [
        "pkg\ud800",
        "\udfff",
        "pkg\x00",
        "pkg\n1",
        "pkg\x7f",
        "pkg\x85",  # C1 control (NEL)
        "p" * (MAX_PACKAGE_ID_LENGTH + 1),
    ],
)
def test_delivery_package_id_must_be_a_short_scalar_string_without_controls(
    package_id: str,
) -> None:
    assert _reason(_package_body(package_id=package_id)) is InvalidReason.BAD_PACKAGE_ID


@pytest.mark.parametrize(
    "mcp_url",
    [
        "https://mcp.relaylink.example/\ud800",
        "https://mcp.relaylink.example/\t",
        "https://mcp.relaylink.example/" + "m" * MAX_MCP_URL_LENGTH,
    ],
)
def test_delivery_mcp_url_must_be_a_short_scalar_string_without_controls(mcp_url: str) -> None:
    assert _reason(_package_body(mcp_url=mcp_url)) is InvalidReason.BAD_MCP_URL


def test_delivery_accepts_fetch_fields_at_their_length_limits() -> None:
    package_id = "p" * MAX_PACKAGE_ID_LENGTH
    prefix = "https://mcp.relaylink.example/"
    mcp_url = prefix + "m" * (MAX_MCP_URL_LENGTH - len(prefix))
    delivery = _parse(_package_body(package_id=package_id, mcp_url=mcp_url))
    assert (delivery.package_id, delivery.mcp_url) == (package_id, mcp_url)


def test_delivery_accepts_any_unicode_scalars_in_package_id() -> None:
    package_id = "pkg-ünï-\u4e2d-\U0001f4e6-\ufffd"
    assert _parse(_package_body(package_id=package_id)).package_id == package_id


# --- Unknown fields never change the verdict (property) -------------------------------

# JSON text is built directly so that it can hold what Python values cannot: repeated
# keys, integers beyond int()'s 4,300 digits, lone surrogates spelled as escapes.
_any_text = st.text(st.characters(exclude_categories=()), max_size=8)
_scalar_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
_json_scalars = st.one_of(
    st.sampled_from(["null", "true", "false", "NaN", "-Infinity", "-0", "1e400", "1E-400"]),
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
    st.tuples(st.sampled_from(["", "-"]), st.integers(4_301, 6_000)).map(
        lambda sign_digits: sign_digits[0] + "7" * sign_digits[1]
    ),
    st.integers(4_301, 6_000).map(lambda digits: "0." + "3" * digits + "e-5"),
    _any_text.map(json.dumps),  # ASCII escapes, lone surrogates included
    _scalar_text.map(lambda text: json.dumps(text, ensure_ascii=False)),
)
# A small set of key names, so that nested objects often repeat a key, the fields the
# receiver reads included.
_json_keys = st.sampled_from(["a", "", "delivery_id", "package_id", "event"]) | _any_text
_space = st.sampled_from(["", " ", "\n\t", "\r\n  "])


def _json_containers(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    arrays = st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
    objects = st.lists(st.tuples(_json_keys.map(json.dumps), _space, inner), max_size=4).map(
        lambda pairs: "{" + ",".join(f"{key}:{space}{value}" for key, space, value in pairs) + "}"
    )
    return arrays | objects


_json_texts = st.recursive(_json_scalars, _json_containers, max_leaves=12)
_READ_FIELDS = {"delivery_id", "event", "package_id", "mcp_url"}
# Verdicts of every kind, so that the property covers refusals as well as acceptance.
_PACKAGE: dict[str, object] = json.loads(builders.delivery_body(DELIVERY_ID))
_BASES: list[dict[str, object]] = [
    _PACKAGE,
    {"delivery_id": DELIVERY_ID, "event": "ping"},
    _PACKAGE | {"package_id": "pkg\ud800"},
    _PACKAGE | {"package_id": "pkg\n"},
    _PACKAGE | {"mcp_url": "m" * (MAX_MCP_URL_LENGTH + 1)},
    {key: value for key, value in _PACKAGE.items() if key != "package_id"},
    _PACKAGE | {"delivery_id": builders.new_delivery_id()},
]


def _verdict(body: bytes, event: object) -> Delivery | InvalidReason:
    try:
        return parse_delivery(body, header_delivery_id=DELIVERY_ID, header_event=str(event))
    except InvalidDelivery as exc:
        return exc.reason


@settings(derandomize=True, database=None, max_examples=200, deadline=None)
@given(
    base=st.sampled_from(_BASES),
    extra=st.dictionaries(
        _any_text.filter(lambda key: key not in _READ_FIELDS), _json_texts, max_size=4
    ),
    order=st.randoms(use_true_random=False),
    space=_space,
)
def test_property_unknown_fields_never_change_the_verdict(
    base: dict[str, object], extra: dict[str, str], order: random.Random, space: str
) -> None:
    fields = [(json.dumps(key), json.dumps(value)) for key, value in base.items()]
    expected = _verdict(
        ("{" + ",".join(f"{k}:{v}" for k, v in fields) + "}").encode(), base["event"]
    )
    # Unknown keys are distinct from each other and from the base's: a repeat at the
    # top level is refused on purpose.
    fields += [(json.dumps(key), value) for key, value in extra.items() if key not in base]
    order.shuffle(fields)
    body = "{" + space + f",{space}".join(f"{k}:{space}{v}" for k, v in fields) + space + "}"
    assert _verdict(body.encode(), base["event"]) == expected
