"""Log level names as Lambda and Powertools spell them, and the function's own level.

Lambda's application log level (``AWS_LAMBDA_LOG_LEVEL``, from the function's logging
configuration) is one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL; Python's and
Powertools' (``POWERTOOLS_LOG_LEVEL``) one of DEBUG, INFO, WARNING, ERROR, CRITICAL.
Standard library only: the local runtime reads it before any handler is imported.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

from functions.core import env_names

_BY_NAME: Final = {
    "TRACE": logging.DEBUG,  # Python has nothing finer; Lambda's runtime maps it so too
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
}


def level_number(name: str | None) -> int | None:
    """The ``logging`` level ``name`` means (any case); None when unset or unknown."""
    return _BY_NAME.get((name or "").strip().upper())


def function_log_level(environ: Mapping[str, str]) -> int | None:
    """The level the function's own logger logs at; None when neither variable is set.

    The stricter of Lambda's application log level and ``POWERTOOLS_LOG_LEVEL``: a line
    below Lambda's level would be dropped anyway, and one below Powertools' is not wanted.
    (Powertools itself lets Lambda's level win even when it is the more verbose one.)
    """
    levels = [
        level_number(environ.get(env_names.ENV_LAMBDA_LOG_LEVEL)),
        level_number(environ.get(env_names.ENV_POWERTOOLS_LOG_LEVEL)),
    ]
    return max((level for level in levels if level is not None), default=None)
