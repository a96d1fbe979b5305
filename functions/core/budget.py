"""A token budget per UTC day, reserved before each model call and settled after it.

Before a call, a workflow reserves the most tokens the call may use; the store admits
the reservation only if the day's total stays within the limit, atomically, so any
number of concurrent workers never spend more than the limit between them. After the
call it settles the reservation with the tokens actually used, which frees (or, for an
underestimate, takes) the difference. A reservation never settled (the worker died)
stays counted at its estimate: the budget errs towards spending less.

When the day's budget is spent, :meth:`TokenBudget.require` raises
:class:`~functions.core.errors.BudgetExhausted` with the next UTC midnight, so the
worker can delay the delivery until the new day's budget opens. Operators raise (or
lower) the limit with :meth:`TokenBudget.set_limit`; it applies to the current day at
once and to every later day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Protocol

from functions.core.errors import BudgetExhausted

DAY_SECONDS: Final = 24 * 3600


@dataclass(frozen=True, slots=True)
class Reservation:
    """Tokens set aside on one day for one call."""

    day: str  # YYYY-MM-DD, UTC
    tokens: int


@dataclass(frozen=True, slots=True)
class BudgetDay:
    """One day's budget.

    Attributes:
        limit: tokens the day may spend.
        reserved: tokens counted against the limit: open reservations at their
            estimate, settled ones at what they used.
        used: tokens that settled calls actually used.
    """

    day: str
    limit: int
    reserved: int
    used: int

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.reserved)


class BudgetStore(Protocol):
    """Port: the day records and the configured limit (the table in production)."""

    def reserve(self, day: str, tokens: int) -> bool:
        """Count ``tokens`` against ``day`` if the total stays within its limit, atomically."""
        ...

    def settle(self, day: str, *, reserved: int, used: int) -> None:
        """Replace a reservation of ``reserved`` tokens by the ``used`` ones."""
        ...

    def set_limit(self, day: str, tokens: int) -> None:
        """The limit of ``day`` and of every day not used yet."""
        ...

    def get(self, day: str) -> BudgetDay:
        """The day as it stands; a day not used yet has the configured limit and no use."""
        ...


def budget_day(now: int) -> str:
    """The UTC day of epoch second ``now``, as ``YYYY-MM-DD``."""
    return datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%d")


def next_day_starts(now: int) -> int:
    """Epoch seconds of the UTC midnight after ``now`` (epoch days are UTC days)."""
    return (now // DAY_SECONDS + 1) * DAY_SECONDS


class TokenBudget:
    """The daily token budget: one instance serves every call of a warm worker."""

    def __init__(self, store: BudgetStore) -> None:
        self._store = store

    def reserve(self, tokens: int, now: int) -> Reservation | None:
        """Set ``tokens`` aside for a call at ``now``; None when the day cannot afford it."""
        if tokens <= 0:
            raise ValueError("a reservation is for a positive number of tokens")
        day = budget_day(now)
        return Reservation(day, tokens) if self._store.reserve(day, tokens) else None

    def require(self, tokens: int, now: int) -> Reservation:
        """Like :meth:`reserve`, but a spent budget raises.

        Raises:
            BudgetExhausted: with ``retry_at`` at the next UTC midnight.
        """
        reservation = self.reserve(tokens, now)
        if reservation is None:
            raise BudgetExhausted(retry_at=next_day_starts(now))
        return reservation

    def settle(self, reservation: Reservation, used_tokens: int) -> None:
        """Count what the call used instead of what was reserved (on the reservation's day)."""
        if used_tokens < 0:
            raise ValueError("used tokens cannot be negative")
        self._store.settle(reservation.day, reserved=reservation.tokens, used=used_tokens)

    def show(self, now: int) -> BudgetDay:
        return self._store.get(budget_day(now))

    def set_limit(self, tokens: int, now: int) -> None:
        """The limit from today (the UTC day of ``now``) on."""
        if tokens < 0:
            raise ValueError("a token limit cannot be negative")
        self._store.set_limit(budget_day(now), tokens)
