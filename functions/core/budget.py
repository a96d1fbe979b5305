"""A token budget per UTC day, reserved before each model call and settled after it.

Before a call, a workflow reserves the most tokens the call may use; the store admits
the reservation only if the day's total stays within the limit, atomically, so any
number of concurrent workers never spend more than the limit between them. After the
call it settles the reservation with the tokens actually used, which frees (or, for an
underestimate, takes) the difference. A reservation never settled (the worker died,
or the call's outcome is unknown) stays counted at its estimate: the budget errs
towards spending less.

Each reservation carries an id of its own, and the store applies its reservation and
its settlement once each, however often a write is sent: an SDK retry (or our own)
after a write that committed but whose answer was lost never counts tokens twice,
nor frees tokens that were spent.

When the day's budget is spent, :meth:`TokenBudget.require` raises
:class:`~functions.core.errors.BudgetExhausted` with the next UTC midnight, so the
worker can delay the delivery until the new day's budget opens. A call larger than
the day's whole limit could wait forever: it raises
:class:`~functions.core.errors.BudgetTooSmall` (permanent) instead. A limit of 0 is
a pause (``budget set 0``): every call waits. Operators raise (or lower) the limit
with :meth:`TokenBudget.set_limit`; it applies to the current day at once and to
every later day.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from functions.core.errors import BudgetExhausted, BudgetTooSmall
from functions.core.ports.budget import BudgetDay, BudgetStore

DAY_SECONDS: Final = 24 * 3600


@dataclass(frozen=True, slots=True)
class Reservation:
    """Tokens set aside on one day for one call.

    Attributes:
        id: this reservation's own token: the store applies the reservation and its
            settlement once each, whatever number of times either write is sent.
    """

    day: str  # YYYY-MM-DD, UTC
    tokens: int
    id: str


def budget_day(now: int) -> str:
    """The UTC day of epoch second ``now``, as ``YYYY-MM-DD``."""
    return datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%d")


def next_day_starts(now: int) -> int:
    """Epoch seconds of the UTC midnight after ``now`` (epoch days are UTC days)."""
    return (now // DAY_SECONDS + 1) * DAY_SECONDS


def new_reservation_id() -> str:
    """A fresh reservation id (unguessable is not needed; unique is)."""
    return secrets.token_hex(8)


class TokenBudget:
    """The daily token budget: one instance serves every call of a warm worker."""

    def __init__(
        self, store: BudgetStore, *, new_id: Callable[[], str] = new_reservation_id
    ) -> None:
        self._store = store
        self._new_id = new_id

    def reserve(self, tokens: int, now: int) -> Reservation | None:
        """Set ``tokens`` aside for a call at ``now``; None when the day cannot afford it."""
        if tokens <= 0:
            raise ValueError("a reservation is for a positive number of tokens")
        reservation = Reservation(budget_day(now), tokens, self._new_id())
        admitted = self._store.reserve(reservation.day, tokens, reservation_id=reservation.id)
        return reservation if admitted else None

    def require(self, tokens: int, now: int) -> Reservation:
        """Like :meth:`reserve`, but a refusal raises.

        Raises:
            BudgetTooSmall: ``tokens`` exceed the day's whole limit (not 0): waiting
                cannot help.
            BudgetExhausted: the day is spent (or paused: a limit of 0); ``retry_at``
                is the next UTC midnight.
        """
        reservation = self.reserve(tokens, now)
        if reservation is None:
            # Read on the refusal only: admitted calls pay no extra request.
            limit = self._store.get(budget_day(now)).limit
            if 0 < limit < tokens:
                raise BudgetTooSmall(tokens=tokens, limit=limit)
            raise BudgetExhausted(retry_at=next_day_starts(now))
        return reservation

    def settle(self, reservation: Reservation, used_tokens: int) -> None:
        """Count what the call used instead of what was reserved (on the reservation's
        day), once: settling it again changes nothing."""
        if used_tokens < 0:
            raise ValueError("used tokens cannot be negative")
        self._store.settle(
            reservation.day,
            reservation_id=reservation.id,
            reserved=reservation.tokens,
            used=used_tokens,
        )

    def keep(self, reservation: Reservation) -> None:
        """Count the reservation at its estimate for good: its call's outcome is unknown
        (it may have run). Its id leaves the day's open reservations; nothing is freed."""
        self._store.keep(reservation.day, reservation_id=reservation.id)

    def show(self, now: int) -> BudgetDay:
        return self._store.get(budget_day(now))

    def set_limit(self, tokens: int, now: int) -> None:
        """The limit from today (the UTC day of ``now``) on."""
        if tokens < 0:
            raise ValueError("a token limit cannot be negative")
        self._store.set_limit(budget_day(now), tokens)
