"""Where a function's spans go: the local stack's span file, an OTLP/HTTP endpoint.

Chosen from the environment at a function's cold start (:func:`install_from_env`):
``RELAYLINK_SPANS_FILE`` (the local stack sets it: one OTLP-JSON line per span, read
back by ``inbox show --trace``), ``RELAYLINK_OTLP_ENDPOINT`` (a team's collector,
e.g. ``http://127.0.0.1:4318``: spans are POSTed to ``/v1/traces`` at the end of each
invocation) and, deployed with active tracing, the X-Ray daemon Lambda runs
(:mod:`functions.core.adapters.xray_daemon`). None of them: no span is kept.
Standard library only (the receiver's cold path); an endpoint that fails is dropped
for the invocation, never retried into the delivery's time.
"""

from __future__ import annotations

import os
import threading
import urllib.request
from collections.abc import Mapping
from typing import Final

from functions.core import env_names, otlp_json, tracing
from functions.core.adapters.xray_daemon import XRayDaemonExporter, daemon_address
from functions.core.tracing import SpanExporter, SpanRecord

OTLP_TRACES_PATH: Final = "/v1/traces"
OTLP_TIMEOUT_SECONDS: Final = 2.0
# Spans kept for one POST; a run that makes more sends them in more requests.
OTLP_BATCH_SPANS: Final = 512


class SpanFile:
    """Appends each span as one OTLP-JSON line; safe across threads and processes
    (one ``write`` of a whole line to a file opened for appending)."""

    def __init__(self, path: str) -> None:
        self._path = path

    def export(self, span: SpanRecord) -> None:
        line = (otlp_json.dumps([span]) + "\n").encode()
        descriptor = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)

    def flush(self) -> None:
        """Nothing is buffered."""


class OtlpHttpExporter:
    """Buffers finished spans and POSTs them as OTLP/HTTP JSON at :meth:`flush`."""

    def __init__(self, endpoint: str, *, timeout: float = OTLP_TIMEOUT_SECONDS) -> None:
        self._url = endpoint.rstrip("/") + OTLP_TRACES_PATH
        self._timeout = timeout
        self._buffer: list[SpanRecord] = []
        self._lock = threading.Lock()

    def export(self, span: SpanRecord) -> None:
        if span.end_ns is None:
            return  # a backend takes finished spans only; the end comes later
        with self._lock:
            self._buffer.append(span)
            full = len(self._buffer) >= OTLP_BATCH_SPANS
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            spans, self._buffer = self._buffer, []
        if not spans:
            return
        body = otlp_json.dumps(spans).encode()
        post = urllib.request.Request(  # noqa: S310 (the deployer's own endpoint setting)
            self._url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(post, timeout=self._timeout) as answer:  # noqa: S310
            answer.read()


class Tee:
    """Every span to each of ``exporters``."""

    def __init__(self, *exporters: SpanExporter) -> None:
        self._exporters = exporters

    def export(self, span: SpanRecord) -> None:
        for exporter in self._exporters:
            exporter.export(span)

    def flush(self) -> None:
        for exporter in self._exporters:
            exporter.flush()


def from_env(env: Mapping[str, str]) -> SpanExporter | None:
    """The exporter the environment names (None: spans are not kept)."""
    exporters: list[SpanExporter] = []
    if path := env.get(env_names.ENV_SPANS_FILE, "").strip():
        exporters.append(SpanFile(path))
    if endpoint := env.get(env_names.ENV_OTLP_ENDPOINT, "").strip():
        exporters.append(OtlpHttpExporter(endpoint))
    # Active tracing on (infra sets Powertools' switch to "false" only then), deployed:
    # Lambda runs the X-Ray daemon and names it.
    if xray_on(env):
        address = daemon_address(env.get(env_names.ENV_XRAY_DAEMON_ADDRESS))
        exporters.append(XRayDaemonExporter(address))
    if not exporters:
        return None
    return exporters[0] if len(exporters) == 1 else Tee(*exporters)


def xray_on(env: Mapping[str, str]) -> bool:
    """Deployed with active tracing: Lambda runs the X-Ray daemon and names it, and
    infra sets Powertools' switch to "false" only then."""
    return bool(env.get(env_names.ENV_XRAY_DAEMON_ADDRESS)) and (
        env.get(env_names.ENV_POWERTOOLS_TRACE_DISABLED, "").lower() == "false"
    )


def install_from_env(env: Mapping[str, str]) -> None:
    """Install the environment's exporter at a function's cold start, unless one is
    installed already (the local stack runs three functions in one process; a test
    installs its own)."""
    if tracing.installed() is None:
        tracing.install(from_env(env))
