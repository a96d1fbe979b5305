"""The request line with its metric: written without a record where only Powertools'
handler would see one, the record's way otherwise, redacted either way."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
from collections.abc import Callable, Iterator

import pytest
from aws_lambda_powertools.logging.filters import SuppressFilter

from functions.core import env_names, metric_names, observability
from functions.core.observability import log_with_counts, logger, trace_in_logs
from functions.core.redaction import REDACTED, remember_secret

# Planted, only in this module (nothing here reaches a handler pytest or the audit sees).
TOKEN = "Qm7vX2cR9tL4wN8p"
SHAPED = "whsec_c29tZS1zaWduaW5nLWtleQ=="
METRIC = metric_names.receiver_outcome_metric("accepted")
PUBLISHED = metric_names.METRIC_QUARANTINED
FIELDS = {
    "aws_request_id": "c0ffee00-0000-4000-8000-000000000001",
    "api_request_id": "req-1",
    "outcome": "accepted",
    "reason": None,
    "status": 202,
    "delivery_id": "0f05f4e2-245f-4fe0-bf3d-e4aa3850172a",
}
LambdaLike = Callable[[], tuple[io.StringIO, "_Records"]]


class _Records(logging.Handler):
    """Keeps the records it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

        self.offered = 0  # records handed to it, before its filters decide

    def handle(self, record: logging.LogRecord) -> bool:
        self.offered += 1
        return super().handle(record)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def lambda_like(monkeypatch: pytest.MonkeyPatch) -> Iterator[LambdaLike]:
    """Call it in the test's body: the handlers as in Lambda from then on."""
    level = logger.log_level
    logger.setLevel(logging.DEBUG)
    try:
        yield lambda: _as_in_lambda(monkeypatch)
    finally:
        logger.setLevel(level)


def _as_in_lambda(monkeypatch: pytest.MonkeyPatch) -> tuple[io.StringIO, _Records]:
    """Our logger with Powertools' handler alone, writing to a buffer, and one root
    handler that Powertools' filter keeps our records from. pytest's handlers and the
    log audit's (added around the test's body) are set aside until the test ends."""
    handler = logger.registered_handler
    stream = io.StringIO()
    monkeypatch.setattr(handler, "stream", stream)
    monkeypatch.setattr(logging.getLogger(logger.name), "handlers", [handler])
    suppressed = _Records()
    suppressed.addFilter(SuppressFilter(logger.name))
    monkeypatch.setattr(logging.getLogger(), "handlers", [suppressed])
    return stream, suppressed


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _without_time(line: dict[str, object]) -> dict[str, object]:
    if "_aws" not in line:  # a count that is no metric: a field of the line only
        return line
    emf = dict(line["_aws"])  # type: ignore[call-overload]
    emf.pop("Timestamp")
    return {**line, "_aws": emf}


def test_the_line_written_without_a_record_is_the_records_line(
    lambda_like: LambdaLike,
) -> None:
    stream, suppressed = lambda_like()
    log_with_counts(logging.INFO, "delivery handled", FIELDS, [METRIC, PUBLISHED])
    (direct,) = _lines(stream)
    stream.truncate(0)
    stream.seek(0)
    listener = _Records()  # another handler that would see the record: it gets one
    logging.getLogger().handlers.append(listener)

    log_with_counts(logging.INFO, "delivery handled", FIELDS, [METRIC, PUBLISHED])

    (through_record,) = _lines(stream)
    assert _without_time(direct) == _without_time(through_record)
    assert list(direct) == list(through_record)  # the same keys in the same order
    assert [r.getMessage() for r in listener.records] == ["delivery handled"]
    # The first line was made without a record: none reached the root handler then.
    assert (suppressed.offered, suppressed.records) == (1, [])
    assert direct[METRIC] == [1.0] and direct["service"] == metric_names.SERVICE
    # Only the alarmed count is a metric; the other is a field of the line.
    directive = direct["_aws"]["CloudWatchMetrics"][0]  # type: ignore[index]
    assert [m["Name"] for m in directive["Metrics"]] == [PUBLISHED]
    assert "reason" not in direct


@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO, logging.WARNING])
def test_a_secret_in_the_fields_is_redacted_at_every_level(
    lambda_like: LambdaLike, level: int
) -> None:
    stream, _ = lambda_like()
    remember_secret(TOKEN)

    log_with_counts(level, "delivery handled", {**FIELDS, "a": TOKEN, "b": SHAPED}, [METRIC])

    written = stream.getvalue()
    assert TOKEN not in written and SHAPED not in written
    (line,) = _lines(stream)
    assert (line["a"], line["b"], line["level"]) == (
        REDACTED,
        REDACTED,
        logging.getLevelName(level),
    )
    assert line[METRIC] == [1.0]


def test_a_remembered_secret_with_non_ascii_and_a_quote_is_found_in_the_line(
    lambda_like: LambdaLike,
) -> None:
    stream, _ = lambda_like()
    secret = 'Zür"ich-7f3a9c'
    remember_secret(secret)

    log_with_counts(logging.INFO, "delivery handled", {**FIELDS, "a": f"x {secret} y"}, [METRIC])

    (line,) = _lines(stream)
    assert line["a"] == f"x {REDACTED} y"


def test_a_line_below_the_loggers_level_is_not_written(
    lambda_like: LambdaLike,
) -> None:
    stream, _ = lambda_like()
    logger.setLevel(logging.WARNING)

    log_with_counts(logging.INFO, "delivery handled", FIELDS, [])

    assert stream.getvalue() == ""


@pytest.mark.parametrize(("disabled", "logged"), [("true", False), ("false", True), ("x", True)])
def test_the_trace_id_is_logged_only_while_tracing_is_on(
    lambda_like: LambdaLike, monkeypatch: pytest.MonkeyPatch, disabled: str, logged: bool
) -> None:
    stream, _ = lambda_like()
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0"
    monkeypatch.setenv("_X_AMZN_TRACE_ID", trace)
    try:
        observability.apply_trace_setting({env_names.ENV_POWERTOOLS_TRACE_DISABLED: disabled})
        log_with_counts(logging.INFO, "delivery handled", FIELDS, [METRIC])
    finally:
        observability.apply_trace_setting(os.environ)

    (line,) = _lines(stream)
    assert ("xray_trace_id" in line) is logged
    if logged:
        assert line["xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"


def test_lines_logged_inside_an_attempt_name_its_trace_and_only_there(
    lambda_like: LambdaLike,
) -> None:
    stream, _ = lambda_like()
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"

    async def attempt() -> None:
        with trace_in_logs(trace_id):
            log_with_counts(logging.INFO, "work item processed", FIELDS, [METRIC])
            await asyncio.to_thread(logger.info, "in the workflow's thread")

    asyncio.run(attempt())
    log_with_counts(logging.INFO, "after the attempt", FIELDS, [METRIC])
    inside, workflow, after = _lines(stream)
    assert inside["trace_id"] == workflow["trace_id"] == trace_id
    assert "trace_id" not in after
