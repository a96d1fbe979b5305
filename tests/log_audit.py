"""The log audit: no captured log line may hold a body, a secret, the MCP token or a URL token.

docs/contract.md (Request) forbids logging the receiver URL (its path may hold a token), bodies,
header values and secrets. ``tests/conftest.py``
installs :class:`LogCapture` around every test and fails the test when
:func:`findings` reports anything, for two streams:

* every ``logging`` record that reaches a handler (the root logger's, Powertools', any
  non-propagating logger's), message, arguments, extras and formatted exception
  included, as it was logged (before any redaction);
* everything captured from stdout and stderr (Powertools writes its JSON lines and
  the EMF metrics there), read from the test report's captured sections.

A finding names the rule and where it was seen, never the sensitive value itself, so
that the failure report does not become the leak.

What counts as sensitive (:class:`Sensitive`):

* anything shaped like a signing secret (``whsec_`` + base64) or a bearer credential;
* every known test secret's base64 key part and its decoded key text (``local/testkit/builders``
  secrets, the shared vectors' secrets, the MCP test tokens), plus whatever a test
  registers with :func:`register_secret`;
* request bodies: every shared vector body, whatever a test registers with
  :func:`register_body`, and anything shaped like a serialised RelayLink body (a string
  value that itself contains a ``"delivery_id":`` key);
* the receiver URL's path and its token segment (the builders' default path, plus
  :func:`register_path`);
* request signatures (:func:`register_signature`).

Redaction (``functions/core/redaction.py``) is the second line of defence, so the audit
judges the first: the capture is the first handler of every logger it is on and keeps
a copy of each record, so that the redacting filter on later handlers cannot hide a
leak from it.
"""

from __future__ import annotations

import base64
import binascii
import copy
import inspect
import json
import logging
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from local.testkit import builders, vectors

# Signing-secret shape; a redacted "whsec_" with nothing after it is not a secret.
_SECRET_SHAPE = re.compile(r"whsec_[A-Za-z0-9+/=_-]{8,}")
# "Bearer <credential>"; the redaction filter's "[redacted]" does not match.
_BEARER_SHAPE = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{4,}")
# A serialised body: a string that contains a JSON "delivery_id" key (quotes escaped or not).
_BODY_SHAPE = re.compile(r"\\?\"delivery_id\\?\"\s*:")
# Shorter fragments match too much ordinary text to mean anything.
MIN_NEEDLE_LENGTH = 8
# The integration tests' MCP server token (tests/integration/conftest.py; conftest
# modules are not importable).
KNOWN_MCP_TOKENS = ("test-mcp-token",)
_RECORD_STANDARD = frozenset(vars(logging.makeLogRecord({})))


@dataclass
class Sensitive:
    """The values no log may contain, by rule name."""

    needles: dict[str, set[str]] = field(default_factory=dict)
    _patterns: list[tuple[str, re.Pattern[str]]] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, rule: str, value: str) -> None:
        if len(value) < MIN_NEEDLE_LENGTH:
            return
        with self._lock:
            self.needles.setdefault(rule, set()).add(value)
            self._patterns = None

    def patterns(self) -> list[tuple[str, re.Pattern[str]]]:
        """One alternation per rule: a search per text, however many needles are known."""
        with self._lock:
            if self._patterns is None:
                self._patterns = [
                    (rule, _alternation(values)) for rule, values in self.needles.items()
                ]
            return self._patterns


def _alternation(values: Iterable[str]) -> re.Pattern[str]:
    # Longest first, so that no needle hides a longer one that contains it.
    return re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))


SENSITIVE = Sensitive()


def register_secret(secret: str) -> None:
    """A signing secret, an API token or any other credential a test uses."""
    SENSITIVE.add("secret", secret)
    if secret.startswith("whsec_"):
        key_part = secret.removeprefix("whsec_")
        SENSITIVE.add("secret", key_part)
        try:
            key = base64.b64decode(key_part, validate=True)
        except binascii.Error:
            return
        # Test keys are often readable text: their decoded form must not leak either.
        if key.isascii() and key.decode().isprintable():
            SENSITIVE.add("secret", key.decode())


def register_token(token: str) -> None:
    """The MCP (RelayLink API) token."""
    SENSITIVE.add("mcp_token", token)


def register_body(body: bytes | str) -> None:
    """A request body (exact text, when it is UTF-8)."""
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError:
            return
    SENSITIVE.add("body", body)
    # Powertools and json.dumps escape quotes and non-ASCII: look for that form too.
    SENSITIVE.add("body", json.dumps(body)[1:-1])


def register_signature(header: str) -> None:
    """An ``X-RelayLink-Signature`` value: each ``v1,<base64>`` signature's base64 part."""
    for signature in header.split():
        SENSITIVE.add("signature", signature.partition(",")[2] or signature)


def register_path(path: str) -> None:
    """A receiver URL path: the whole path and its last segment (the token)."""
    SENSITIVE.add("url_path", path)
    SENSITIVE.add("url_path", path.rstrip("/").rsplit("/", 1)[-1])


