"""``inbox show ID --trace`` of a delivery whose trace was not sampled at receipt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from functions.core import otlp_json, tracing
from local.testkit import builders
from ops.commands import inbox
from ops.target import Target

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _target(spans_file: Path) -> Target:
    """A local stack's target; showing a trace reads its span file alone (no client)."""
    unused: Any = None
    return Target(unused, unused, "table", "queue", "dead-letters", spans_file=str(spans_file))


@pytest.mark.parametrize("flags", ["00", "01"])
def test_the_trace_of_a_delivery_says_whether_it_was_sampled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: str
) -> None:
    traceparent = f"00-{TRACE}-00f067aa0ba902b7-{flags}"
    spans_file = tmp_path / "spans.jsonl"
    context = tracing.parent_from(traceparent)
    assert context is not None
    record = tracing.SpanRecord("accept", context, None, 1, 2)
    spans_file.write_text(otlp_json.dumps([record]) + "\n")
    item = builders.inbox_item("d-1", received_at=1, traceparent=traceparent)

    code = inbox._show_trace(_target(spans_file), item, as_json=True)

    shown = json.loads(capsys.readouterr().out)
    assert code == 0
    assert shown["sampled"] is (flags == "01")
    assert shown["trace_id"] == TRACE
    # An unsampled delivery shows no span, whatever a file holds under its id.
    assert len(shown["spans"]) == (1 if flags == "01" else 0)
