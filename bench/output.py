"""Where Powertools' log lines and EMF records go while the bench measures.

Lambda ships stdout to CloudWatch; writing every line somewhere (``/dev/null``, or a
counter of bytes) keeps the formatting and write cost in the figures without
flooding the bench's terminal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from functions.core.observability import logger


@contextlib.contextmanager
def redirect_output(sink: TextIO) -> Iterator[None]:
    """Send stdout and every stream handler of the functions' and the root logger to ``sink``.

    The handlers hold the stream they were made with, so they are re-pointed too; the
    root logger's as well: records propagate there, and a library may have given it a
    console handler (the MCP SDK does).
    """
    saved = sys.stdout
    every = [*logger.handlers, *logging.getLogger().handlers]
    handlers = [h for h in every if isinstance(h, logging.StreamHandler)]
    streams = [h.stream for h in handlers]
    sys.stdout = sink
    for h in handlers:
        h.setStream(sink)
    try:
        yield
    finally:
        sys.stdout = saved
        for h, stream in zip(handlers, streams, strict=True):
            h.setStream(stream)


@contextlib.contextmanager
def quiet_output() -> Iterator[None]:
    """Everything :func:`redirect_output` catches goes to ``/dev/null``."""
    with open(os.devnull, "w", encoding="utf-8") as sink, redirect_output(sink):
        yield
