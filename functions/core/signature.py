"""Standard Webhooks v1 signature verification with RelayLink's header names.

Pure: no I/O, no clock, no storage. The caller passes the header values, the exact
body bytes, the known secrets and the current time (docs/contract.md, Signature).

Verification runs in two steps so that a request whose headers alone condemn it
(missing, malformed or stale) is refused before any secret is even looked up:

1. :func:`read_headers` checks presence, shape, the timestamp tolerance, and that
   at least one ``v1`` entry exists;
2. :func:`verify` computes one HMAC per known secret and compares it, in constant
   time, with every ``v1`` entry of the signature header.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 (a prefix, not a secret)
SIGNATURE_VERSION: Final = "v1"
_V1_PREFIX: Final = SIGNATURE_VERSION + ","
TOLERANCE_SECONDS: Final = 300
# Unix seconds have 10 digits until the year 2286; 12 leaves room and bounds int().
_TIMESTAMP = re.compile(r"(?:0|[1-9][0-9]{0,11})")


class RejectReason(StrEnum):
    """Why a request failed verification (the ``reason`` of a 401; reveals no secret)."""

    MISSING_HEADERS = "missing_signature_headers"
    BAD_TIMESTAMP = "malformed_timestamp"
    STALE_TIMESTAMP = "timestamp_out_of_tolerance"
    NO_MATCH = "no_matching_signature"


class SignatureRejected(Exception):
    """The request is not provably from RelayLink; ``reason`` says which check failed."""

    def __init__(self, reason: RejectReason) -> None:
        self.reason = reason
        super().__init__(reason.value)


@dataclass(frozen=True, slots=True)
class SigningSecret:
    """One endpoint secret, decoded. ``repr`` never shows the key."""

    key: bytes = field(repr=False)
    # The HMAC keyed once: each request copies it instead of keying a new one (and
    # looking up SHA-256 again), a fifth of a verification's cost.
    _keyed: hmac.HMAC = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_keyed", hmac.new(self.key, digestmod=hashlib.sha256))

    @classmethod
    def parse(cls, text: str) -> SigningSecret:
        """Decode ``whsec_<base64>``.

        Raises:
            ValueError: the text is not a ``whsec_`` secret; the message never contains it.
        """
        if not text.startswith(SECRET_PREFIX):
            raise ValueError("signing secret lacks the whsec_ prefix")
        try:
            key = base64.b64decode(text[len(SECRET_PREFIX) :], validate=True)
        except binascii.Error:
            raise ValueError("signing secret is not base64 after its prefix") from None
        if not key:
            raise ValueError("signing secret is empty")
        return cls(key)


@dataclass(frozen=True, slots=True)
class SignedHeaders:
    """The three signed-request headers, present and well-formed."""

    delivery_id: str
    timestamp: str  # the header text exactly as received: it is part of the signed bytes
    signature: str


def read_headers(
    *,
    delivery_id: str | None,
    timestamp: str | None,
    signature: str | None,
    now: int,
    tolerance: int = TOLERANCE_SECONDS,
) -> SignedHeaders:
    """Check the headers that need no secret: presence, timestamp shape and age.

    Raises:
        SignatureRejected: a header is missing, the timestamp is not canonical
            integer seconds or is more than ``tolerance`` seconds from ``now``, or
            the signature header has no ``v1,`` entry.
    """
    if not delivery_id or not timestamp or not signature:
        raise SignatureRejected(RejectReason.MISSING_HEADERS)
    # Canonical digits only: the sender signs str(int(t)), so any other spelling
    # (sign, spaces, leading zeros) could never verify and is refused up front.
    if _TIMESTAMP.fullmatch(timestamp) is None:
        raise SignatureRejected(RejectReason.BAD_TIMESTAMP)
    if abs(now - int(timestamp)) > tolerance:
        raise SignatureRejected(RejectReason.STALE_TIMESTAMP)
    # Without a single "v1," entry nothing can match: no need to fetch a secret to say so.
    if not signature.startswith(_V1_PREFIX) and " " + _V1_PREFIX not in signature:
        raise SignatureRejected(RejectReason.NO_MATCH)
    return SignedHeaders(delivery_id, timestamp, signature)


def sign(secret: SigningSecret, *, delivery_id: str, timestamp: str, body: bytes) -> str:
    """The ``v1,<base64>`` signature of one attempt (the sender's side of the scheme)."""
    mac = _mac(secret, delivery_id, timestamp, body)
    return f"{SIGNATURE_VERSION},{base64.b64encode(mac).decode()}"


def verify(signed: SignedHeaders, body: bytes, secrets: Sequence[SigningSecret]) -> None:
    """Accept when any ``v1`` entry matches any secret; other versions are skipped.

    Raises:
        SignatureRejected: no entry matches (also when ``secrets`` is empty).
    """
    expected = []
    for secret in secrets:  # a loop, not a comprehension: no function object per request
        expected.append(base64.b64encode(_mac(secret, signed.delivery_id, signed.timestamp, body)))
    matched = False
    for entry in signed.signature.split(" "):
        version, comma, value = entry.partition(",")
        if not comma or version != SIGNATURE_VERSION:
            continue
        # Compare the base64 text as bytes: malformed base64 simply fails to match, and
        # non-ASCII input cannot make compare_digest raise.
        candidate = value.encode("utf-8", "replace")
        for digest in expected:
            # No early exit: the work done does not depend on which entry matched.
            matched |= hmac.compare_digest(digest, candidate)
    if not matched:
        raise SignatureRejected(RejectReason.NO_MATCH)


def _mac(secret: SigningSecret, delivery_id: str, timestamp: str, body: bytes) -> bytes:
    # surrogatepass: a header holding a lone surrogate must fail to match, not raise (the
    # encoding stays one-to-one, so no other header value signs the same bytes).
    message = b"".join(
        (delivery_id.encode("utf-8", "surrogatepass"), b".", timestamp.encode(), b".", body)
    )
    mac = secret._keyed.copy()
    mac.update(message)
    return mac.digest()
