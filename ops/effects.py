"""Effects in doubt, as the operator lists and resolves them.

An effect is *in doubt* while its record is an intent without done: the ledger wrote
the intent before calling the downstream system, and the attempt ended without
saying whether the call took effect (a timeout, a crash). The state index
lists exactly those records (``effect_intent#NN``), so listing them is a Query per
shard, never a Scan. Some are only in flight: a worker is applying them right now.

An operator who checked the downstream system resolves one: *applied* records it
done (every later attempt skips it), *not applied* clears it (the next attempt
applies it as new). Either way it leaves the index; then ``requeue`` gives a failed
delivery its next attempt, which skips what is done and reuses recorded steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from functions.core import table_layout
from functions.core.adapters.dynamodb_effects import effect_from_item
from functions.core.effects import EffectRecord, EffectStatus
from functions.core.models import State
from ops.inbox import show_inbox
from ops.target import Target


class Doubt(StrEnum):
    """How far an intent without done is from needing a person."""

    FLAGGED = "flagged"  # the reconciler handed it to an operator
    # Older than the reconciler's effect age, which exceeds the worker's lease: no
    # live worker holds it. Not flagged (yet): its delivery is pending and will meet
    # it on the retry, or the reconciler has not run since.
    STALE = "stale"
    IN_FLIGHT = "in_flight"  # recent: a worker may be applying it right now

    @property
    def uncertain(self) -> bool:
        """No attempt in progress will settle it: the outcome is really unknown."""
        return self is not Doubt.IN_FLIGHT


@dataclass(frozen=True, slots=True)
class EffectInDoubt:
    record: EffectRecord
    doubt: Doubt

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivery_id": self.record.delivery_id,
            "effect": self.record.name,
            "idempotency_key": self.record.key,
            "intent_at": self.record.intent_at,
            "flagged_at": self.record.flagged_at,
            "doubt": self.doubt.value,
        }


def doubt_of(record: EffectRecord, *, now: int, effect_age_seconds: int) -> Doubt:
    """Flagged, or older than ``effect_age_seconds`` (the reconciler's rule), or in flight."""
    if record.flagged_at is not None:
        return Doubt.FLAGGED
    # The same bound as the reconciler's index query: intended strictly before it.
    if record.intent_at < now - effect_age_seconds:
        return Doubt.STALE
    return Doubt.IN_FLIGHT


def list_effects(
    target: Target, *, now: int, effect_age_seconds: int, uncertain_only: bool = False
) -> list[EffectInDoubt]:
    """Every intent without done (oldest first), or with ``uncertain_only`` the uncertain ones."""
    found = [
        EffectInDoubt(record, doubt_of(record, now=now, effect_age_seconds=effect_age_seconds))
        for record in (
            effect_from_item(item)
            for item in target.state_index(table_layout.STATE_LABEL_EFFECT_INTENT)
        )
    ]
    if uncertain_only:
        found = [effect for effect in found if effect.doubt.uncertain]
    found.sort(key=lambda e: (e.record.intent_at, e.record.delivery_id, e.record.name))
    return found


class ResolveOutcome(StrEnum):
    APPLIED = "applied"  # recorded done: every later attempt skips it
    NOT_APPLIED = "not_applied"  # cleared: the next attempt applies it as new
    NOT_IN_DOUBT = "not_in_doubt"  # done, cleared already, or no record: nothing changed
    REFUSED = "refused"  # a worker holds the delivery now: nothing changed


@dataclass(frozen=True, slots=True)
class ResolveResult:
    delivery_id: str
    effect: str
    outcome: ResolveOutcome
    delivery_state: str | None  # the inbox item's state; None when it has none
    reason: str | None = None

    @property
    def changed(self) -> bool:
        return self.outcome in (ResolveOutcome.APPLIED, ResolveOutcome.NOT_APPLIED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivery_id": self.delivery_id,
            "effect": self.effect,
            "outcome": self.outcome.value,
            "delivery_state": self.delivery_state,
            "reason": self.reason,
        }


_SETTLED: Final = {
    EffectStatus.DONE: "not in doubt: already done (applied)",
    EffectStatus.NOT_APPLIED: "not in doubt: already cleared as not applied"
    " (the next attempt applies it)",
}


def resolve_effect(
    target: Target, delivery_id: str, name: str, *, applied: bool, now: int
) -> ResolveResult:
    """Record the operator's finding on an effect in doubt: applied (done) or not (cleared).

    Refused while the delivery is ``processing``: its worker may be applying the effect
    at this moment, and only the end of that attempt says what happened.
    """
    inbox = show_inbox(target, delivery_id)
    state = None if inbox is None else inbox.state.value
    if inbox is not None and inbox.state is State.PROCESSING:
        return ResolveResult(
            delivery_id,
            name,
            ResolveOutcome.REFUSED,
            state,
            "a worker is processing the delivery now: wait for its attempt to end",
        )
    effects = target.effects()
    resolve = effects.resolve_applied if applied else effects.resolve_not_applied
    if resolve(delivery_id, name, now=now):
        outcome = ResolveOutcome.APPLIED if applied else ResolveOutcome.NOT_APPLIED
        return ResolveResult(delivery_id, name, outcome, state)
    record = effects.get(delivery_id, name)
    if record is None:
        reason = f"not in doubt: no effect {name} recorded for this delivery"
    elif record.status is EffectStatus.INTENT:
        # Cleared before, and a new attempt wrote a new intent between our write and read.
        return ResolveResult(
            delivery_id, name, ResolveOutcome.REFUSED, state, "it changed meanwhile; look again"
        )
    else:
        reason = _SETTLED[record.status]
    return ResolveResult(delivery_id, name, ResolveOutcome.NOT_IN_DOUBT, state, reason)
