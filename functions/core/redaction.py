"""Masking secrets in log records: the second line of defence.

Nothing should log a secret in the first place: handlers log fixed fields, and the
libraries that can print requests and responses are held at WARNING
(:mod:`functions.core.observability`). :class:`RedactingFilter` masks what slips
through anyway, on every handler it is installed on:

* anything shaped like a signing secret (``whsec_`` + base64) or a bearer credential;
* every secret value this container has loaded (:func:`remember_secret`): the MCP
  token has no fixed prefix, so only its value can find it.

A record is rewritten in place, message (formatted with its arguments), extras (nested
in dicts and lists too), stack text and, when it holds a secret, the exception text.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
from types import TracebackType
from typing import Final

REDACTED: Final = "[redacted]"
# Shorter values match too much ordinary text; no real secret is that short.
MIN_REMEMBERED_LENGTH: Final = 8
# A bearer credential is any run of visible characters up to a quote, a backslash or a
# separator (the token validator allows every visible ASCII character).
_SHAPES: Final = r"whsec_[A-Za-z0-9+/=_-]+|(?i:bearer)\s+[^\s'\"\\,;]+"
# The attributes every record has; extras are everything else.
_STANDARD_ATTRIBUTES: Final = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


# Substrings every match of the pattern contains, checked first: ``in`` runs at C
# speed, while the pattern (a case-insensitive alternative among literals) steps
# through the text character by character, about 11 µs for a request's log line.
# Only "bearer" ignores case, and no character but B or b matches (?i:b) (nor for
# e, a, r), so the lower-cased text holds "bearer" wherever the pattern finds it.
_SHAPE_MARK: Final = "whsec_"
# Values walked in one search before giving up on it; a log record holds a few dozen.
_MAX_WALKED: Final = 100_000
_BEARER_MARK: Final = "bearer"


class _Secrets:
    """The remembered values and the one pattern that finds them and the shapes.

    ``state`` (pattern, remembered literals) is replaced as one object, so a reader
    never pairs one version's literals with another's pattern.
    """

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()
        self.state: tuple[re.Pattern[str], tuple[str, ...]] = (re.compile(_SHAPES), ())

    def add(self, value: str) -> None:
        # Also the forms json.dumps gives it (a quote or a backslash escaped, other
        # characters as they are or as \u escapes), as it appears inside a logged JSON
        # document: a JSON line holds a secret's value exactly when it holds one of them.
        forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
        with self._lock:
            new = {f for f in forms if len(f) >= MIN_REMEMBERED_LENGTH} - self._values
            if not new:
                return
            self._values |= new
            # Longest first: no value hides a longer one that contains it.
            literals = tuple(sorted(self._values, key=len, reverse=True))
            pattern = re.compile("|".join([*map(re.escape, literals), _SHAPES]))
            self.state = (pattern, literals)

    def pattern_if_needed(self, text: str) -> re.Pattern[str] | None:
        """The pattern when ``text`` may hold a match; None when it surely holds none."""
        pattern, literals = self.state
        if _SHAPE_MARK in text or _BEARER_MARK in text.lower():
            return pattern
        for literal in literals:  # a loop, not any(): no generator per log line
            if literal in text:
                return pattern
        return None


_SECRETS: Final = _Secrets()


def remember_secret(value: str) -> None:
    """Mask ``value`` wherever it appears from now on (a secret this container loaded)."""
    _SECRETS.add(value)


def may_hold_secret(text: str) -> bool:
    """False when ``text`` surely holds no secret shape and no remembered secret.

    Sound for a JSON document too: escaping leaves the shapes' marks as they are, and
    every remembered secret is also remembered in its escaped forms.
    """
    return _SECRETS.pattern_if_needed(text) is not None


def redact(text: str) -> str:
    """``text`` with every secret shape and remembered secret masked."""
    pattern = _SECRETS.pattern_if_needed(text)
    return text if pattern is None else pattern.sub(REDACTED, text)


def holds_secret(value: object) -> bool:
    """Whether ``value`` (a string, or a dict, list or tuple holding strings) would be
    changed by :func:`redact_value`; a search, without building anything.

    One search over every string joined by NUL: a match inside any one string is a
    match of the joined text, so nothing is missed (a match across a joint, which no
    real secret makes, only costs the caller the rebuild it would then skip).
    """
    strings: list[str] = []
    pending = [value]
    for _ in range(_MAX_WALKED):
        if not pending:
            break
        item = pending.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    else:
        # Too much to walk, or a container that holds itself: the caller rebuilds,
        # as it does for a secret (and as this filter always has for such a value).
        return True
    text = "\0".join(strings)
    pattern = _SECRETS.pattern_if_needed(text)
    return pattern is not None and pattern.search(text) is not None


def redact_value(value: object) -> object:
    """A string redacted; a dict, list or tuple rebuilt with its strings redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_value(k): redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(v) for v in value)
    return value


class RedactingFilter(logging.Filter):
    """Rewrites a record before the handler it sits on formats it.

    It must sit on handlers: a logger's filters see only the records logged on that
    logger itself, not those propagated from its children (botocore's reach the root
    logger's handlers without passing the root logger's filters).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.args:
            # Format first: an argument may be bytes or a dict holding the secret.
            try:
                message = record.getMessage()
            except (TypeError, ValueError):  # a malformed format call
                message = f"{record.msg} {record.args!r}"
            record.msg, record.args = redact(message), None
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRIBUTES}
        # One search over the message and every extra first, and a rebuild only when a
        # secret is there: nearly every record is clean, and walking it value by value
        # was most of this filter's cost per request.
        if holds_secret((record.msg, extras)):
            if holds_secret(record.msg):
                record.msg = redact_value(record.msg)  # Powertools logs dicts as they are
            for attr, value in extras.items():
                if holds_secret(value):
                    setattr(record, attr, redact_value(value))
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        if record.exc_info and record.exc_info[1] is not None:
            _redact_exception(record, record.exc_info[0], record.exc_info[1], record.exc_info[2])
        return True


def _redact_exception(
    record: logging.LogRecord,
    kind: type[BaseException] | None,
    error: BaseException,
    trace: TracebackType | None,
) -> None:
    """Only when the exception text holds a secret: it then goes into the message,
    masked, instead of the exception (which every formatter would print as it is)."""
    text = "".join(traceback.format_exception(kind, error, trace)).rstrip("\n")
    masked = redact(text)
    if masked != text:
        record.msg = f"{record.msg}\n{masked}"
        record.exc_info = None
        record.exc_text = None


def install_on(handlers: list[logging.Handler]) -> None:
    """Put one :class:`RedactingFilter` on each of ``handlers`` (at most one each)."""
    for handler in handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
