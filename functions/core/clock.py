"""The clock port: every use case asks it for the time, so tests can move time."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Tells the current time in whole epoch seconds (what the table stores)."""

    def now(self) -> int: ...


class SystemClock:
    """The production clock."""

    def now(self) -> int:
        return int(time.time())
