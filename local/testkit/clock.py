"""The one fake clock (``functions.core.clock.Clock``): it says what it is told."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from functions.core.deadline import Deadline

START = 1_760_000_000  # 2025-10-09 08:53:20 UTC; any fixed second would do


@dataclass
class FakeClock:
    """Stands still at ``value`` until a test sets it or :meth:`advance` moves it."""

    value: int = START

    def now(self) -> int:
        return self.value

    def advance(self, seconds: int) -> None:
        self.value += seconds


@dataclass
class WaitingRoom:
    """Time that passes only when something waits in it: a retry's waits cost a test
    nothing, and the budget they are bounded by still runs out."""

    elapsed: float = 0.0
    waits: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.elapsed += seconds

    def monotonic(self) -> float:
        return self.elapsed


def deadline_after_looks(looks: int) -> Deadline:
    """A deadline that passes after ``looks`` looks at its clock, each a second later:
    work bounded by it stops at a known point, whatever the machine's speed."""
    seconds = itertools.count()
    return Deadline(ends_at=looks, now=lambda: next(seconds))
