"""The port of the day's token budget (the table in production)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class BudgetDay:
    """One day's budget.

    Attributes:
        limit: tokens the day may spend.
        reserved: tokens counted against the limit: open reservations at their
            estimate, settled ones at what they used.
        used: tokens that settled calls actually used.
        open_reservations: reservations neither settled nor kept: calls in flight,
            and those whose worker died (counted at their estimate for good).
    """

    day: str
    limit: int
    reserved: int
    used: int
    open_reservations: int = 0

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.reserved)


class BudgetStore(Protocol):
    """Port: the day records and the configured limit (the table in production)."""

    def reserve(self, day: str, tokens: int, *, reservation_id: str) -> bool:
        """Count ``tokens`` against ``day`` if the total stays within its limit, atomically.

        True also when this reservation was already counted (a resent write).
        """
        ...

    def settle(self, day: str, *, reservation_id: str, reserved: int, used: int) -> None:
        """Replace the open reservation of ``reserved`` tokens by the ``used`` ones, once;
        nothing when it is settled already (or its day expired)."""
        ...

    def keep(self, day: str, *, reservation_id: str) -> None:
        """Close the open reservation at its estimate for good, once (the counters stay)."""
        ...

    def set_limit(self, day: str, tokens: int) -> None:
        """The limit of ``day`` and of every day not used yet."""
        ...

    def get(self, day: str) -> BudgetDay:
        """The day as it stands; a day not used yet has the configured limit and no use."""
        ...