def _register_defaults() -> None:
    for secret in (builders.SECRET, builders.OTHER_SECRET):
        register_secret(secret)
    for token in KNOWN_MCP_TOKENS:
        register_token(token)
    for api_event in (builders.http_api_event, builders.rest_api_event):
        register_path(str(inspect.signature(api_event).parameters["path"].default))
    try:
        shared = vectors.load_vectors()
    except FileNotFoundError:  # the shared directory is optional for this audit
        return
    for case in shared.cases:
        for secret in case.secrets:
            register_secret(secret)
        register_body(case.request.body)
    for sequence in shared.sequences:
        for secret in sequence.secrets:
            register_secret(secret)
        for step in sequence.steps:
            register_body(step.body)


_register_defaults()


# --- Checking ----------------------------------------------------------------------


def check_text(text: str, *, extra: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The rules ``text`` breaks (rule names only; empty when clean).

    Args:
        text: one log message, extra value, or captured output line.
        extra: more ``(rule, value)`` needles for this check only.
    """
    broken: list[str] = []
    if _SECRET_SHAPE.search(text):
        broken.append("secret_shape")
    if _BEARER_SHAPE.search(text):
        broken.append("bearer_shape")
    if _BODY_SHAPE.search(text):
        broken.append("body_shape")
    for rule, pattern in SENSITIVE.patterns():
        if rule not in broken and pattern.search(text):
            broken.append(rule)
    for rule, needle in extra:
        if rule not in broken and len(needle) >= MIN_NEEDLE_LENGTH and needle in text:
            broken.append(rule)
    return broken


def record_texts(record: logging.LogRecord) -> Iterator[str]:
    """Every piece of text a handler could write for ``record``."""
    try:
        yield record.getMessage()
    except (TypeError, ValueError):  # a malformed format call: check the parts instead
        yield str(record.msg)
        yield repr(record.args)
    for name, value in vars(record).items():
        if name not in _RECORD_STANDARD:
            yield from _strings(value)
    if record.exc_info and record.exc_info[1] is not None:
        yield logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        yield record.exc_text
    if record.stack_info:
        yield record.stack_info


def check_record(record: logging.LogRecord, *, extra: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The rules one log record breaks."""
    needles = list(extra)
    broken: list[str] = []
    for text in record_texts(record):
        for rule in check_text(text, extra=needles):
            if rule not in broken:
                broken.append(rule)
    return broken


def check_output(output: str, *, extra: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The rules captured stdout/stderr breaks, line by line.

    A JSON log line is checked value by value (its own keys would otherwise look like
    a body); any other line is checked whole.
    """
    needles = list(extra)
    broken: list[str] = []
    for line in output.splitlines():
        texts = list(_json_strings(line))
        # The raw line is checked too, except for the body shape: a JSON log line's own
        # "delivery_id" key is not a body.
        hits = [r for r in check_text(line, extra=needles) if r != "body_shape"]
        if not texts:
            hits = check_text(line, extra=needles)
        for text in texts:
            hits.extend(check_text(text, extra=needles))
        broken.extend(rule for rule in hits if rule not in broken)
    return broken


def _json_strings(line: str) -> Iterator[str]:
    stripped = line.strip()
    if not stripped.startswith("{"):
        return
    try:
        data = json.loads(stripped)
    except ValueError:
        return
    yield from _strings(data)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield repr(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _strings(item)
    elif value is not None and not isinstance(value, (int, float, bool)):
        yield repr(value)


# --- Capturing ---------------------------------------------------------------------


class LogCapture(logging.Handler):
    """Keeps every record that reaches a logger with handlers of its own (the root
    logger, Powertools' logger, any that does not propagate), as it was logged."""

    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.records: list[logging.LogRecord] = []
        self._seen: dict[int, logging.LogRecord] = {}  # by identity: one copy per record
        self._attached: list[logging.Logger] = []

    def emit(self, record: logging.LogRecord) -> None:
        if self._seen.get(id(record)) is record:
            return  # met again on its way up to the root logger
        self._seen[id(record)] = record
        # A copy: a later handler's filter may rewrite the record itself.
        self.records.append(copy.copy(record))

    def install(self) -> None:
        loggers = [logging.getLogger()]
        loggers += [
            logger
            for logger in list(logging.Logger.manager.loggerDict.values())
            if isinstance(logger, logging.Logger) and (logger.handlers or not logger.propagate)
        ]
        for logger in loggers:
            # First: the handlers before it would otherwise have rewritten the record.
            logger.handlers.insert(0, self)
            self._attached.append(logger)

    def uninstall(self) -> None:
        for logger in self._attached:
            logger.removeHandler(self)
        self._attached.clear()

    def findings(self) -> list[str]:
        """One line per offending record: rules and the record's origin, never its text."""
        found: list[str] = []
        for record in self.records:
            broken = check_record(record)
            if broken:
                found.append(
                    f"{record.name}:{record.filename}:{record.lineno} breaks {', '.join(broken)}"
                )
        return found
