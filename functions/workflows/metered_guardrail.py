"""The screening guardrail's calls, budgeted and counted as the model's are.

``ApplyGuardrail`` is billed per text unit (1,000 characters, per policy). Each call
on a text (:class:`MeteredGuardrail`) follows the model client's books
(:mod:`functions.workflows.model_client`), in the tokens of its text
(:func:`~functions.core.spend.guardrail_tokens`), the one unit the day's budget and
the delivery's cap count in:

1. **cap**: a call that would take the delivery past ``delivery_token_cap`` fails it
   ``delivery_token_cap`` before the call;
2. **reserve** the text's tokens on the day's budget (a spent day waits for the next;
   ``budget_too_small`` fails at once);
3. **count** the call in the delivery's spend record before sending it;
4. **call**, then **settle**: answered, its tokens stay spent and its text units and
   tokens are recorded; throttled or refused before it ran (``NotApplied``,
   ``PermanentError``), nothing is spent; an unknown outcome keeps the reservation and
   the count (it may have run, and been billed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from functions.core.errors import NotApplied, PermanentError, TransientError
from functions.core.spend import guardrail_text_units, guardrail_tokens, new_call_id
from functions.core.token_cap import require_within_cap
from functions.workflows.paid_calls import PaidCallBooks

if TYPE_CHECKING:
    from collections.abc import Callable

    from functions.core.budget import TokenBudget
    from functions.core.clock import Clock
    from functions.core.ports.spend import SpendStore
    from functions.workflows.screening import Guardrail, Screening


class MeteredGuardrail:
    """A :class:`~functions.workflows.screening.Guardrail` whose calls are paid for."""

    def __init__(
        self,
        guardrail: Guardrail,
        *,
        clock: Clock,
        budget: TokenBudget | None = None,
        spend: SpendStore | None = None,
        token_cap: int = 0,
        new_call_id: Callable[[], str] = new_call_id,
    ) -> None:
        self._guardrail = guardrail
        self._clock = clock
        self._books = PaidCallBooks(budget=budget, spend=spend, subject="guardrail")
        self._token_cap = token_cap
        self._new_call_id = new_call_id

    def screen(self, text: str, *, delivery_id: str, expires_at: int) -> Screening:
        """Cap, reserve, count, call, settle (the module's docstring).

        Raises:
            PermanentError: ``delivery_token_cap``, ``budget_too_small``, or the
                guardrail's own refusal.
            BudgetExhausted: the day's budget is spent.
            Whatever :meth:`Guardrail.screen` raises.
        """
        tokens = guardrail_tokens(text)
        budget, spend = self._books.budget, self._books.spend
        require_within_cap(
            spend, delivery_id=delivery_id, tokens=tokens, cap=self._token_cap, call="screening"
        )
        reservation = None if budget is None else budget.require(tokens, self._clock.now())
        call_id = self._new_call_id()
        if spend is not None:
            try:
                spend.guardrail_sent(delivery_id, call_id, expires_at=expires_at)
            except TransientError:
                self._books.settle(reservation, 0)  # nothing sent uncounted
                self._books.record(lambda books: books.not_run(delivery_id, call_id))
                raise
        try:
            screening = self._guardrail.screen(text)
        except (NotApplied, PermanentError):
            self._books.settle(reservation, 0)
            self._books.record(lambda books: books.not_run(delivery_id, call_id))
            raise
        except Exception:
            self._books.settle(reservation, None)  # it may have run: billed
            raise
        self._books.settle(reservation, tokens)
        self._books.record(
            lambda books: books.guardrail_answered(
                delivery_id, call_id, text_units=guardrail_text_units(text), tokens=tokens
            )
        )
        return screening
