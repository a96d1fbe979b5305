"""Sampling: decided once where a trace is born, followed by every span after it."""

from __future__ import annotations

import io
import json
import os
import random

import pytest

from functions.core import env_names, observability, tracing
from functions.core.observability import logger
from functions.core.trace_context import sample
from tests.span_audit import CollectedSpans

INVOCATION = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def test_sample_keeps_its_percent_of_new_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "random", random.Random(7).random)

    kept = sum(sample(25) for _ in range(4_000))

    assert 900 < kept < 1_100
    assert not any(sample(0) for _ in range(1_000))
    assert all(sample(100) for _ in range(1_000))


def test_an_unsampled_trace_exports_nothing_and_passes_its_flag_on(
    collected: CollectedSpans,
) -> None:
    with tracing.span("accept", sampled=False) as root:
        with tracing.span("child") as child:
            handed_on = tracing.current_traceparent()
        tracing.record("relay", parent=root.context, start_ns=1, end_ns=2)
    with tracing.span("attempt", parent=tracing.parent_from(handed_on), announce=True):
        pass

    assert collected.spans == []
    assert handed_on is not None and handed_on.endswith("-00")
    assert child.context.trace_id == root.context.trace_id
    assert not child.context.sampled


def test_a_sampled_trace_exports_every_span(collected: CollectedSpans) -> None:
    with tracing.span("accept", sampled=True) as root, tracing.span("child"):
        pass

    assert [s.name for s in collected.spans] == ["child", "accept"]
    assert root.context.traceparent.endswith("-01")


def _line_in(trace: str | None, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The line logged while the trace ``trace`` names is current, X-Ray on."""
    stream = io.StringIO()
    monkeypatch.setattr(logger.registered_handler, "stream", stream)
    monkeypatch.setenv("_X_AMZN_TRACE_ID", INVOCATION)
    observability.apply_trace_setting({env_names.ENV_POWERTOOLS_TRACE_DISABLED: "false"})
    try:
        with tracing.within(trace):
            logger.warning("about one delivery")
    finally:
        observability.apply_trace_setting(os.environ)
    (line,) = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert isinstance(line, dict)
    return line


@pytest.mark.parametrize("flags", ["01", "00"])
def test_a_line_names_its_deliverys_trace_and_xray_the_sampled_one(
    monkeypatch: pytest.MonkeyPatch, flags: str
) -> None:
    traceparent = f"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-{flags}"

    line = _line_in(traceparent, monkeypatch)

    assert line["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    # X-Ray holds the delivery's segments only when it is sampled; else the line keeps
    # the invocation's own trace.
    expected = "1-4bf92f35-77b34da6a3ce929d0e0e4736" if flags == "01" else INVOCATION[5:40]
    assert line["xray_trace_id"] == expected


def test_a_line_outside_a_delivery_keeps_the_invocations_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    line = _line_in(None, monkeypatch)

    assert "trace_id" not in line
    assert line["xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
