"""One delivery's trace, read back from a local stack's span file.

The functions write each span as one OTLP-JSON line (``functions.core.adapters.
span_export``); an attempt is written at its start too, so a worker killed mid-attempt
leaves it, unfinished. Reading merges the two records of a span (the finished one
wins), keeps the delivery's trace, and orders it: :func:`trace_view` in time order
(what ``inbox show --trace --json`` and the console's waterfall show), :func:`tree`
parent before children (the text view).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from functions.core import otlp_json
from functions.core.trace_context import parse_traceparent
from functions.core.tracing import SpanRecord


@dataclass(frozen=True, slots=True)
class TracedSpan:
    """A span placed in its trace: how deep, and relative to the trace's start."""

    span: SpanRecord
    depth: int
    offset_ns: int  # from the trace's first span's start

    @property
    def duration_ns(self) -> int | None:
        end = self.span.end_ns
        return None if end is None else end - self.span.start_ns


def trace_id_of(traceparent: str | None) -> str | None:
    context = parse_traceparent(traceparent)
    return None if context is None else context.trace_id


def sampled(traceparent: str | None) -> bool:
    """Whether the trace's spans were recorded (its flags, decided at receipt)."""
    context = parse_traceparent(traceparent)
    return context is not None and context.sampled


def xray_trace_id(trace_id: str) -> str:
    """The same trace id as X-Ray writes it (``1-<8 hex>-<24 hex>``)."""
    return f"1-{trace_id[:8]}-{trace_id[8:]}"


def read_trace(path: str | Path, trace_id: str) -> list[SpanRecord]:
    """The spans of ``trace_id`` in the span file at ``path`` (none: an empty list)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return merged(_spans_in(lines, trace_id))


def _spans_in(lines: Iterable[str], trace_id: str) -> Iterator[SpanRecord]:
    for line in lines:
        # A cheap test first: the file holds every delivery's spans.
        if trace_id not in line:
            continue
        try:
            payload = json.loads(line)
            yield from (s for s in otlp_json.spans_of(payload) if s.context.trace_id == trace_id)
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a killed writer: the others still count


def merged(spans: Iterable[SpanRecord]) -> list[SpanRecord]:
    """One record per span: its finished one when it has one, else its announcement."""
    by_id: dict[str, SpanRecord] = {}
    for span in spans:
        known = by_id.get(span.context.span_id)
        if known is None or (known.end_ns is None and span.end_ns is not None):
            by_id[span.context.span_id] = span
    return sorted(by_id.values(), key=lambda s: (s.start_ns, s.end_ns or s.start_ns))


def tree(spans: list[SpanRecord]) -> list[TracedSpan]:
    """Parent before children, siblings by start; a span whose parent is not in the
    trace (RelayLink's own, upstream) is a root."""
    if not spans:
        return []
    start = min(s.start_ns for s in spans)
    ids = {s.context.span_id for s in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else None
        children.setdefault(parent, []).append(span)
    placed: list[TracedSpan] = []

    def place(parent: str | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start_ns):
            placed.append(TracedSpan(span, depth, span.start_ns - start))
            place(span.context.span_id, depth + 1)

    place(None, 0)
    return placed


def trace_view(trace_id: str, spans: list[SpanRecord]) -> dict[str, Any]:
    """The trace as JSON: its spans in time order, each with its depth in the tree."""
    depths = {t.span.context.span_id: t for t in tree(spans)}
    ordered = sorted(depths.values(), key=lambda t: (t.span.start_ns, t.depth))
    return {"trace_id": trace_id, "spans": [_span_view(t) for t in ordered]}


def _span_view(traced: TracedSpan) -> dict[str, Any]:
    span = traced.span
    duration = traced.duration_ns
    return {
        "name": span.name,
        "trace_id": span.context.trace_id,
        "span_id": span.context.span_id,
        "parent_span_id": span.parent_span_id,
        "depth": traced.depth,
        "start_unix_nano": span.start_ns,
        "end_unix_nano": span.end_ns,
        "offset_ms": round(traced.offset_ns / 1e6, 3),
        "duration_ms": None if duration is None else round(duration / 1e6, 3),
        "unfinished": span.end_ns is None,
        "error": span.error,
        "attributes": dict(span.attributes),
        "links": [{"trace_id": c.trace_id, "span_id": c.span_id} for c in span.links],
    }


def tree_lines(spans: list[SpanRecord]) -> list[str]:
    """The text view: one line per span, indented under its parent, with its offset
    from the trace's start and its duration."""
    lines = []
    for traced in tree(spans):
        span = traced.span
        duration = traced.duration_ns
        took = "unfinished" if duration is None else _millis(duration)
        shown = " ".join(f"{k}={v}" for k, v in span.attributes.items())
        mark = " ERROR" if span.error else ""
        lines.append(
            f"{_millis(traced.offset_ns):>12}  {took:>12}  "
            f"{'  ' * traced.depth}{span.name}{mark}  {shown}".rstrip()
        )
    return lines


def _millis(nanoseconds: int) -> str:
    return f"{nanoseconds / 1e6:.1f} ms"
