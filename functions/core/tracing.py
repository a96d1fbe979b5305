"""Spans: what took time or money in one delivery, recorded under its trace.

A span is opened with :func:`span` (a context manager) and becomes the *current* span
of its context (a ``ContextVar``: a thread started by ``asyncio.to_thread`` or a task
scheduled with ``run_coroutine_threadsafe`` sees its caller's), so a span opened inside
it is its child. Finished spans go to the installed :class:`SpanExporter` (the local
stack's span file, an OTLP/HTTP endpoint, X-Ray's daemon; none: nothing is kept, and a
span costs a few microseconds). A trace whose flags say unsampled (``-00``: decided
once, at the delivery's receipt) goes to none of them, from any function.

Attributes are ids, names, counts and codes. A string that looks like a URL is never
kept (an MCP URL or a notify URL may hold a token: docs/security.md), and no caller
passes a body, a secret or a token; ``tests/span_audit.py`` checks a whole run's spans.

Standard library only: the receiver records its accept span on its cold path.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, Protocol

from functions.core.trace_context import SpanContext, new_root, parse_traceparent

AttributeValue = str | int | float | bool

# A string attribute is an id or a code: anything longer is cut.
MAX_ATTRIBUTE_CHARS: Final = 200
URL_OMITTED: Final = "[url omitted]"

# Span names, one per thing that takes time (docs/operations.md, "Following a delivery").
SPAN_ACCEPT: Final = "accept"
SPAN_RELAY: Final = "relay"
SPAN_ATTEMPT: Final = "attempt"
SPAN_CLAIM: Final = "claim"
SPAN_FETCH: Final = "mcp.get_package"
SPAN_WORKFLOW: Final = "workflow"
SPAN_MODEL_TURN: Final = "model.turn"
SPAN_TOOL: Final = "tool"
SPAN_EFFECT: Final = "effect"
SPAN_APPROVAL_WAIT: Final = "approval.wait"
SPAN_RECONCILER_RUN: Final = "reconciler.run"
SPAN_RECONCILER_REQUEUE: Final = "reconciler.requeue"
# An operator's action on one delivery: ``operator.requeue``, ``operator.approve``, ...
SPAN_OPERATOR_PREFIX: Final = "operator."


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span as exported.

    Attributes:
        end_ns: None for a span announced at its start (an attempt), before it ends:
            a worker killed mid-attempt leaves that record, and no other.
    """

    name: str
    context: SpanContext
    parent_span_id: str | None
    start_ns: int
    end_ns: int | None
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    links: tuple[SpanContext, ...] = ()
    error: bool = False


class SpanExporter(Protocol):
    """Where finished (and announced) spans go."""

    def export(self, span: SpanRecord) -> None: ...

    def flush(self) -> None:
        """Send what is buffered (at the end of an invocation)."""
        ...


class Span:
    """An open span: its context, and the attributes its body adds (kept only when the
    span is recorded: sampled, with an exporter)."""

    __slots__ = ("attributes", "context", "recorded")

    def __init__(
        self, context: SpanContext, attributes: dict[str, AttributeValue], *, recorded: bool
    ) -> None:
        self.context = context
        self.attributes = attributes
        self.recorded = recorded

    def set(self, key: str, value: AttributeValue | None) -> None:
        """Add an attribute (None: leave it out)."""
        if value is not None and self.recorded:
            self.attributes[key] = _safe(value)


_current: ContextVar[SpanContext | None] = ContextVar("relaylink_current_span", default=None)
_exporter: SpanExporter | None = None
_exporter_lock = threading.Lock()


def install(exporter: SpanExporter | None) -> None:
    """Send spans to ``exporter`` from now on (None: keep none)."""
    global _exporter  # noqa: PLW0603 (one exporter per process, as a tracer provider)
    with _exporter_lock:
        _exporter = exporter


def installed() -> SpanExporter | None:
    return _exporter


def flush() -> None:
    """Hand the exporter's buffer on; never raises (tracing must not fail the work)."""
    exporter = _exporter
    if exporter is not None:
        # A collector's trouble is never the delivery's.
        with contextlib.suppress(Exception):
            exporter.flush()


def current() -> SpanContext | None:
    """The span open in this context, if any."""
    return _current.get()


def current_traceparent() -> str | None:
    context = _current.get()
    return None if context is None else context.traceparent


@contextmanager
def within(traceparent: str | None) -> Iterator[None]:
    """The trace ``traceparent`` names is current in the block, without a span of its
    own: the lines logged about one delivery of a batch name its trace (none: the
    block runs as it is)."""
    context = parse_traceparent(traceparent)
    if context is None:
        yield
        return
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)


