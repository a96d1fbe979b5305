"""Powertools' JSON log line, the same bytes for less work per record.

Every function's log line goes through Powertools' formatter, and the receiver writes
one per request: its cost is measured against a bare DynamoDB write
(docs/benchmarks.md, figure 2). Three of the formatter's steps do needless work for
nearly every record, and :class:`JsonLineFormatter` skips only that work:

* the message is tried as a JSON document (Powertools logs a JSON string as an
  object), which raises and catches an error for every plain sentence; a text whose
  first character cannot start JSON is now returned without the attempt;
* the record's extras are told from its standard attributes by a search through a
  tuple; a frozen set answers the same question;
* ``json.dumps`` with options builds a new encoder for every line; one is kept.

:meth:`JsonLineFormatter.fields_line` goes further for the commonest record (a plain
sentence and a few extras, no arguments, exception or stack): it builds that line from
the values themselves, without a ``LogRecord``, for a caller that writes it directly
(:func:`functions.core.observability.log_with_counts`).

The output is the stock formatter's, key for key (tests/unit/test_log_formatter.py
compares them), with one addition: a line logged where a delivery's trace is current
(:func:`functions.core.tracing.current`: its span, or :func:`functions.core.tracing.within`
for a line about one delivery of a batch) names that trace, as ``trace_id`` (W3C: what
an OTLP backend shows) and, deployed with X-Ray on and the trace sampled, as
``xray_trace_id`` in X-Ray's form instead of the invocation's own (Lambda's segment of
a stream or queue batch is a trace of its own; the delivery's is the one worth
opening): the id the X-Ray console shows is the id a log search needs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from aws_lambda_powertools.logging.formatter import (
    RESERVED_LOG_ATTRS,
    LambdaPowertoolsFormatter,
    _get_context,
)

from functions.core import tracing

_RESERVED: Final = frozenset(RESERVED_LOG_ATTRS)
# What Python's json.loads accepts as a document's first character: the whitespace it
# skips, and the start of an object, array, string, number, literal, NaN or Infinity.
# A text starting with anything else is not JSON.
_JSON_FIRST: Final = frozenset(' \t\n\r{["-0123456789tfnNI')
# The one reserved-attribute key :meth:`JsonLineFormatter.fields_line` fills in itself.
_LEVEL_NAME: Final = "%(levelname)s"


class JsonLineFormatter(LambdaPowertoolsFormatter):
    """:class:`LambdaPowertoolsFormatter` without the work whose answer is known."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if options.get("json_serializer") is None:
            # json.dumps with these options builds this very encoder for every call.
            self.json_serializer = json.JSONEncoder(
                default=self.json_default,
                separators=(",", ":"),
                indent=self.json_indent,
                ensure_ascii=False,
            ).encode
        # Only our own compact serializer's output can have members spliced into it.
        self._spliceable = options.get("json_serializer") is None and self.json_indent is None

    def _extract_log_message(self, log_record: logging.LogRecord) -> Any:
        message = log_record.msg
        if (
            isinstance(message, str)
            and not log_record.args
            and message[:1] not in _JSON_FIRST
            and self.json_deserializer is json.loads
        ):
            return message
        return super()._extract_log_message(log_record)

    def _extract_log_keys(self, log_record: logging.LogRecord) -> dict[str, Any]:
        # Powertools' own steps and order, with the reserved names in a set.
        record_dict = log_record.__dict__.copy()
        record_dict["asctime"] = self.formatTime(record=log_record)
        formatted_log: dict[str, Any] = {}
        for keys in (self.log_format, _get_context().get()):
            for key, value in keys.items():
                if value and key in _RESERVED:
                    if not isinstance(value, str):
                        raise ValueError(
                            "Logging keys that override reserved log attributes need to be "
                            f"type 'str', instead got '{type(value).__name__}'"
                        )
                    formatted_log[key] = value % record_dict
                else:
                    formatted_log[key] = value
        formatted_log.update({k: v for k, v in record_dict.items() if k not in _RESERVED})
        _name_trace(formatted_log)
        return formatted_log

    def _get_latest_trace_id(self) -> str | None:
        """X-Ray's trace id for the line: the current delivery's, when it is sampled
        (its segments are in X-Ray), else the invocation's (Powertools' own); None
        while tracing is off (the key is switched off)."""
        invocation = super()._get_latest_trace_id()
        if invocation is None:
            return None  # tracing off (the default): no context lookup per line
        current = tracing.current()
        if current is None or not current.sampled:
            return invocation
        trace_id = current.trace_id
        return f"1-{trace_id[:8]}-{trace_id[8:]}"

    def fields_line(
        self, level: int, message: str, fields: Mapping[str, Any], encoded: str = ""
    ) -> str | None:
        """What :meth:`format` writes for a record of ``level`` and ``message`` with
        ``fields`` as its extras (no arguments, exception or stack), made without one.

        ``encoded``: more extras after ``fields``, already JSON members (``"k":v,...``),
        for a part that never changes and is serialized once (an EMF directive); their
        names must be new to the line.

        None when the line needs the record after all: a message that may be JSON, or a
        key (appended, or from the thread context) that formats a record attribute
        other than the level name. The caller then logs the record as usual.
        """
        line = self._fields_head(level, message, fields)
        if line is None or (encoded and not self._spliceable):
            return None
        # format() then sets the message (in its place, else after the extras), the
        # exception keys to what the extras hold (no change here), the stack trace to
        # None and the trace id (replaced in place, else after the extras); None is left
        # out. Written without comprehensions: each one is a function call per line.
        tail: dict[str, Any] = {}
        if encoded and "message" not in line:
            tail["message"] = message
        else:
            line["message"] = message
        if self.serialize_stacktrace:
            line.pop("stack_trace", None)
        trace_id = self._get_latest_trace_id()
        if trace_id is None:
            line.pop("xray_trace_id", None)
        elif encoded and "xray_trace_id" not in line:
            tail["xray_trace_id"] = trace_id
        else:
            line["xray_trace_id"] = trace_id
        for key, value in list(line.items()):
            if value is None:
                del line[key]
        head = self.serialize(line)
        if not encoded:
            return head
        text = f"{head[:-1]},{encoded}}}" if line else f"{{{encoded}}}"
        return f"{text[:-1]},{self.serialize(tail)[1:]}" if tail else text

    def _fields_head(
        self, level: int, message: str, fields: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The formatter's keys (level name filled in) and then ``fields``, as
        :meth:`format` collects them; None when that needs a record."""
        if (
            message[:1] in _JSON_FIRST
            or self.json_deserializer is not json.loads
            # A record refuses "message" as an extra, and the formatter drops reserved ones.
            or "message" in fields
            or not _RESERVED.isdisjoint(fields)
        ):
            return None
        line: dict[str, Any] = {}
        for keys in (self.log_format, _get_context().get()):
            for key, value in keys.items():
                if value and key in _RESERVED:
                    if value != _LEVEL_NAME:
                        return None
                    line[key] = logging.getLevelName(level)
                else:
                    line[key] = value
        line.update(fields)
        _name_trace(line)
        return line


def _name_trace(line: dict[str, Any]) -> None:
    """``trace_id``: the current delivery's trace, unless the line names one itself."""
    if "trace_id" not in line:
        current = tracing.current()
        if current is not None:
            line["trace_id"] = current.trace_id
