"""The one fake clock (``functions.core.clock.Clock``): it says what it is told."""

from __future__ import annotations

from dataclasses import dataclass

START = 1_760_000_000  # 2025-10-09 08:53:20 UTC; any fixed second would do


@dataclass
class FakeClock:
    """Stands still at ``value`` until a test sets it or :meth:`advance` moves it."""

    value: int = START

    def now(self) -> int:
        return self.value

    def advance(self, seconds: int) -> None:
        self.value += seconds
