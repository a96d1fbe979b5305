"""The daily token budget as the operator sees and sets it (the table's ``budget#`` items).

Read and written through the workflow's own :class:`~functions.core.budget.TokenBudget`
and its DynamoDB store, so the operator sees exactly what the workers enforce. A day
has a limit once it is opened (by its first reservation or a ``set``); before that,
the limit an operator set applies, or else the workflow's own ``daily_token_budget``
setting, which only the workers know: the operator is then shown no limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from functions.core.adapters.dynamodb_budget import DynamoDbBudget
from functions.core.budget import TokenBudget
from functions.core.ports.budget import BudgetDay
from functions.workflows.wiring import WORKFLOW_ALIASES
from ops.target import Target

# The shipped workflows that call no model: nothing reserves tokens under them.
_WITHOUT_MODEL: Final = frozenset({WORKFLOW_ALIASES["archive"], WORKFLOW_ALIASES["notify"]})

# The store's fallback when no day and no operator gave a limit; only ever read back
# (never written: the operator never reserves), and shown as "not set".
_NOT_SET: Final = -1


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """One UTC day's spend; ``limit`` None: the workers' setting applies."""

    day: str
    limit: int | None
    reserved: int
    used: int
    open_reservations: int = 0  # at their estimate: in flight, or left by a dead worker

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.reserved)

    def to_dict(self) -> dict[str, Any]:
        return {
            "day": self.day,
            "limit": self.limit,
            "open_reservations": self.open_reservations,
            "remaining": self.remaining,
            "reserved": self.reserved,
            "used": self.used,
        }


def has_no_model_budget(workflow: str | None) -> bool:
    """Whether the workflow is known to call no model, so that no budget applies to it
    (``archive``, ``notify``); False for the agent, a deployer's own workflow (which may
    call a model through the model client) and a target that does not say."""
    return workflow is not None and WORKFLOW_ALIASES.get(workflow, workflow) in _WITHOUT_MODEL


def _budget(target: Target) -> TokenBudget:
    return TokenBudget(
        DynamoDbBudget(client=target.dynamodb, table_name=target.table_name, default_limit=_NOT_SET)
    )


def _status(day: BudgetDay) -> BudgetStatus:
    limit = None if day.limit == _NOT_SET else day.limit
    return BudgetStatus(day.day, limit, day.reserved, day.used, day.open_reservations)


def show_budget(target: Target, *, now: int) -> BudgetStatus:
    """The spend of the UTC day of ``now`` and its limit."""
    return _status(_budget(target).show(now))


def set_budget(target: Target, tokens: int, *, now: int) -> BudgetStatus:
    """Make ``tokens`` the limit from the UTC day of ``now`` on; returns that day after."""
    budget = _budget(target)
    budget.set_limit(tokens, now)
    return _status(budget.show(now))
