"""W3C trace context: the ``traceparent`` value one delivery's spans share.

A delivery's trace is born at its receipt (continuing RelayLink's own when its request
carries a valid ``traceparent``) and travels with it as this header's text: on the inbox
item and the outbox record, as a work-queue message attribute, in an MCP request's
``_meta`` and on an approval record (https://www.w3.org/TR/trace-context/#traceparent-header).

Standard library only: the receiver parses it on its cold path.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from typing import Final

# version "00" fields; a later version may append fields after a dash, which we ignore
# as the specification asks of a version-00 parser (section 3.2.4).
_TRACEPARENT: Final = re.compile(
    r"^(?P<version>[0-9a-f]{2})-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})-(?P<flags>[0-9a-f]{2})"
    r"(?P<rest>-.*)?$"
)
_INVALID_TRACE: Final = "0" * 32
_INVALID_SPAN: Final = "0" * 16
_SAMPLED: Final = 0x01
# The longest traceparent we read: a header is short, anything longer is not one.
MAX_HEADER_CHARS: Final = 256


@dataclass(frozen=True, slots=True)
class SpanContext:
    """One span's place in a trace: the trace it belongs to and its own id."""

    trace_id: str  # 32 lower-case hex digits, not all zero
    span_id: str  # 16 lower-case hex digits, not all zero
    sampled: bool = True

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{_SAMPLED if self.sampled else 0:02x}"

    def child(self) -> SpanContext:
        """A new span in the same trace."""
        return SpanContext(self.trace_id, new_span_id(), self.sampled)


# Ids need to be unique, not secret: Python's generator, as OpenTelemetry's own id
# generator uses it (reseeded in a forked child). os.urandom costs a system call per id,
# several times the receiver's whole span on its hot path.


def new_trace_id() -> str:
    """A random trace id whose first 8 hex digits are the epoch second: X-Ray takes it
    as its own (``1-<8 hex>-<24 hex>``), as OpenTelemetry's X-Ray id generator makes it."""
    return f"{int(time.time()) & 0xFFFFFFFF:08x}{random.getrandbits(96):024x}"


def new_span_id() -> str:
    return f"{random.getrandbits(64) or 1:016x}"  # never all zeros (invalid)


def new_root(*, sampled: bool = True) -> SpanContext:
    """The first span of a new trace (``sampled``: its spans are recorded)."""
    return SpanContext(new_trace_id(), new_span_id(), sampled)


def sample(percent: int) -> bool:
    """A new trace's sampling decision: True for ``percent`` of 100 calls on average.

    Made once, where a trace is born; every later hop reads it from the trace flags
    (``-01`` recorded, ``-00`` not), so a trace is never recorded in part.
    """
    return percent >= 100 or (percent > 0 and random.random() * 100 < percent)  # noqa: S311 (no secret)


def parse_traceparent(value: str | None) -> SpanContext | None:
    """The span context a ``traceparent`` names; None when absent or invalid.

    Invalid is what the specification says to ignore: another shape, version ``ff``,
    an all-zero trace or span id, or a version-00 header with trailing fields.
    """
    if not value or len(value) > MAX_HEADER_CHARS:
        return None
    match = _TRACEPARENT.match(value.strip())
    if match is None:
        return None
    version, trace_id, span_id = match["version"], match["trace"], match["span"]
    if version == "ff" or (version == "00" and match["rest"]):
        return None
    if trace_id == _INVALID_TRACE or span_id == _INVALID_SPAN:
        return None
    return SpanContext(trace_id, span_id, bool(int(match["flags"], 16) & _SAMPLED))
