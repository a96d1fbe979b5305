"""API Gateway's proxy event, parsed into the exact request RelayLink sent.

The receiver sits behind an HTTP API (payload format 2.0); the REST API's 1.0 shape
is accepted too, so the function can move behind either (docs/receiver.md).

Both formats carry the body as a string plus ``isBase64Encoded``. The signature
covers the exact bytes (docs/contract.md, Signature), so they are recovered exactly: base64
is decoded when the flag is set, otherwise the string is encoded as UTF-8 (API
Gateway passes a UTF-8 text body through as text).

Repeated headers: an HTTP API joins the values of a repeated header with commas
into one value; a REST API keeps them apart in ``multiValueHeaders``. Both become
the HTTP API's comma-joined form here. RelayLink sends each header once (several
signatures go space-separated into one header), so a repeated signed header yields a
value that cannot verify: the request is rejected rather than one copy being picked.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class BodyTooLarge(Exception):
    """The body exceeds the limit; it was not decoded."""


class MalformedEvent(Exception):
    """The event is not an API Gateway proxy event with a recoverable body."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """The request as sent: header names lower-cased, the body's exact bytes."""

    headers: Mapping[str, str]
    body: bytes


def parse_event(event: object, *, max_body_bytes: int) -> HttpRequest:
    """Turn an API Gateway event (2.0 or 1.0) into an :class:`HttpRequest`.

    The size is checked before anything else is decoded.

    Raises:
        BodyTooLarge: the body is longer than ``max_body_bytes``.
        MalformedEvent: the event or its body cannot be read.
    """
    if not isinstance(event, Mapping):
        raise MalformedEvent
    body = _body(event, max_body_bytes)
    return HttpRequest(_headers(event), body)


def _body(event: Mapping[str, Any], limit: int) -> bytes:
    text = event.get("body")
    if text is None:
        return b""
    if not isinstance(text, str):
        raise MalformedEvent
    if event.get("isBase64Encoded") is True:
        # 4 base64 characters carry 3 bytes: anything longer than this cannot fit.
        if len(text) > 4 * -(-limit // 3):
            raise BodyTooLarge
        try:
            body = base64.b64decode(text, validate=True)
        except ValueError:  # binascii.Error, or a non-ASCII character (plain ValueError)
            raise MalformedEvent from None
    else:
        # Every character is at least one UTF-8 byte: a longer string cannot fit.
        if len(text) > limit:
            raise BodyTooLarge
        try:
            body = text.encode("utf-8")
        except UnicodeEncodeError:
            raise MalformedEvent from None
    if len(body) > limit:
        raise BodyTooLarge
    return body


def _headers(event: Mapping[str, Any]) -> dict[str, str]:
    multi = event.get("multiValueHeaders")
    if isinstance(multi, Mapping) and multi:  # REST API (1.0): every value, in order
        collected: dict[str, list[str]] = {}
        for name, values in multi.items():
            if isinstance(name, str) and isinstance(values, list):
                bucket = collected.setdefault(name.lower(), [])
                bucket.extend(v for v in values if isinstance(v, str))
        return {name: ",".join(values) for name, values in collected.items() if values}
    # HTTP API (2.0), or 1.0 without multiValueHeaders: one value per name, joined
    # only where two names differ in case (the HTTP API has already joined the rest).
    headers: dict[str, str] = {}
    single = event.get("headers")
    if type(single) is dict:
        # What an HTTP API sends: string names (lower-cased already) and values, taken
        # in one pass at C speed (the loop below runs Python per header on every
        # request); a non-string name, a non-string value or two names that differ
        # only in case take the loop.
        try:
            lowered = dict(zip(map(str.lower, single), single.values(), strict=True))
        except TypeError:
            lowered = {}
        if len(lowered) == len(single) and set(map(type, lowered.values())) <= {str}:
            return lowered
    if isinstance(single, Mapping):
        for name, value in single.items():
            if isinstance(name, str) and isinstance(value, str):
                key = name.lower()
                earlier = headers.get(key)
                headers[key] = value if earlier is None else f"{earlier},{value}"
    return headers
