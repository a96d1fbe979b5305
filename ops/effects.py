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
:func:`resolve_matching` does the same for every uncertain effect that matches a
name and a window (``effects resolve --all``), bounded like the bulk requeue.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from functions.core import table_layout, tracing
from functions.core.adapters.dynamodb_effects import effect_from_item
from functions.core.models import State
from functions.core.ports.effects import EffectRecord, EffectStatus
from ops.bulk import CONCURRENCY, DEFAULT_LIMIT, BulkLimitExceeded, BulkResult, Tally, bulk_result
from ops.inbox import show_inbox
from ops.target import OperatorError, Target


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
    with tracing.span(
        tracing.SPAN_OPERATOR_PREFIX + "resolve",
        parent=tracing.parent_from(None if inbox is None else inbox.traceparent),
        attributes={"delivery_id": delivery_id, "effect": name, "applied": applied},
    ) as resolving:
        resolved = resolve(delivery_id, name, now=now)
        resolving.set("changed", resolved)
    if resolved:
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


def resolve_matching(
    target: Target,
    *,
    applied: bool,
    now: int,
    effect_age_seconds: int,
    effect: str | None = None,
    since: int | None = None,
    until: int | None = None,
    limit: int = DEFAULT_LIMIT,
    yes: bool = False,
    dry_run: bool = True,
    concurrency: int = CONCURRENCY,
) -> tuple[BulkResult, list[EffectInDoubt]]:
    """Resolve every uncertain effect that matches as applied (or not applied).

    The match: effects whose doubt is ``flagged`` or ``stale`` (:func:`list_effects`,
    never one in flight), named ``effect`` (any, if None), intended in ``[since,
    until)`` (epoch seconds; open ends). Each is then resolved with its own conditional
    write (:func:`resolve_effect`): one settled meanwhile, or whose delivery a worker
    holds now, is counted under its :class:`ResolveOutcome`, never overwritten; so the
    same command run twice changes nothing more.

    Returns:
        The bulk result (``operation`` ``resolve``), and the matched effects oldest
        first (what a dry run lists, one line each).

    Raises:
        BulkLimitExceeded: not a dry run, not ``yes``, and more than ``limit`` match.
        OperatorError: the limit is below 1.
    """
    if limit < 1:
        raise OperatorError("the limit must be at least 1")
    matched = [
        found
        for found in list_effects(
            target, now=now, effect_age_seconds=effect_age_seconds, uncertain_only=True
        )
        if (effect is None or found.record.name == effect)
        and (since is None or found.record.intent_at >= since)
        and (until is None or found.record.intent_at < until)
    ]
    needs_yes = len(matched) > limit and not yes
    if needs_yes and not dry_run:
        raise BulkLimitExceeded("resolve", len(matched), limit, narrow="--effect, --since, --until")
    tally = Tally()

    def one(found: EffectInDoubt) -> tuple[str, ResolveOutcome]:
        record = found.record
        if dry_run:
            inbox = show_inbox(target, record.delivery_id)
            held = inbox is not None and inbox.state is State.PROCESSING
            return record.delivery_id, ResolveOutcome.REFUSED if held else _finding(applied)
        result = resolve_effect(target, record.delivery_id, record.name, applied=applied, now=now)
        return record.delivery_id, result.outcome

    with ThreadPoolExecutor(concurrency, thread_name_prefix="bulk-resolve") as pool:
        for delivery_id, outcome in pool.map(one, matched):
            if outcome is _finding(applied):
                tally.change(delivery_id)
            else:
                tally.keep(delivery_id, outcome)
    filters = {
        "effect": effect,
        "since": since,
        "until": until,
        "finding": _finding(applied).value,
        "older_than": effect_age_seconds,
    }
    result = bulk_result(
        "resolve",
        tally,
        matched=len(matched),
        dry_run=dry_run,
        limit=limit,
        needs_yes=needs_yes,
        filters=filters,
    )
    return result, matched


def _finding(applied: bool) -> ResolveOutcome:
    return ResolveOutcome.APPLIED if applied else ResolveOutcome.NOT_APPLIED
