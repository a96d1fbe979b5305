"""Logger and metrics shared by every function, with redaction built in.

Handlers never log events, bodies, header values or paths (docs/contract.md,
Request: the receiver URL may hold a token). The filter below is the second line of
defence: it masks anything shaped like a signing secret or a bearer token that
slips into a log line anyway.
"""

from __future__ import annotations

import logging
import re

from aws_lambda_powertools import Logger, Metrics

from functions.core import names

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


logger = Logger(service=names.SERVICE)
logger.addFilter(RedactingFilter())
metrics = Metrics(namespace=names.METRICS_NAMESPACE, service=names.SERVICE)
