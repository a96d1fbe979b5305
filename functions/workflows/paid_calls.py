"""The books of a paid call (a model's or a guardrail's): settling its reservation of the
day's token budget, and writing its spend record, after the call.

Both writes come after a call that is paid for either way: their failure must not
fail the step (which would make the call again). A reservation left unsettled stays
counted at its estimate; a spend record left unwritten keeps the call counted as
sent, its outcome unknown: both err towards more spent, never less.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from functions.core.errors import TransientError
from functions.core.observability import logger

if TYPE_CHECKING:
    from functions.core.budget import Reservation, TokenBudget
    from functions.core.ports.spend import SpendStore


class PaidCallBooks:
    """The day's budget and the delivery's spend record, for calls of one ``subject``."""

    def __init__(
        self, *, budget: TokenBudget | None, spend: SpendStore | None, subject: str
    ) -> None:
        self.budget = budget
        self.spend = spend
        self._subject = subject

    def settle(self, reservation: Reservation | None, used: int | None) -> None:
        """Settle at ``used`` tokens; None: the outcome is unknown, keep the estimate."""
        if reservation is None or self.budget is None:
            return
        try:
            if used is None:
                self.budget.keep(reservation)
            else:
                self.budget.settle(reservation, used)
        except TransientError:
            logger.warning("token budget not settled; the reservation stays at its estimate")

    def record(self, write: Callable[[SpendStore], None]) -> None:
        """A spend write after the call (see the module's docstring)."""
        if self.spend is None:
            return
        try:
            write(self.spend)
        except TransientError:
            logger.warning(f"{self._subject} spend not recorded; the call stays counted as sent")
