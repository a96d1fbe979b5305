"""The port of the effect records: intent and done (the table in production)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class EffectMode(StrEnum):
    """How an unknown outcome of an effect is settled (:mod:`functions.core.effects`)."""

    REPEATABLE = "repeatable"  # run it again: repeating it reaches the same state
    KEYED = "keyed"  # call again with the same key: the far side drops a duplicate
    CHECKED = "checked"  # the effect's reconcile lookup says whether it was applied
    OPERATOR = "operator"  # in doubt: the delivery fails, a person resolves it


class EffectStatus(StrEnum):
    INTENT = "intent"  # about to be applied, or applied without a done record yet
    DONE = "done"
    NOT_APPLIED = "not_applied"  # certainly not applied: treated as no record


@dataclass(frozen=True, slots=True)
class EffectRecord:
    """One effect of one delivery, as the ledger stores it."""

    delivery_id: str
    name: str
    status: EffectStatus
    key: str
    intent_at: int
    done_at: int | None = None
    flagged_at: int | None = None  # set by the reconciler when it hands it to an operator
    # The token of the attempt (ledger) that wrote the intent; "" when not known.
    attempt: str = ""


class EffectStore(Protocol):
    """Port: where intent and done records live (the table in production)."""

    def get(self, delivery_id: str, name: str) -> EffectRecord | None: ...

    def record_intent(
        self,
        delivery_id: str,
        name: str,
        *,
        key: str,
        now: int,
        expires_at: int,
        attempt: str = "",
    ) -> bool:
        """Write the intent, carrying ``attempt``, unless a record other than
        NOT_APPLIED exists; returns False when one did."""
        ...

    def record_done(self, delivery_id: str, name: str, *, now: int) -> None: ...

    def resolve_not_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        """Mark an intent NOT_APPLIED (no longer listed as uncertain); False when the
        record is not an intent (done, already cleared, or missing)."""
        ...
