"""A point in time by which work must be done (a Lambda invocation's end, less a margin).

Measured on a monotonic clock: it is about elapsed time within one invocation, never
about the wall clock that the inbox records.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Deadline:
    """Ends at ``ends_at`` on the ``now`` clock (seconds, monotonic)."""

    ends_at: float
    now: Callable[[], float] = field(default=time.monotonic, compare=False)

    @classmethod
    def after(cls, seconds: float, *, now: Callable[[], float] = time.monotonic) -> Deadline:
        """The deadline ``seconds`` from now."""
        return cls(now() + seconds, now)

    @classmethod
    def never(cls) -> Deadline:
        """No deadline: everything may start (tests, and callers without a time limit)."""
        return cls(math.inf)

    def remaining(self) -> float:
        """Seconds left; negative once passed."""
        return self.ends_at - self.now()
