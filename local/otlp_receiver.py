"""A loopback OTLP/HTTP trace receiver (JSON encoding): what a team's collector would
be to ``--otlp-endpoint``, for the tests and for a look without installing one.

It answers ``POST /v1/traces`` with ``200 {}`` and keeps every span it was sent;
anything else is 404, a body that is not an OTLP JSON request 400 (as a collector
would answer).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Final

from functions.core import otlp_json
from functions.core.adapters.span_export import OTLP_TRACES_PATH
from functions.core.tracing import SpanRecord
from local.loopback_http import LoopbackHTTPServer

# A request bigger than this is refused (the functions send one invocation's spans).
MAX_REQUEST_BYTES: Final = 8 * 1024 * 1024


@dataclass
class ReceivedSpans:
    """What the receiver was sent, and how many requests carried it."""

    spans: list[SpanRecord] = field(default_factory=list)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, spans: list[SpanRecord]) -> None:
        with self._lock:
            self.spans.extend(spans)
            self.requests += 1

    def of_trace(self, trace_id: str) -> list[SpanRecord]:
        with self._lock:
            return [s for s in self.spans if s.context.trace_id == trace_id]


class OtlpReceiver:
    """Serves on 127.0.0.1 in a daemon thread; ``with OtlpReceiver() as r: r.url``."""

    def __init__(self) -> None:
        self.received = ReceivedSpans()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if self.path != OTLP_TRACES_PATH or not 0 < length <= MAX_REQUEST_BYTES:
                    self._answer(404 if self.path != OTLP_TRACES_PATH else 400)
                    return
                try:
                    spans = list(otlp_json.spans_of(json.loads(self.rfile.read(length))))
                except (ValueError, KeyError, TypeError):
                    self._answer(400)
                    return
                received.add(spans)
                self._answer(200)

            def _answer(self, status: int) -> None:
                body = b"{}"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # quiet: a collector's access log is not the stack's

        self._server = LoopbackHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-receiver", daemon=True
        )

    @property
    def url(self) -> str:
        """The endpoint to configure (``/v1/traces`` is appended by the exporter)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
