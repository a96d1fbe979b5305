"""RelayLink's request as it arrives (contract section 2): header names and body limit.

Header names are lower-cased. Standard library only.
"""

from __future__ import annotations

from typing import Final

HEADER_DELIVERY: Final = "x-relaylink-delivery"
HEADER_EVENT: Final = "x-relaylink-event"
HEADER_TIMESTAMP: Final = "x-relaylink-timestamp"
HEADER_SIGNATURE: Final = "x-relaylink-signature"
HEADER_ATTEMPT: Final = "x-relaylink-attempt"
# W3C trace context: when RelayLink sends one, the delivery's trace continues it.
HEADER_TRACEPARENT: Final = "traceparent"
MAX_BODY_BYTES: Final = 256 * 1024  # RelayLink never sends more (contract section 3)
