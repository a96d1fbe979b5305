"""The shared formatter writes exactly what Powertools' stock formatter writes."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from functions.core import metric_names
from functions.core.log_formatter import JsonLineFormatter
from functions.core.observability import logger


def _pair() -> tuple[LambdaPowertoolsFormatter, JsonLineFormatter]:
    """Both formatters configured as Powertools' Logger configures the shared one."""
    stock = LambdaPowertoolsFormatter()
    ours = JsonLineFormatter()
    for formatter in (stock, ours):
        formatter.append_keys(service=metric_names.SERVICE, sampling_rate=None)
    return stock, ours


def _record(msg: object, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("relaylink", logging.INFO, __file__, 7, msg, args or None, None)
    vars(record).update(extra)
    return record


MESSAGES = [
    "delivery handled",
    "",
    "  plain words after spaces",
    '{"looks": "like an object"}',
    ' \n{"after": "whitespace"}',
    "[1, 2]",
    "42",
    "-7 degrees",
    "true",
    "null",
    "NaN",
    "Infinity and beyond",
    '"a JSON string"',
    "{not json",
    {"a dict": ["message"]},
    ["a", "list"],
    7,
]


@pytest.mark.parametrize("msg", MESSAGES, ids=repr)
def test_the_line_is_the_stock_formatters_for_every_kind_of_message(msg: object) -> None:
    stock, ours = _pair()
    extra = {"outcome": "accepted", "reason": None, "status": 202, "_aws": {"Timestamp": 1}}

    record = _record(msg, **extra)

    assert ours.format(record) == stock.format(record)


def test_a_message_with_arguments_an_exception_and_a_stack_is_the_stock_line() -> None:
    stock, ours = _pair()
    try:
        raise ValueError("boom")
    except ValueError:
        exc_info = sys.exc_info()
    record = _record("found %s of %d", "three", 3, key="value")
    record.exc_info = exc_info
    record.stack_info = "Stack (most recent call last): here"

    line = ours.format(record)

    assert line == stock.format(record)
    assert json.loads(line)["message"] == "found three of 3"


def test_appended_and_thread_local_keys_come_out_as_they_do_from_stock() -> None:
    stock, ours = _pair()
    for formatter in (stock, ours):
        formatter.append_keys(cold_start=True, level_name="%(levelname)s")
    ours.thread_safe_append_keys(request="r-1", where="%(funcName)s")
    record = _record("line")
    try:
        assert ours.format(record) == stock.format(record)
    finally:
        ours.thread_safe_clear_keys()


def test_a_reserved_key_holding_a_non_string_is_refused_like_stock() -> None:
    stock, ours = _pair()
    for formatter in (stock, ours):
        formatter.append_keys(name=3)
        with pytest.raises(ValueError, match="need to be type 'str'"):
            formatter.format(_record("line"))


def test_the_shared_logger_uses_it() -> None:
    assert isinstance(logger.registered_formatter, JsonLineFormatter)


def _shared_pair() -> tuple[LambdaPowertoolsFormatter, JsonLineFormatter]:
    """The pair without the timestamp and location, as the shared logger writes lines."""
    stock, ours = _pair()
    for formatter in (stock, ours):
        formatter.remove_keys(["timestamp", "location"])
    return stock, ours


FIELD_SETS = [
    {"outcome": "accepted", "reason": None, "status": 202, "_aws": {"Timestamp": 1}, "n": [1.0]},
    {"note": 'Zürich ✓ "quoted" \\ back\nslash', "delivery_id": None},
    {"stack_trace": "an extra the stock format drops", "exception": "kept as an extra"},
    {"xray_trace_id": "an extra the stock format replaces", "service": "overrides in place"},
    {},
]


@pytest.mark.parametrize("fields", FIELD_SETS, ids=repr)
@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO, logging.WARNING])
def test_a_line_from_fields_is_the_stock_line_of_the_same_record(
    fields: dict[str, object], level: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    stock, ours = _shared_pair()
    for trace in (None, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f;Sampled=1"):
        if trace is None:
            monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
        else:
            monkeypatch.setenv("_X_AMZN_TRACE_ID", trace)
        record = _record("delivery handled", **fields)
        record.levelno, record.levelname = level, logging.getLevelName(level)

        assert ours.fields_line(level, "delivery handled", fields) == stock.format(record)


def test_a_line_from_fields_carries_appended_and_thread_local_keys_as_stock_does() -> None:
    stock, ours = _shared_pair()
    for formatter in (stock, ours):
        formatter.append_keys(cold_start=True, level_name="%(levelname)s")
    ours.thread_safe_append_keys(request="r-1")
    try:
        line = ours.fields_line(logging.INFO, "line", {"outcome": "accepted"})
        assert line == stock.format(_record("line", outcome="accepted"))
    finally:
        ours.thread_safe_clear_keys()


@pytest.mark.parametrize(
    ("message", "fields", "appended"),
    [
        ('{"a": 1}', {}, {}),  # may be JSON: the formatter logs it as an object
        (" 7", {}, {}),
        ("line", {"message": "x"}, {}),  # a record refuses it
        ("line", {"location": "x"}, {}),  # reserved: the formatter drops it
        ("line", {}, {"location": "%(funcName)s:%(lineno)d"}),  # the record's attributes
    ],
)
def test_a_line_that_needs_the_record_is_left_to_it(
    message: str, fields: dict[str, object], appended: dict[str, object]
) -> None:
    _stock, ours = _shared_pair()
    ours.append_keys(**appended)

    assert ours.fields_line(logging.INFO, message, fields) is None


@pytest.mark.parametrize("order", [None, ["level", "service"]], ids=["default", "no message"])
@pytest.mark.parametrize("trace", [None, "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=0"])
def test_members_given_as_json_come_out_where_stock_puts_the_same_extras(
    order: list[str] | None, trace: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if trace is None:
        monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    else:
        monkeypatch.setenv("_X_AMZN_TRACE_ID", trace)
    stock = LambdaPowertoolsFormatter(log_record_order=order)
    ours = JsonLineFormatter(log_record_order=order)
    for formatter in (stock, ours):
        formatter.append_keys(service=metric_names.SERVICE, sampling_rate=None)
        formatter.remove_keys(["timestamp", "location"])
    fields = {"outcome": "accepted", "reason": None, "note": "Zürich ✓"}
    encoded = '"_aws":{"Timestamp":1,"M":[["service"]]},"Count":[1.0]'
    extras = {**fields, "_aws": {"Timestamp": 1, "M": [["service"]]}, "Count": [1.0]}

    line = ours.fields_line(logging.INFO, "delivery handled", fields, encoded)

    assert line == stock.format(_record("delivery handled", **extras))


def test_members_given_as_json_need_the_compact_serializer() -> None:
    ours = JsonLineFormatter(json_serializer=json.dumps)
    ours.remove_keys(["timestamp", "location"])

    assert ours.fields_line(logging.INFO, "line", {}, '"a":1') is None
    assert ours.fields_line(logging.INFO, "line", {}) is not None
