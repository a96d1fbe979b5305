"""Waiting for a condition with a deadline: the tests never sleep a guessed time.

What a test waits for (a state file, a finished delivery, a secret picked up) is
looked at again and again until it holds or the deadline passes; the short pause
between two looks only keeps them from flooding what they look at.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(
    look: Callable[[], T],
    until: Callable[[T], bool],
    *,
    deadline_seconds: float,
    pause_seconds: float = 0.05,
) -> T:
    """Call ``look`` until ``until(result)`` holds or the deadline passes.

    Returns the last result, so the caller's assertion shows what was seen last.
    """
    deadline = time.monotonic() + deadline_seconds
    result = look()
    while not until(result) and time.monotonic() < deadline:
        time.sleep(pause_seconds)
        result = look()
    return result
