"""Trace context, spans, their OTLP-JSON form and the trace read back from a span file."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

from functions.core import otlp_json, tracing
from functions.core.adapters.span_export import SpanFile
from functions.core.trace_context import SpanContext, new_root, parse_traceparent
from ops import trace
from tests.span_audit import CollectedSpans

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_traceparent_valid_is_read_and_written_back() -> None:
    context = parse_traceparent(VALID)
    assert context == SpanContext("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", True)
    assert context.traceparent == VALID


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero span
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # forbidden version
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        VALID + "-extra",  # version 00 has no more fields
        "00-" + "a" * 300,
    ],
)
def test_traceparent_invalid_is_ignored(header: str | None) -> None:
    assert parse_traceparent(header) is None


def test_traceparent_of_a_later_version_keeps_its_known_fields() -> None:
    later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-whatever"
    context = parse_traceparent(later)
    assert context is not None and not context.sampled


def test_new_trace_ids_start_with_the_epoch_second_as_xray_wants() -> None:
    root = new_root()
    assert len(root.trace_id) == 32 and len(root.span_id) == 16
    assert abs(int(root.trace_id[:8], 16) - int(time.time())) < 5


def test_spans_nest_through_the_context_and_record_errors_by_type_only(
    collected: CollectedSpans,
) -> None:
    with tracing.span("outer", attributes={"n": 1, "none": None}) as outer:
        with tracing.span("inner"):
            assert tracing.current() != outer.context
        with pytest.raises(ValueError, match="secret text"), tracing.span("failing"):
            raise ValueError("secret text")
    inner, failing, done = collected.spans
    assert (inner.name, failing.name, done.name) == ("inner", "failing", "outer")
    assert inner.parent_span_id == failing.parent_span_id == done.context.span_id
    assert {s.context.trace_id for s in collected.spans} == {done.context.trace_id}
    assert done.parent_span_id is None and dict(done.attributes) == {"n": 1}
    assert failing.error and dict(failing.attributes) == {"error.type": "ValueError"}
    assert tracing.current() is None


def test_a_span_is_current_in_a_thread_started_with_to_thread(collected: CollectedSpans) -> None:
    async def run() -> SpanContext | None:
        with tracing.span("attempt"):
            return await asyncio.to_thread(tracing.current)

    seen = asyncio.run(run())
    (attempt,) = collected.spans
    assert seen == attempt.context


def test_an_announced_span_is_exported_at_its_start_and_its_end(collected: CollectedSpans) -> None:
    with tracing.span("attempt", announce=True):
        (started,) = collected.spans
        assert started.end_ns is None
    assert collected.spans[1].end_ns is not None


def test_no_exporter_no_failure_and_a_failing_exporter_never_fails_the_work() -> None:
    class Broken:
        def export(self, span: tracing.SpanRecord) -> None:
            raise OSError("collector down")

        def flush(self) -> None:
            raise OSError("collector down")

    previous = tracing.installed()
    try:
        tracing.install(None)
        with tracing.span("nothing kept"):
            pass
        tracing.install(Broken())
        with tracing.span("still fine"):
            pass
        tracing.flush()
    finally:
        tracing.install(previous)


def test_otlp_json_round_trips_a_span_announced_and_finished() -> None:
    parent = new_root()
    finished = tracing.SpanRecord(
        "effect",
        parent.child(),
        parent.span_id,
        1_000,
        5_000,
        {"effect": "alert", "tokens": 12, "replayed": False, "ratio": 0.5},
        (parent,),
        True,
    )
    announced = tracing.SpanRecord("attempt", parent.child(), None, 2_000, None, {})
    payload = json.loads(otlp_json.dumps([finished, announced]))
    assert list(otlp_json.spans_of(payload)) == [finished, announced]
    (otlp_span, _) = payload["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert otlp_span["startTimeUnixNano"] == "1000" and otlp_span["status"] == {"code": 2}


def test_a_span_file_read_back_is_one_trace_merged_and_in_order(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    previous = tracing.installed()
    tracing.install(SpanFile(str(path)))
    try:
        with tracing.span("accept") as accept:
            pass
        threads = [threading.Thread(target=_attempt, args=(accept.context,)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with tracing.span("other trace"):
            pass
    finally:
        tracing.install(previous)
    with path.open("a") as stream:
        stream.write('{"resourceSpans": [cut short by a kill\n')
    spans = trace.read_trace(path, accept.context.trace_id)
    names = [s.name for s in spans]
    assert names.count("attempt") == 2 and names.count("claim") == 2
    assert "other trace" not in names
    assert all(s.end_ns is not None for s in spans)  # announcements merged away
    view = trace.trace_view(accept.context.trace_id, spans)
    assert view["spans"][0]["depth"] == 0
    starts = [s["start_unix_nano"] for s in view["spans"]]
    assert starts == sorted(starts)
    lines = trace.tree_lines(spans)
    assert lines[0].split()[-1] == "accept"
    assert trace.xray_trace_id(accept.context.trace_id).startswith("1-")


def _attempt(parent: SpanContext) -> None:
    with tracing.span("attempt", parent=parent, announce=True), tracing.span("claim"):
        pass
