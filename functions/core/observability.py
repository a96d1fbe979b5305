"""Logger and metrics shared by every function, with redaction built in.

Handlers never log events, bodies, header values or paths (docs/contract.md,
Request: the receiver URL may hold a token). The filter below is the second line of
defence: it masks anything shaped like a signing secret or a bearer token that
slips into a log line anyway.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from functions.core import metric_names

_SECRETISH = re.compile(r"whsec_[A-Za-z0-9+/=_-]+|(?i:bearer)\s+[A-Za-z0-9._~+/=-]+")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    """Mask signing secrets and bearer tokens in ``text``."""
    return _SECRETISH.sub(REDACTED, text)


class RedactingFilter(logging.Filter):
    """Rewrites a record's message and string extras before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if record.args:
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        for attr, value in list(vars(record).items()):
            if isinstance(value, str) and attr not in ("msg", "name", "levelname", "pathname"):
                setattr(record, attr, redact(value))
        return True


logger = Logger(service=metric_names.SERVICE)
logger.addFilter(RedactingFilter())
metrics = Metrics(namespace=metric_names.METRICS_NAMESPACE, service=metric_names.SERVICE)


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
    extra = dict(fields)
    if level >= logger.log_level and not is_metrics_disabled():
        extra.update(_emf(metric_list))
    else:
        # The line is filtered out (log level) or metrics are off: the metric takes
        # Powertools' own path, which honours POWERTOOLS_METRICS_DISABLED.
        for name in metric_list:
            with single_metric(
                name=name,
                unit=MetricUnit.Count,
                value=1,
                namespace=metric_names.METRICS_NAMESPACE,
                default_dimensions={"service": metric_names.SERVICE},
            ):
                pass
    log = {
        logging.DEBUG: logger.debug,
        logging.INFO: logger.info,
        logging.WARNING: logger.warning,
        logging.ERROR: logger.error,
    }[level]
    # stacklevel 3: the line's location is the caller's, not this function's.
    log(message, extra=extra, stacklevel=3)


def _emf(metric_list: list[str]) -> dict[str, object]:
    """The EMF members for a count of 1 of each name, dimension ``service``.

    The ``service`` value is the logger's own ``service`` key (names.SERVICE), the
    dimension Powertools' metrics use too.
    """
    members: dict[str, object] = {
        "_aws": {
            "Timestamp": time.time_ns() // 1_000_000,
            "CloudWatchMetrics": [
                {
                    "Namespace": metric_names.METRICS_NAMESPACE,
                    "Dimensions": [["service"]],
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in metric_list],
                }
            ],
        }
    }
    for name in metric_list:
        members[name] = [1.0]
    return members
