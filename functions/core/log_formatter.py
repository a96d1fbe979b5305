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

The output is the stock formatter's, key for key (tests/unit/test_log_formatter.py
compares them).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final

from aws_lambda_powertools.logging.formatter import (
    RESERVED_LOG_ATTRS,
    LambdaPowertoolsFormatter,
    _get_context,
)

_RESERVED: Final = frozenset(RESERVED_LOG_ATTRS)
# What Python's json.loads accepts as a document's first character: the whitespace it
# skips, and the start of an object, array, string, number, literal, NaN or Infinity.
# A text starting with anything else is not JSON.
_JSON_FIRST: Final = frozenset(' \t\n\r{["-0123456789tfnNI')


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
        return formatted_log
