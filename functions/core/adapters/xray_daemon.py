"""Spans to X-Ray, deployed: each span one segment, sent to the X-Ray daemon over UDP.

With active tracing on (``-c tracing=true``) Lambda runs the X-Ray daemon beside each
function and names it in ``AWS_XRAY_DAEMON_ADDRESS``; the daemon batches what it is
sent into ``PutTraceSegments`` (the role's permission comes with active tracing). The
segments carry the delivery's trace id in X-Ray's form (``1-<8 hex>-<24 hex>``: a trace
id born here starts with the epoch second, as X-Ray wants) and each span's parent as
``parent_id``, so X-Ray shows the delivery across the stream and the queue as one
trace, which Lambda's own per-invocation segments cannot (no trace header crosses a
DynamoDB stream).

Why not Powertools' tracer: it needs aws-xray-sdk in every asset (the receiver's cold
path too), and its segments follow Lambda's invocation trace, not the delivery's; the
wire format below is the daemon's documented one
(https://docs.aws.amazon.com/xray/latest/devguide/xray-api-sendingdata.html). Standard
library only; a send that fails is dropped (UDP: the daemon never answers anyway).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping
from typing import Any, Final

from functions.core.tracing import SpanRecord

DAEMON_HEADER: Final = b'{"format": "json", "version": 1}\n'
DEFAULT_DAEMON: Final = ("127.0.0.1", 2000)
SEGMENT_NAME: Final = "relaylink-receiver"
# An annotation key is letters, digits and underscores (X-Ray indexes it for filters).
_ANNOTATION_KEY: Final = re.compile(r"[^A-Za-z0-9_]")


def daemon_address(value: str | None) -> tuple[str, int]:
    """The daemon's UDP address from ``AWS_XRAY_DAEMON_ADDRESS`` (``host:port``, or
    ``tcp:host:port udp:host:port``)."""
    for part in (value or "").split():
        if part.startswith("tcp:"):
            continue  # segments go over UDP
        host, _, port = part.removeprefix("udp:").rpartition(":")
        if host and port.isdigit():
            return host, int(port)
    return DEFAULT_DAEMON


def xray_trace_id(trace_id: str) -> str:
    return f"1-{trace_id[:8]}-{trace_id[8:]}"


def segment(span: SpanRecord) -> dict[str, Any]:
    """One finished span as an X-Ray segment document."""
    document: dict[str, Any] = {
        "name": SEGMENT_NAME,
        "id": span.context.span_id,
        "trace_id": xray_trace_id(span.context.trace_id),
        "start_time": span.start_ns / 1e9,
        "end_time": (span.end_ns or span.start_ns) / 1e9,
        "annotations": {"span": span.name, **_annotations(span.attributes)},
    }
    if span.parent_span_id:
        document["parent_id"] = span.parent_span_id
    if span.error:
        document["fault"] = True
    return document


def _annotations(attributes: Mapping[str, object]) -> dict[str, object]:
    return {
        _ANNOTATION_KEY.sub("_", key): value
        for key, value in attributes.items()
        if isinstance(value, str | int | float | bool)
    }


class XRayDaemonExporter:
    """Sends each sampled, finished span to the daemon as one UDP datagram."""

    def __init__(self, address: tuple[str, int] = DEFAULT_DAEMON) -> None:
        self._address = address
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def export(self, span: SpanRecord) -> None:
        if span.end_ns is None or not span.context.sampled:
            return
        body = json.dumps(segment(span), separators=(",", ":")).encode()
        self._socket.sendto(DAEMON_HEADER + body, self._address)

    def flush(self) -> None:
        """Nothing is buffered: the daemon batches."""

    def close(self) -> None:
        """Release the socket (a container keeps it for its life)."""
        self._socket.close()
