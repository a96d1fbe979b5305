"""Logger and metrics shared by every function, and the log levels they run under.

Handlers never log events, bodies, header values or paths (docs/contract.md,
Request: the receiver URL may hold a token). Three things keep the libraries from
doing it for them, set up here at import, that is at cold start, after Lambda's
runtime has configured the root logger (docs/security.md, "Log levels"):

* the libraries that can print a request or a response are held at WARNING
  (``PAYLOAD_LOGGERS``) whatever the function's log level: Lambda sets the *root*
  logger to the application log level, and botocore at DEBUG prints every response
  body, GetSecretValue's included;
* the function's level (``log_level``: the stricter of Lambda's application log level
  and ``POWERTOOLS_LOG_LEVEL``) is our logger's, and the root logger's at least;
* a redacting filter (:mod:`functions.core.redaction`) sits on our logger's handler
  and on every handler of the root logger: the second line of defence.

Metrics never depend on the log level: Lambda's filter passes an EMF line (it has no
``level``, so Lambda takes it for INFO) because the application log level is never
above INFO (``infra.environments.application_log_level``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Final, TextIO

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.filters import SuppressFilter
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.shared.functions import strtobool

from functions.core import env_names, metric_names, redaction
from functions.core.log_formatter import JsonLineFormatter
from functions.core.log_levels import function_log_level

# Loggers of the libraries that can print what they send or receive: botocore (every
# request and response body), the HTTP clients (URLs, headers), the MCP SDK (every
# message), and Powertools' own (record-processing exceptions).
PAYLOAD_LOGGERS: Final = (
    "botocore",
    "boto3",
    "s3transfer",
    "urllib3",
    "httpx",
    "httpcore",
    "httpx2",
    "httpcore2",
    "mcp",
    "anyio",
    "aws_lambda_powertools",
)
# The execution role's credentials, which Lambda puts in the environment.
CREDENTIAL_VARIABLES: Final = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def hold_payload_loggers() -> None:
    """Keep every ``PAYLOAD_LOGGERS`` logger at WARNING (explicit levels: the root
    logger's level, which Lambda sets, no longer reaches them)."""
    for name in PAYLOAD_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


hold_payload_loggers()  # before Powertools logs its own set-up below
_FORMATTER: Final = JsonLineFormatter()
logger = Logger(service=metric_names.SERVICE, logger_formatter=_FORMATTER)
# CloudWatch stamps every log event with its time, and an exception's stack trace says
# where it was raised: the formatter's own timestamp and code location would only
# repeat them on every line (log ingestion is billed per byte, docs/cost.md).
logger.remove_keys(["timestamp", "location"])
# The standard logger under Powertools' (the one its methods log through).
_LINES: Final = logging.getLogger(logger.name)
_HANDLER: Final = logger.registered_handler
_ROOT: Final = logging.getLogger()
metrics = Metrics(namespace=metric_names.METRICS_NAMESPACE, service=metric_names.SERVICE)
# Read once: a function's environment is fixed for its container's life, and reading
# it on every request is a tenth of the receiver's per-request line (figure 2).
_METRICS_DISABLED: Final = is_metrics_disabled()


def apply_log_level(environ: Mapping[str, str]) -> None:
    """Our logger at the function's level, and the root logger no more verbose.

    Powertools lets Lambda's application log level win over ``POWERTOOLS_LOG_LEVEL``;
    the stack keeps Lambda's at INFO for WARNING and ERROR (metrics), so the stricter
    level is set on the logger itself.
    """
    level = function_log_level(environ)
    if level is None:
        return
    logging.getLogger(logger.name).setLevel(level)
    root = logging.getLogger()
    if root.getEffectiveLevel() < level:
        root.setLevel(level)


def install_redaction(environ: Mapping[str, str]) -> None:
    """The redacting filter on our handler and on every root handler (Lambda's own),
    and the role's credentials remembered as secrets."""
    for variable in CREDENTIAL_VARIABLES:
        if environ.get(variable):
            redaction.remember_secret(environ[variable])
    redaction.install_on([*logger.handlers, *logging.getLogger().handlers])


def apply_trace_setting(environ: Mapping[str, str]) -> None:
    """Lines carry the X-Ray trace id only while tracing is on.

    With tracing off (the stack's default, ``POWERTOOLS_TRACE_DISABLED=true``) Lambda
    still sets a trace id for every invocation, but it leads to no trace: leaving it
    out saves about 55 bytes on every line (log ingestion is billed per byte,
    docs/cost.md) and an environment read per line.
    """
    try:
        disabled = strtobool(environ.get(env_names.ENV_POWERTOOLS_TRACE_DISABLED, "false"))
    except ValueError:  # not a truth value: Powertools' tracer would refuse it, not us
        disabled = False
    if disabled:
        logger.append_keys(xray_trace_id=None)  # Powertools' switch: the key is left out
    else:
        logger.remove_keys(["xray_trace_id"])


apply_log_level(os.environ)
install_redaction(os.environ)
apply_trace_setting(os.environ)


@contextlib.contextmanager
def trace_in_logs(trace_id: str | None) -> Iterator[None]:
    """Every line logged in this context names the delivery's trace (``trace_id``: the
    W3C id, which is X-Ray's too), so Logs Insights and the trace join on it.

    Powertools keeps these keys in a ``ContextVar``: the lines of this attempt, and of
    the threads it starts with ``asyncio.to_thread``, carry it; a concurrent attempt's
    do not.
    """
    if trace_id is None:
        yield
        return
    logger.thread_safe_append_keys(trace_id=trace_id)
    try:
        yield
    finally:
        logger.thread_safe_remove_keys(["trace_id"])


def log_with_counts(
    level: int, message: str, fields: Mapping[str, object], counted: Iterable[str]
) -> None:
    """Log one line that also counts 1 of each metric named in ``counted`` (EMF).

    CloudWatch reads an embedded-metric record from any JSON log line with an
    ``_aws`` member, so the line that logs an outcome counts it too: one line and one
    formatting pass instead of two (the receiver's own cost per request is measured
    against a bare DynamoDB write, docs/benchmarks.md). Each line is self-contained:
    invocations that overlap in one process (the local runtime runs them in threads)
    never share a metrics buffer.
    """
    metric_list = sorted(set(counted))
    written = _LINES.isEnabledFor(level)
    if written and not _METRICS_DISABLED:
        timestamp = time.time_ns() // 1_000_000
        if _write_directly(level, message, fields, _emf_json(timestamp, tuple(metric_list))):
            return
        extra = {**fields, **_emf(timestamp, metric_list)}
    else:
        extra = dict(fields)
        # The line is filtered out (log level) or metrics are off: the metric takes
        # Powertools' own path, which honours POWERTOOLS_METRICS_DISABLED; the counts
        # only the logs keep, a line of their own.
        unpublished = [n for n in metric_list if n not in metric_names.PUBLISHED_METRICS]
        if unpublished and not _METRICS_DISABLED:
            print_counts(dict.fromkeys(unpublished, 1))
        for name in metric_list:
            if name not in metric_names.PUBLISHED_METRICS:
                continue
            with single_metric(
                name=name,
                unit=MetricUnit.Count,
                value=1,
                namespace=metric_names.METRICS_NAMESPACE,
                default_dimensions={"service": metric_names.SERVICE},
            ):
                pass
    if not written:
        return
    # The record is made here, as logger.info would make it, with the caller's frame as
    # the line's location: logging's own search up the stack for it is not needed.
    caller = sys._getframe(1)
    code = caller.f_code
    _LINES.handle(
        _LINES.makeRecord(
            _LINES.name,
            level,
            code.co_filename,
            caller.f_lineno,
            message,
            (),
            None,
            code.co_name,
            extra,
        )
    )


def print_counts(counts: Mapping[str, float]) -> None:
    """Counts that are no metric, as one line without a level: Lambda's log filter keeps
    it as it keeps Powertools' metric lines, whatever the functions' own level."""
    line = {"service": metric_names.SERVICE, "counts": True, **counts}
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _write_directly(level: int, message: str, fields: Mapping[str, object], emf: str) -> bool:
    """Write the line Powertools' handler would write for this record, without the
    record, when that handler is the only place the record would go (as in Lambda,
    where Powertools' filter on the root handlers drops our records). False: nothing
    was written; the caller logs the record as usual.

    Why: a ``LogRecord``, its way through ``logging`` and the redacting filter's walk
    over its values cost three quarters of the receiver's per-request line, which is
    the largest part of its own code over the bare DynamoDB write (docs/benchmarks.md,
    figure 2). The redaction is kept: a line that may hold a secret takes the record's
    way, through the filter, exactly as before.
    """
    handler = _sole_handler()
    if handler is None or level < handler.level or handler.lock is None:
        return False
    line = _FORMATTER.fields_line(level, message, fields, emf)
    if line is None or redaction.may_hold_secret(line):
        return False
    with handler.lock:  # what handler.acquire() takes, without its Python frames
        # StreamHandler.emit's write and flush.
        stream = handler.stream
        stream.write(line + handler.terminator)
        stream.flush()
    return True


def _sole_handler() -> logging.StreamHandler[TextIO] | None:
    """Powertools' handler, when it is the only one our records reach and nothing but
    the redacting filter sits on it."""
    handlers = _LINES.handlers
    handler = _HANDLER
    if len(handlers) != 1 or handlers[0] is not handler or _LINES.filters:
        return None
    if not isinstance(handler, logging.StreamHandler) or handler.formatter is not _FORMATTER:
        return None
    for own_filter in handler.filters:
        if not isinstance(own_filter, redaction.RedactingFilter):
            return None
    if _LINES.propagate:
        for root_handler in _ROOT.handlers:
            if not _suppresses_ours(root_handler):
                return None
    return handler


def _suppresses_ours(handler: logging.Handler) -> bool:
    """Whether Powertools' filter on ``handler`` drops every record of our logger."""
    for candidate in handler.filters:
        if isinstance(candidate, SuppressFilter) and candidate.logger in _LINES.name:
            return True
    return False


def _emf(timestamp: int, metric_list: list[str]) -> dict[str, object]:
    """The EMF members for a count of 1 of each name, dimension ``service``: a
    directive for the published names (metric_names.PUBLISHED_METRICS), the others a
    field of the line only (Logs Insights sums them; no metric is billed).

    The ``service`` value is the logger's own ``service`` key (names.SERVICE), the
    dimension Powertools' metrics use too.
    """
    published = tuple(n for n in metric_list if n in metric_names.PUBLISHED_METRICS)
    members: dict[str, object] = {}
    if published:
        members["_aws"] = {"Timestamp": timestamp, "CloudWatchMetrics": _directives(published)}
    for name in metric_list:
        members[name] = _ONE
    return members


def _emf_json(timestamp: int, names: tuple[str, ...]) -> str:
    """:func:`_emf`'s members as JSON (``"_aws":{...},"Name":[1.0],...``).

    Why not serialized with the line: the directive never changes for a set of names,
    and encoding its nested objects was most of the JSON encoder's work per request
    line (figure 2). The same bytes (tests/unit/test_observability.py).
    """
    before, after = _emf_json_parts(names)
    return f"{before}{timestamp}{after}" if after is not None else before


@functools.lru_cache(maxsize=64)
def _emf_json_parts(names: tuple[str, ...]) -> tuple[str, str | None]:
    """The members' JSON before and after the timestamp, encoded once per set of names
    (no timestamp, None after it, when none of them is published)."""
    text = json.dumps(_emf(0, list(names)), separators=(",", ":"), ensure_ascii=False)[1:-1]
    if '"Timestamp":0' not in text:
        return text, None
    before, after = text.split('"Timestamp":0', 1)
    return before + '"Timestamp":', after


# A count of 1, shared by every line (a tuple: no line can change another's).
_ONE: Final = (1.0,)


@functools.lru_cache(maxsize=64)
def _directives(names: tuple[str, ...]) -> tuple[dict[str, object], ...]:
    """The EMF directive for these metric names: built once per set of names (a
    function counts a few fixed sets), shared by the lines, which only serialize it."""
    return (
        {
            "Namespace": metric_names.METRICS_NAMESPACE,
            "Dimensions": (("service",),),
            "Metrics": tuple({"Name": name, "Unit": "Count"} for name in names),
        },
    )
