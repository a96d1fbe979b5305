"""Where spans go beyond the local span file: a team's own collector (OTLP/HTTP with
JSON, to a loopback receiver) and, deployed, the X-Ray daemon (a loopback UDP socket)."""

from __future__ import annotations

import json
import socket

from functions.core import tracing
from functions.core.adapters import span_export
from functions.core.adapters.span_export import OtlpHttpExporter, SpanFile, Tee
from functions.core.adapters.xray_daemon import XRayDaemonExporter
from functions.core.env_names import (
    ENV_OTLP_ENDPOINT,
    ENV_POWERTOOLS_TRACE_DISABLED,
    ENV_SPANS_FILE,
    ENV_XRAY_DAEMON_ADDRESS,
)
from local.otlp_receiver import OtlpReceiver


def test_the_spans_of_an_invocation_are_posted_at_its_end() -> None:
    previous = tracing.installed()
    with OtlpReceiver() as receiver:
        tracing.install(OtlpHttpExporter(receiver.url))
        try:
            with tracing.span("attempt", announce=True) as attempt, tracing.span("claim"):
                pass
            assert receiver.received.requests == 0  # nothing sent before the flush
            tracing.flush()
        finally:
            tracing.install(previous)
        spans = receiver.received.of_trace(attempt.context.trace_id)
    assert receiver.received.requests == 1
    # The announcement is the span file's business: a backend gets finished spans only.
    assert [(s.name, s.end_ns is not None) for s in spans] == [("claim", True), ("attempt", True)]
    assert spans[0].parent_span_id == attempt.context.span_id


def test_a_collector_that_is_down_costs_the_work_nothing() -> None:
    previous = tracing.installed()
    with OtlpReceiver() as receiver:
        gone = receiver.url
    tracing.install(OtlpHttpExporter(gone, timeout=0.5))
    try:
        with tracing.span("attempt"):
            pass
        tracing.flush()  # refused: dropped, never raised
    finally:
        tracing.install(previous)


def test_the_environment_chooses_the_file_the_endpoint_or_both(tmp_path: object) -> None:
    path = f"{tmp_path}/spans.jsonl"
    assert span_export.from_env({}) is None
    assert isinstance(span_export.from_env({ENV_SPANS_FILE: path}), SpanFile)
    endpoint = {ENV_OTLP_ENDPOINT: "http://127.0.0.1:4318"}
    assert isinstance(span_export.from_env(endpoint), OtlpHttpExporter)
    assert isinstance(span_export.from_env({ENV_SPANS_FILE: path, **endpoint}), Tee)


def test_deployed_with_active_tracing_spans_go_to_the_xray_daemon_as_segments() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.bind(("127.0.0.1", 0))
        daemon.settimeout(5)
        host, port = daemon.getsockname()
        env = {
            ENV_XRAY_DAEMON_ADDRESS: f"tcp:{host}:{port} udp:{host}:{port}",
            ENV_POWERTOOLS_TRACE_DISABLED: "false",
        }
        exporter = span_export.from_env(env)
        assert isinstance(exporter, XRayDaemonExporter)
        assert span_export.from_env({**env, ENV_POWERTOOLS_TRACE_DISABLED: "true"}) is None
        previous = tracing.installed()
        tracing.install(exporter)
        try:
            accepting = tracing.span("accept", attributes={"delivery_id": "d-1", "api.id": "x"})
            with accepting, tracing.span("attempt", announce=True):
                pass
        finally:
            tracing.install(previous)
            exporter.close()
        datagrams = [daemon.recv(65536), daemon.recv(65536)]
    header, attempt = datagrams[0].split(b"\n", 1)
    assert json.loads(header) == {"format": "json", "version": 1}
    attempt_segment = json.loads(attempt)
    accept_segment = json.loads(datagrams[1].split(b"\n", 1)[1])
    assert attempt_segment["annotations"] == {"span": "attempt"}
    assert attempt_segment["parent_id"] == accept_segment["id"]
    assert accept_segment["trace_id"] == attempt_segment["trace_id"]
    assert accept_segment["trace_id"].startswith("1-") and len(accept_segment["trace_id"]) == 35
    assert accept_segment["annotations"] == {"span": "accept", "delivery_id": "d-1", "api_id": "x"}
    assert accept_segment["end_time"] >= accept_segment["start_time"]
