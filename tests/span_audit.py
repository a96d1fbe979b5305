"""The span audit: no span may hold a body, a secret, a token or a full URL.

The log rules hold for traces (docs/security.md): a span's name, attributes and links
are checked with the log audit's rules (:func:`tests.log_audit.check_text`: secret and
bearer shapes, known secrets and tokens, registered bodies, signatures and paths), and
with one of their own: no URL at all (an MCP URL or a notify URL may carry a token in
its path or query; ``functions.core.tracing`` keeps none, and this checks that it
kept none).

:class:`CollectedSpans` is an in-process exporter for the integration tests;
:func:`check_span_file` reads a local stack's span file (``tests/e2e/stacks.audited``).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from functions.core import otlp_json
from functions.core.tracing import SpanRecord
from tests import log_audit

_URL_SHAPE = re.compile(r"[a-z][a-z0-9+.-]*://", re.IGNORECASE)


class CollectedSpans:
    """Keeps every exported span (``functions.core.tracing.install``)."""

    def __init__(self) -> None:
        self._spans: list[SpanRecord] = []
        self._lock = threading.Lock()

    def export(self, span: SpanRecord) -> None:
        with self._lock:
            self._spans.append(span)

    def flush(self) -> None:
        """Nothing is buffered."""

    @property
    def spans(self) -> list[SpanRecord]:
        with self._lock:
            return list(self._spans)


def span_texts(span: SpanRecord) -> Iterator[str]:
    """Every piece of text a span carries."""
    yield span.name
    for key, value in span.attributes.items():
        yield key
        if isinstance(value, str):
            yield value


def check_spans(spans: Iterable[SpanRecord]) -> list[str]:
    """The rules the spans break, as ``rule: span name`` (never the value itself)."""
    findings: list[str] = []
    for span in spans:
        for text in span_texts(span):
            rules = log_audit.check_text(text)
            if _URL_SHAPE.search(text):
                rules.append("url")
            findings.extend(f"{rule}: {span.name}" for rule in rules)
    return sorted(set(findings))


def read_span_file(path: str | Path) -> list[SpanRecord]:
    """Every span record in a span file (its raw lines are checked by the caller)."""
    spans: list[SpanRecord] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            spans.extend(otlp_json.spans_of(json.loads(line)))
        except ValueError:
            continue  # cut short by a killed writer: its raw text is still checked
    return spans


def check_span_file(path: str | Path) -> list[str]:
    """The rules a span file breaks: its spans', and its raw lines' (the log audit's
    own, on the whole OTLP line: nothing else may have slipped in beside the spans)."""
    raw = [
        f"{rule}: line {number}"
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1)
        for rule in log_audit.check_output(line)
    ]
    return sorted(set(raw)) + check_spans(read_span_file(path))
