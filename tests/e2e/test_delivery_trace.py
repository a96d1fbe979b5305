"""One delivery's trace on the local stack, read back with ``inbox show --trace``.

The agent workflow with the demo tools and a ticket that waits for a person: the
delivery parks on its ticket call, an operator approves it, the resumed attempt opens
the ticket and sends the alert. Its trace holds every step of that in one tree (one
trace id, every parent in the trace, time order), and the MCP server received the
trace in each fetch's ``_meta``. A second stack kills the worker in the middle of an
attempt: the retried delivery's trace shows the killed attempt (unfinished) and the
one that completed it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from local import agent_tools
from local.otlp_receiver import OtlpReceiver
from local.stack_options import StackOptions
from ops.trace import read_trace
from tests.e2e.stacks import audited
from tests.e2e.test_approvals import DEADLINE_SECONDS, cli, show, waiting
from tests.e2e.test_pipeline_over_http import _send as send
from tests.polling import poll


def trace_of(capsys: pytest.CaptureFixture[str], state: Path, delivery_id: str) -> dict[str, Any]:
    argv = ("inbox", "show", delivery_id, "--local", str(state), "--trace", "--json")
    status, out, err = cli(capsys, *argv)
    assert status == 0, err
    shown: dict[str, Any] = json.loads(out)
    return shown


def completed(capsys: pytest.CaptureFixture[str], state: Path, delivery_id: str) -> dict[str, Any]:
    """``inbox show --json`` of the delivery, once it is completed."""
    final = poll(
        lambda: show(capsys, state, delivery_id),
        lambda shown: shown["state"] == "completed",
        deadline_seconds=DEADLINE_SECONDS,
    )
    assert final["state"] == "completed", final
    return final


def assert_one_consistent_trace(trace: dict[str, Any]) -> None:
    """One trace id; every parent in the trace (the root's aside); time order."""
    spans = trace["spans"]
    assert {s["trace_id"] for s in spans} == {trace["trace_id"]}
    by_id = {s["span_id"]: s for s in spans}
    roots = [s for s in spans if s["parent_span_id"] not in by_id]
    assert [r["name"] for r in roots] == ["accept"], roots
    for span in spans:
        parent = by_id.get(span["parent_span_id"])
        if parent is not None:
            assert parent["start_unix_nano"] <= span["start_unix_nano"], (parent, span)
            assert span["depth"] == parent["depth"] + 1
    starts = [s["start_unix_nano"] for s in spans]
    assert starts == sorted(starts)


def test_an_approved_tool_call_is_one_trace_from_receipt_to_the_last_effect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "stack.json"
    options = StackOptions(
        seed=30,
        workflow="agent",
        workflow_settings={
            "tools": "local.agent_tools:TOOLS",
            "approval": f"tools:{agent_tools.TICKET_TOOL}",
        },
        state_file=str(state),
        reconcile_interval_seconds=1.0,
    )
    with audited(options) as stack:
        assert stack.bedrock is not None and stack.mcp is not None
        stack.bedrock.emulator.script_tools(agent_tools.SCRIPT)
        summary = send(stack, 1)
        assert summary.all_acknowledged
        (delivery_id,) = [r.delivery_id for r in summary.results]
        poll(
            lambda: waiting(capsys, state),
            lambda items: len(items) == 1,
            deadline_seconds=DEADLINE_SECONDS,
        )
        status, _, err = cli(capsys, "approvals", "approve", delivery_id, "--local", str(state))
        assert (status, err) == (0, ""), err
        final = completed(capsys, state, delivery_id)
        trace = poll(
            lambda: trace_of(capsys, state, delivery_id),
            # The resumed attempt's span ends once its completion is written.
            lambda t: sum(s["name"] == "attempt" and not s["unfinished"] for s in t["spans"]) == 2,
            deadline_seconds=DEADLINE_SECONDS,
        )
        received = stack.mcp.controls.traceparents(final["package_id"])

    assert trace["trace_id"] == final["trace_id"]
    assert_one_consistent_trace(trace)
    spans = trace["spans"]
    names = Counter(s["name"] for s in spans)
    assert names["accept"] == 1
    assert names["relay"] == 1
    assert names["attempt"] == 2  # parked on the ticket, then resumed after the decision
    assert names["claim"] == 2
    # One fetch: the resumed attempt runs on the recorded package, never a refetch.
    assert names["mcp.get_package"] == 1
    assert names["operator.approve"] == 1
    assert names["approval.wait"] == 1
    # Turns: the lookup's and the ticket's, then (resumed) both replayed and the summary.
    turns = [s["attributes"] for s in spans if s["name"] == "model.turn"]
    assert [t["replayed"] for t in turns] == [False, False, True, True, False]
    assert all(t["input_tokens"] > 0 and t["output_tokens"] > 0 for t in turns)
    tools = [s["attributes"]["tool"] for s in spans if s["name"] == "tool"]
    assert tools.count(agent_tools.TICKET_TOOL) == 2  # asked (parked), then run
    effects = {s["attributes"]["effect"]: s["attributes"] for s in spans if s["name"] == "effect"}
    assert {e["outcome"] for e in effects.values()} == {"applied"}
    assert "alert" in effects
    assert effects["alert"]["idempotency_key"] == f"{delivery_id}:alert"
    # The wait is one span, from the ticket call that asked to the decision.
    (wait,) = [s for s in spans if s["name"] == "approval.wait"]
    asked_by = next(s for s in spans if s["span_id"] == wait["parent_span_id"])
    assert asked_by["name"] == "tool"
    assert wait["attributes"]["decision"] == "approved"
    approve = next(s for s in spans if s["name"] == "operator.approve")
    assert approve["start_unix_nano"] <= wait["end_unix_nano"] + 1_000_000_000
    # The resumed attempt continues the operator's span; the first, the relay's.
    attempts = [s for s in spans if s["name"] == "attempt"]
    named = {s["span_id"]: s["name"] for s in spans}
    assert [named[a["parent_span_id"]] for a in attempts] == ["relay", "operator.approve"]
    # The MCP server got the trace with its one fetch, the fetch span as the parent.
    fetches = {s["span_id"] for s in spans if s["name"] == "mcp.get_package"}
    assert len(received) == 1
    assert {r.split("-")[1] for r in received} == {trace["trace_id"]}
    assert {r.split("-")[2] for r in received} == fetches


def test_an_attempt_killed_with_its_worker_and_its_retry_share_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "stack.json"
    collector = OtlpReceiver()  # a team's own backend, beside the span file (bound already)
    options = StackOptions(
        seed=31,
        state_file=str(state),
        reconcile_interval_seconds=1.0,
        otlp_endpoint=collector.url,
    )
    with collector, audited(options) as stack:
        assert stack.mcp is not None
        stack.mcp.set_latency_ms(4000)  # long enough to kill the worker inside the fetch
        summary = send(stack, 1)
        (delivery_id,) = [r.delivery_id for r in summary.results]
        trace_id = show(capsys, state, delivery_id)["trace_id"]
        spans_file = stack.state.spans_file
        fetching = poll(
            lambda: [s.name for s in read_trace(spans_file, trace_id)],
            lambda names: "claim" in names,
            deadline_seconds=DEADLINE_SECONDS,
        )
        assert "claim" in fetching  # the fetch waits on the slow server: kill it there
        stack.kill("worker")
        stack.mcp.set_latency_ms(0)
        completed(capsys, state, delivery_id)
        trace = poll(
            lambda: trace_of(capsys, state, delivery_id),
            lambda t: any(
                s["name"] == "attempt" and s["attributes"].get("result") == "completed"
                for s in t["spans"]
            ),
            deadline_seconds=DEADLINE_SECONDS,
        )

    assert_one_consistent_trace(trace)
    attempts = [s for s in trace["spans"] if s["name"] == "attempt"]
    assert attempts[0]["unfinished"] and not any(a["unfinished"] for a in attempts[1:])
    # One retry completed it. Any other message back (the killed attempt's, or the
    # retry's own: a loaded machine redelivers sooner than a lease ends) ran nothing:
    # deferred while a lease ran, or found it done once the retry had completed it.
    results = [a["attributes"]["result"] for a in attempts[1:]]
    assert results.count("completed") == 1, results
    assert set(results) <= {"completed", "deferred", "already_done"}, results
    finisher = next(a for a in attempts if a["attributes"].get("result") == "completed")
    for late in (a for a in attempts if a["attributes"].get("result") == "already_done"):
        assert late["start_unix_nano"] >= finisher["start_unix_nano"], (late, finisher)
    claims = [s["attributes"] for s in trace["spans"] if s["name"] == "claim"]
    assert [c["attempt"] for c in claims if c.get("attempt") is not None] == [1, 2]
    # The collector got the finished spans each invocation flushed (the killed one's
    # were lost with it, as they would be from a crashed Lambda).
    exported = {s.context.span_id for s in collector.received.of_trace(trace["trace_id"])}
    assert finisher["span_id"] in exported
    assert attempts[0]["span_id"] not in exported
