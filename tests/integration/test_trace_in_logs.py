"""Every line a function logs about a delivery names the delivery's trace.

The lines are read as Lambda would ship them (Powertools' handler, our formatter), in
each function that handles a delivery: the receiver, the relay, the worker and the
reconciler. ``trace_id`` is the W3C id of the ``traceparent`` stored with the
delivery, so Logs Insights finds a trace's lines and a trace's id finds its lines.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from functions.core import settings_table, tracing
from functions.core.deadline import Deadline
from functions.core.observability import logger
from local.event_sources import sqs_event
from local.testkit import botocore_hooks
from local.testkit.builders import LambdaContext, stream_event
from local.testkit.moto_world import REGION, MotoWorld, StreamReader
from tests.integration.test_pipeline import Pipeline, pipeline  # noqa: F401 (fixture "pipeline")

Lines = io.StringIO


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[Lines]:
    """What the functions' log handler writes (every level), as Lambda would ship it."""
    stream = io.StringIO()
    monkeypatch.setattr(logger.registered_handler, "stream", stream)
    level = logger.log_level
    logger.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        logger.setLevel(level)


def _about(stream: Lines, delivery_id: str) -> list[dict[str, Any]]:
    """The JSON lines that name ``delivery_id`` (metric lines have no level)."""
    parsed = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [line for line in parsed if line.get("delivery_id") == delivery_id]


def _trace_of(aws: MotoWorld, delivery_id: str) -> str:
    context = tracing.parent_from(aws.inbox(delivery_id).traceparent)
    assert context is not None
    return context.trace_id


def _refuse_batch_entries(aws: MotoWorld) -> None:
    """SQS answers each batch send from now on with every entry refused."""

    def answer(parsed: dict[str, Any], **_: Any) -> None:
        entries = parsed.pop("Successful", [])
        parsed["Failed"] = [
            {"Id": e["Id"], "Code": "InternalError", "SenderFault": False} for e in entries
        ]

    aws.sqs.meta.events.register("after-call.sqs.SendMessageBatch", answer)


def test_receiver_lines_name_the_deliverys_trace(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    lines: Lines,
) -> None:
    delivery_id, response = pipeline.receive()

    assert response["statusCode"] == 202
    (handled,) = [
        line for line in _about(lines, delivery_id) if line["message"] == "delivery handled"
    ]
    assert handled["trace_id"] == _trace_of(pipeline.aws, delivery_id)


def test_a_throttled_receipts_retry_lines_name_its_trace(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    lines: Lines,
) -> None:
    # Five refusals: more than botocore's own three attempts ride out.
    botocore_hooks.inject_dynamodb_error(
        pipeline.aws.dynamodb, "TransactWriteItems", times=5, code="ThrottlingException"
    )

    delivery_id, response = pipeline.receive()

    assert response["statusCode"] == 202
    parsed = [json.loads(line) for line in lines.getvalue().splitlines()]
    retried = [line for line in parsed if line.get("message") == "receipt retried after throttling"]
    assert retried
    assert {line.get("trace_id") for line in retried} == {_trace_of(pipeline.aws, delivery_id)}


def test_relay_lines_name_the_deliverys_trace(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    stream: StreamReader,
    lines: Lines,
) -> None:
    delivery_id, _ = pipeline.receive()
    records = StreamReader.filtered(stream.new_records())
    _refuse_batch_entries(pipeline.aws)

    from functions.relay import handler as relay_handler  # noqa: PLC0415 (installed by the fixture)

    response = relay_handler.lambda_handler(stream_event(records), LambdaContext())

    assert len(response["batchItemFailures"]) == 1
    (refused,) = [
        line
        for line in _about(lines, delivery_id)
        if line["message"] == "work item refused by the queue"
    ]
    assert refused["trace_id"] == _trace_of(pipeline.aws, delivery_id)


def test_worker_lines_name_the_deliverys_trace(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    lines: Lines,
) -> None:
    delivery_id, _ = pipeline.receive()
    pipeline.relay()
    before = len(_about(lines, delivery_id))

    _, result = pipeline.worker().run_visible()

    assert result == {"batchItemFailures": []}
    worker_lines = _about(lines, delivery_id)[before:]
    assert worker_lines  # the worker logs what it did with the delivery
    trace_id = _trace_of(pipeline.aws, delivery_id)
    assert [line.get("trace_id") for line in worker_lines] == [trace_id] * len(worker_lines)


def test_a_worker_line_outside_an_attempt_names_the_deliverys_trace(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    lines: Lines,
) -> None:
    delivery_id, _ = pipeline.receive()
    pipeline.relay()
    rig = pipeline.worker()
    from functions.worker import handler as worker_handler  # noqa: PLC0415 (imports mcp)

    # An invocation with no time left starts nothing: the batch logs why, no attempt.
    event = sqs_event(pipeline.aws.receive(), pipeline.aws.queue_arn, REGION)
    worker_handler.handle(event, rig.deps, remaining_ms=1)

    (not_started,) = [
        line for line in _about(lines, delivery_id) if line["message"] == "work item not started"
    ]
    assert not_started["trace_id"] == _trace_of(pipeline.aws, delivery_id)


def test_reconciler_lines_name_the_deliverys_trace(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    lines: Lines,
) -> None:
    # Received, never relayed: the reconciler re-enqueues it once it is old enough,
    # and the queue refuses it.
    delivery_id, _ = pipeline.receive()
    pipeline.aws.clock.advance(settings_table.RECONCILE_PENDING_AGE_SECONDS.default + 1)
    _refuse_batch_entries(pipeline.aws)

    pipeline.reconciler.run(deadline=Deadline.never())

    refused = [
        line
        for line in _about(lines, delivery_id)
        if line["message"].startswith("work item refused by the queue")
    ]
    assert refused
    assert {line["trace_id"] for line in refused} == {_trace_of(pipeline.aws, delivery_id)}


def test_no_trace_is_named_outside_a_delivery(lines: Lines) -> None:
    logger.info("between deliveries")

    with tracing.within("not a traceparent"):
        logger.info("an invalid traceparent names nothing")

    assert all("trace_id" not in json.loads(line) for line in lines.getvalue().splitlines())