def parent_from(traceparent: str | None) -> SpanContext | None:
    """The span context a stored ``traceparent`` names (None: absent or invalid)."""
    return parse_traceparent(traceparent)


def span(
    name: str,
    *,
    parent: SpanContext | None = None,
    attributes: Mapping[str, AttributeValue | None] | None = None,
    links: Sequence[SpanContext] = (),
    announce: bool = False,
    sampled: bool = True,
) -> _Scope:
    """Open a span; it is current inside the block, exported when the block ends.

    A span of an unsampled trace (flags ``-00``) is current as any other, so its
    context travels on, but nothing of it is exported.

    Args:
        parent: its parent; None: the current span, or (none open) a new trace.
        announce: export a record at the start too, so that a process killed inside
            the block still leaves the span (without an end) in the trace.
        sampled: a new trace's sampling decision (ignored when there is a parent,
            whose trace decided already).
    """
    return _Scope(
        name, parent=parent, attributes=attributes, links=links, announce=announce,
        sampled=sampled,
    )  # fmt: skip


class _Scope:
    """``span``'s block (a class, not a generator: every port call opens one)."""

    __slots__ = (
        "_announce", "_attributes", "_links", "_name", "_opened", "_parent", "_sampled",
        "_start_ns", "_token",
    )  # fmt: skip
    # Set on entry.
    _opened: Span
    _start_ns: int
    _token: Token[SpanContext | None]

    def __init__(
        self,
        name: str,
        *,
        parent: SpanContext | None,
        attributes: Mapping[str, AttributeValue | None] | None,
        links: Sequence[SpanContext],
        announce: bool,
        sampled: bool,
    ) -> None:
        self._name, self._parent, self._attributes = name, parent, attributes
        self._links, self._announce, self._sampled = links, announce, sampled

    def __enter__(self) -> Span:
        parent = self._parent or _current.get()
        self._parent = parent
        context = new_root(sampled=self._sampled) if parent is None else parent.child()
        # Nothing records the span (no exporter: a deployed stack with tracing off, or
        # an unsampled trace): its context travels on, its attributes are not made.
        recorded = _exporter is not None and context.sampled
        attributes = self._attributes
        opened = Span(
            context,
            {k: _safe(v) for k, v in attributes.items() if v is not None}
            if recorded and attributes
            else {},
            recorded=recorded,
        )
        self._opened = opened
        self._start_ns = time.time_ns()
        if self._announce and recorded:
            _export(
                SpanRecord(
                    self._name, context, self._parent_id(), self._start_ns, None,
                    dict(opened.attributes),
                )
            )  # fmt: skip
        self._token = _current.set(context)
        return opened

    def _parent_id(self) -> str | None:
        return None if self._parent is None else self._parent.span_id

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        opened = self._opened
        error = False
        if exc is not None:
            # An exception that is no failure (``span_error = False``: parking for a
            # person) ends the span as it is; any other marks it failed. The type only:
            # a message may quote input.
            error = getattr(exc, "span_error", True) is not False
            opened.set("error.type" if error else "ended_by", type(exc).__name__)
        _current.reset(self._token)
        # Without an exporter (a deployed stack, tracing off) or for an unsampled trace
        # only the context is kept.
        context = opened.context
        if opened.recorded:
            _export(
                SpanRecord(
                    self._name,
                    context,
                    self._parent_id(),
                    self._start_ns,
                    time.time_ns(),
                    dict(opened.attributes),
                    tuple(self._links),
                    error,
                )
            )


def record(
    name: str,
    *,
    parent: SpanContext,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, AttributeValue | None] | None = None,
    links: Sequence[SpanContext] = (),
    context: SpanContext | None = None,
    error: bool = False,
) -> SpanContext:
    """Export a span measured elsewhere (a wait that began in another process, a batch
    send that carried it).

    Args:
        context: its own context, when it was handed on before the span ended (a
            message attribute); None: a new child of ``parent``.
    """
    context = context or parent.child()
    _export(
        SpanRecord(
            name,
            context,
            parent.span_id,
            start_ns,
            max(end_ns, start_ns),
            {k: _safe(v) for k, v in (attributes or {}).items() if v is not None},
            tuple(links),
            error,
        )
    )
    return context


def _export(record_: SpanRecord) -> None:
    exporter = _exporter
    if exporter is None or not record_.context.sampled:
        return  # an unsampled trace exports nothing, wherever its spans are made
    with contextlib.suppress(Exception):  # a collector's trouble is never the delivery's
        exporter.export(record_)


def _safe(value: AttributeValue) -> AttributeValue:
    if not isinstance(value, str):
        return value
    if "://" in value:
        return URL_OMITTED
    return value[:MAX_ATTRIBUTE_CHARS]
