"""Standard Webhooks signatures on our own POSTs, so their receiver can tell them from a
forgery: the agent's alert (``alert_signing_secret_arn``) and the notify workflow's
notification (``notify_secret_arn``).

Every signed POST carries the three headers of the Standard Webhooks specification
(https://www.standardwebhooks.com/, "Signature scheme"), which any of its libraries
verifies:

* ``webhook-id``: the POST's idempotency key (``<delivery_id>:alert``,
  ``<delivery_id>:notify``), the same on every attempt, so a receiver can also drop a
  repeat by it;
* ``webhook-timestamp``: the attempt's time in whole seconds since the epoch (a
  receiver refuses one too far from its own clock, which bounds a replay);
* ``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256 of
  ``<webhook-id>.<webhook-timestamp>.<body>`` keyed with the secret's bytes.

The HMAC is the one the receiver verifies RelayLink's deliveries with
(:func:`functions.core.signature.sign`). The secret's value is ``whsec_`` and the base64
of 24 to 64 random bytes (what the Standard Webhooks libraries generate);
docs/workflows.md shows a receiver verifying it.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Final

from functions.core.signature import SECRET_PREFIX, SigningSecret, sign

if TYPE_CHECKING:
    from functions.core.clock import Clock

MIN_KEY_BYTES: Final = 24
MAX_KEY_BYTES: Final = 64
ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"


class WebhookSigner:
    """Signs one POST body at a time with one secret."""

    def __init__(self, *, secret: str, clock: Clock) -> None:
        """Args:
        secret: ``whsec_`` and the base64 of the key (surrounding whitespace ignored).
        clock: the time of each signature.

        Raises:
            ValueError: the secret has another form (the message never quotes it).
        """
        self._secret = SigningSecret(parse_secret(secret))
        self._clock = clock

    def headers(self, message_id: str, body: bytes) -> dict[str, str]:
        """The three Standard Webhooks headers for ``body`` sent as ``message_id``."""
        timestamp = str(self._clock.now())
        return {
            ID_HEADER: message_id,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(
                self._secret, delivery_id=message_id, timestamp=timestamp, body=body
            ),
        }


def parse_secret(secret: str) -> bytes:
    """The key bytes of a ``whsec_`` secret.

    Raises:
        ValueError: not ``whsec_`` and the base64 of 24 to 64 bytes.
    """
    text = secret.strip()
    if not text.startswith(SECRET_PREFIX):
        raise ValueError(f"the signing secret must start with {SECRET_PREFIX}")
    try:
        key = base64.b64decode(text.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the signing secret is not base64 after whsec_") from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise ValueError(
            f"the signing secret's key must be {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes"
        )
    return key
