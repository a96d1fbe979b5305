"""DynamoDB's attribute values in their wire form (``{"S": "a"}``): order, size, copies.

Items stay in the low-level format the client sends and answers, so nothing is
converted on the way in or out; these are the few rules that read a value.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final

# Any-valued, as boto3's stubs type an item's values for the client's callers.
Value = dict[str, Any]
Item = dict[str, Any]

MAX_ITEM_BYTES: Final = 400 * 1024  # DynamoDB's item size limit
SET_TYPES: Final = frozenset({"SS", "NS", "BS"})
_SCALARS: Final = frozenset({"S", "N", "B", "BOOL", "NULL"})
_SCALAR_OF_SET: Final = {"SS": "S", "NS": "N", "BS": "B"}


def kind(value: Value) -> str:
    """The value's type descriptor (``S``, ``N``, ``SS``...)."""
    return next(iter(value))


def number(value: Value) -> Decimal:
    return Decimal(value["N"])


def format_number(n: Decimal) -> str:
    """A number as DynamoDB answers it: no exponent, no trailing zeros."""
    if n == n.to_integral_value():
        return str(int(n))
    return format(n.normalize(), "f")


def comparable(value: Value) -> tuple[str, Any]:
    """``(type, key)`` that orders two values of one scalar type as DynamoDB does
    (numbers by value, strings and binaries by their bytes)."""
    ((t, raw),) = value.items()
    if t == "S":
        return t, raw.encode()
    if t == "N":
        return t, Decimal(raw)
    return t, raw


def equal(a: Value, b: Value) -> bool:  # noqa: PLR0911 (one rule per type)
    """DynamoDB's ``=``: same type, same value (numbers by value, sets unordered)."""
    ta, tb = kind(a), kind(b)
    if ta != tb:
        return False
    if ta == "N":
        return Decimal(a["N"]) == Decimal(b["N"])
    if ta in SET_TYPES:
        if ta == "NS":
            return {Decimal(x) for x in a[ta]} == {Decimal(x) for x in b[tb]}
        return set(a[ta]) == set(b[tb])
    if ta == "L":
        return len(a["L"]) == len(b["L"]) and all(
            equal(x, y) for x, y in zip(a["L"], b["L"], strict=True)
        )
    if ta == "M":
        return a["M"].keys() == b["M"].keys() and all(equal(a["M"][k], b["M"][k]) for k in a["M"])
    return bool(a[ta] == b[tb])


def set_members(value: Value) -> list[Any]:
    return list(value[kind(value)])


def member_type(set_type: str) -> str:
    return _SCALAR_OF_SET[set_type]


def size_of(value: Value) -> int:
    """``size()`` of a value: characters... as DynamoDB counts them (string length,
    bytes of a binary, members of a set, list or map)."""
    t = kind(value)
    raw = value[t]
    if t == "S":
        return len(raw)
    if t == "B":
        return len(raw)
    if t in SET_TYPES or t in ("L", "M"):
        return len(raw)
    raise TypeError(t)


def item_bytes(item: Item) -> int:
    """The item's size as DynamoDB counts it against the 400 KB limit: each name's
    UTF-8 bytes plus its value's (docs: "Item sizes and formats")."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def _value_bytes(value: Value) -> int:  # noqa: PLR0911 (one rule per type)
    t = kind(value)
    raw = value[t]
    if t == "S":
        return len(raw.encode())
    if t == "N":
        return _number_bytes(raw)
    if t == "B":
        return len(raw)
    if t in ("BOOL", "NULL"):
        return 1
    if t == "SS":
        return sum(len(s.encode()) for s in raw)
    if t == "NS":
        return sum(_number_bytes(n) for n in raw)
    if t == "BS":
        return sum(len(b) for b in raw)
    if t == "L":
        return 3 + sum(1 + _value_bytes(v) for v in raw)
    if t == "M":
        return 3 + sum(1 + len(k.encode()) + _value_bytes(v) for k, v in raw.items())
    raise TypeError(t)


def _number_bytes(raw: str) -> int:
    digits = raw.lstrip("-").replace(".", "").lstrip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def copy_value(value: Value) -> Value:
    """A copy the caller may change without changing the stored item."""
    ((t, raw),) = value.items()
    if t in _SCALARS:
        return {t: raw}
    if t in SET_TYPES:
        return {t: list(raw)}
    if t == "L":
        return {t: [copy_value(v) for v in raw]}
    if t == "M":
        return {t: {k: copy_value(v) for k, v in raw.items()}}
    return {t: raw}


def copy_item(item: Item) -> Item:
    return {name: copy_value(value) for name, value in item.items()}


def answer_copy(item: Item) -> Item:
    """An item as an answer carries it: a new map whose sets, lists and maps are copies
    and whose scalar values are shared with the table (the table never changes a value
    in place; a caller must not either)."""
    return {
        # (a value has one type: "S" in it says it is a string, without iterating it)
        name: value if "S" in value or "N" in value or "BOOL" in value else copy_value(value)
        for name, value in item.items()
    }
