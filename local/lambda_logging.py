"""Lambda's handling of a function's logs, emulated in each child process that runs handlers.

With the JSON log format (``infra/lambda_function.py``), Lambda's Python runtime does
this before it imports the handler: it puts a handler on the root logger that writes
each record as one JSON line with a ``level``, and sets the root logger to the
application log level (``AWS_LAMBDA_LOG_LEVEL``); nothing else. Lambda then filters
what the function writes (AWS docs, "Log-level filtering"): a JSON line whose
``level`` is below the application log level is dropped, and a line without a valid
``level`` (an EMF metric line, plain text) counts as INFO.

:func:`install` does both in this process. Call it first thing in a child, before any
handler module is imported, as Lambda does: Powertools keeps the stream it finds at
import, and the handlers' cold start puts its redaction on the root handlers it finds.
Standard library only (``functions.core.log_levels`` is too).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import traceback
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from functions.core import env_names
from functions.core.log_levels import level_number

LAMBDA_JSON_FORMAT = "JSON"
# The application log level Lambda applies when the JSON format has none configured.
DEFAULT_APPLICATION_LEVEL = logging.INFO
# What Lambda's JSON formatter leaves out of a record's extras (awslambdaric's list).
_RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {"message", "aws_request_id"}


def line_level(line: str) -> int:
    """The level Lambda's filter gives one line: its JSON ``level``, else INFO."""
    stripped = line.strip()
    if stripped.startswith("{") and '"level"' in stripped:  # else no level to read
        try:
            document = json.loads(stripped)
        except ValueError:
            return logging.INFO
        if isinstance(document, dict) and isinstance(document.get("level"), str):
            return level_number(document["level"]) or logging.INFO
    return logging.INFO


class LevelFilteredStream:
    """A text stream that passes on only the whole lines Lambda's filter keeps.

    Lines are collected per thread (``print`` writes the text and the newline
    separately, and invocations overlap in the local runtime's threads), so a line
    reaches the underlying stream whole or not at all.
    """

    def __init__(self, stream: TextIO, threshold: int) -> None:
        self.stream = stream
        self.threshold = threshold
        self._pending = threading.local()
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        pending: str = getattr(self._pending, "text", "") + text
        *lines, rest = pending.split("\n")
        self._pending.text = rest
        kept = [line + "\n" for line in lines if line_level(line) >= self.threshold]
        if kept:
            with self._lock:
                self.stream.write("".join(kept))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Pass on this thread's unfinished line too (a flush ends it), then flush."""
        rest: str = getattr(self._pending, "text", "")
        if rest:
            self._pending.text = ""
            self.write(rest + "\n")
        with self._lock:
            self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class LambdaJsonFormatter(logging.Formatter):
    """One JSON line per record, shaped as Lambda's Python runtime writes it."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": logging.getLevelName(min(50, max(0, record.levelno)) // 10 * 10),
            "message": record.getMessage(),
            "logger": record.name,
        }
        if record.exc_info and record.exc_info[1] is not None:
            document["errorType"] = type(record.exc_info[1]).__name__
            document["errorMessage"] = str(record.exc_info[1])
            document["stackTrace"] = traceback.format_tb(record.exc_info[2])
        for name, value in vars(record).items():
            if name not in _RESERVED and name not in document:
                document[name] = value
        return json.dumps(document, default=str, ensure_ascii=False)


def install(environ: Mapping[str, str] = os.environ) -> None:
    """Lambda's runtime set-up and log filter in this process (JSON format only:
    with the text format Lambda filters nothing and leaves the root logger alone)."""
    if environ.get(env_names.ENV_LAMBDA_LOG_FORMAT, "").upper() != LAMBDA_JSON_FORMAT:
        return
    threshold = level_number(environ.get(env_names.ENV_LAMBDA_LOG_LEVEL)) or (
        DEFAULT_APPLICATION_LEVEL
    )
    sys.stdout = LevelFilteredStream(sys.stdout, threshold)
    sys.stderr = LevelFilteredStream(sys.stderr, threshold)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(LambdaJsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(threshold)
