"""The invariants every seed must keep, checked against the world's truth after the run.

Each check returns lines ``<invariant>: <delivery or day>: <what>``; the invariant's
name comes first so that a summary can count them (docs/simulation.md explains each):

* ``terminal_or_waiting``: every accepted delivery reaches ``completed`` or ``failed``,
  or waits visibly with a reason that can end (a budget day that can afford it); none
  vanishes by TTL before it got there.
* ``effect_once``: no far side acted twice for one key, unless the effect is repeatable.
* ``model_calls_explained``: the model ran no more often than the model step was started
  (each start is one call; a kill or a lost answer is what makes a second start).
* ``budget_within_limit``: what a day really spent is within its limit, and the budget
  counts at least what was spent (otherwise the next reservations overspend).
* ``unknown_outcomes_visible``: an effect a far side acted on is recorded done, or its
  intent is still listed for an operator; never cleared as not applied (while its
  item is within its retention).
* ``no_false_doubt``: an attempt never reports its own intent in doubt, and an intent
  is not left in doubt when every answer since it was written was a definite "not
  done" (refused, 4xx).
* ``dead_letters_marked``: only the worker dead-letters work (with its reason); no
  message reaches the dead-letter queue by its receive count.
* ``redrive_reopens_its_failure``: a marked dead letter reopens the failure it was sent
  for, never a later one.
* ``fails_for_its_own_faults``: a delivery is given up for its unexplained attempts
  (``attempts_exhausted``) only when it would have been without the attempts that died
  holding their claim while a batch-mate's step killed the invocation.
* ``package_kept`` (and the rest: docs/simulation.md): a completed delivery keeps the
  package it ran on, the default workflow's archive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from functions.core import settings_table
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters.dynamodb_items import inbox_key
from functions.core.adapters.dynamodb_package_record import package_from_item
from functions.core.errors import BudgetExhausted
from functions.core.models import State
from functions.core.ports.effects import EffectStatus
from functions.workflows.agent import ALERT_EFFECT, ALERT_HTTP_EFFECT
from functions.workflows.tool_loop import tool_record_name
from local.simulate.approvals import tool_calls_approved, what_ran_is_approved
from local.simulate.far_side import TICKET_USE_ID
from local.simulate.world import TABLE_NAME

if TYPE_CHECKING:
    from local.simulate.world import World

INVARIANTS: Final = (
    "terminal_or_waiting",
    "effect_once",
    "model_calls_explained",
    "budget_within_limit",
    "unknown_outcomes_visible",
    "no_false_doubt",
    "dead_letters_marked",
    "redrive_reopens_its_failure",
    "fails_for_its_own_faults",
    # On the mechanisms, from the seed's history (local/simulate/history.py):
    "effect_applied",
    "one_live_holder",
    "holder_writes_outcome",
    "transitions_documented",
    "relay_reaches_queue",
    "reconciler_resends_only_lost",
    "other_bytes_quarantined",
    "step_result_kept",
    "one_package",
    "package_kept",
    # With approval=alert (local/simulate/approvals.py):
    "what_ran_is_approved",
    "decision_once",
)


class Simulation(Protocol):
    """What the checks read of a finished run (:class:`local.simulate.run.Simulation`)."""

    @property
    def world(self) -> World: ...

    @property
    def cut(self) -> bool:
        """Whether the run's step bound ended a phase."""
        ...


def check(simulation: Simulation) -> list[str]:
    """Every violation of the seed, in a fixed order."""
    world = simulation.world
    truth = world.truth
    found: list[str] = []
    for delivery_id in sorted(truth.accepted):
        found += _terminal_or_waiting(simulation, delivery_id)
    for name in sorted(world.far):
        side = world.far[name]
        if name in ("model", "mcp") or side.repeatable:
            continue
        for key in sorted(side.applied):
            if side.applied[key] > 1:
                found.append(f"effect_once: {key}: {name} applied {side.applied[key]} times")
    for delivery_id in sorted(truth.model_runs):
        runs, starts = truth.model_runs[delivery_id], truth.step_starts[delivery_id]
        if runs > starts:
            found.append(
                f"model_calls_explained: {delivery_id}: the model ran {runs} times,"
                f" the step was started {starts} times"
            )
    for day in sorted(truth.consumed):
        spent = truth.consumed[day]
        budget = world.budget_days.get(day)
        if budget is None:
            continue
        if spent > budget.limit:
            found.append(f"budget_within_limit: {day}: spent {spent} > limit {budget.limit}")
        elif spent > budget.reserved:
            found.append(
                f"budget_within_limit: {day}: spent {spent}, counted {budget.reserved}"
                f" (the budget forgot {spent - budget.reserved} tokens)"
            )
    found += _unknown_outcomes_visible(simulation)
    found += [
        f"no_false_doubt: {line}: its own intent read as a rival's"
        for line in truth.own_intent_doubts
    ]
    found += _definite_no_in_doubt(simulation)
    found += [
        f"dead_letters_marked: {line}: reached the dead-letter queue by its receive count"
        for line in truth.unmarked_dead_letters
    ]
    found += [f"redrive_reopens_its_failure: {line}" for line in truth.mark_mismatches]
    found += [
        f"fails_for_its_own_faults: {line}, and it failed attempts_exhausted"
        for line in truth.innocent_failures
    ]
    found += _effect_applied(world)
    found += _holders(world)
    found += _transitions_documented(world)
    found += [f"relay_reaches_queue: {line}" for line in world.history.relay_lies]
    found += [
        f"reconciler_resends_only_lost: {delivery_id}: sent again at {at - world.started_at:.0f} s"
        f" while the queue held it (due in {detail} s), {unchanged:.0f} s after its last"
        " change, and nothing had lost it"
        for at, delivery_id, why, unchanged, detail in world.history.reconciler_sends
        if not why and unchanged < STALE_PENDING_SECONDS
    ]
    found += [f"other_bytes_quarantined: {line}" for line in world.history.other_bytes]
    found += [
        f"one_package: {delivery_id}: its workflow ran on {len(digests)} packages"
        f" ({', '.join(sorted(d[:12] for d in digests))})"
        for delivery_id, digests in sorted(world.history.packages.items())
        if len(digests) > 1
    ]
    found += [f"step_result_kept: {line}" for line in world.history.step_restarts]
    found += _package_kept(world)
    found += _approvals(simulation)
    return found


def _package_kept(world: World) -> list[str]:
    """Every completed delivery keeps the package it ran on (the archive workflow's
    archive), while its inbox item is within its retention."""
    found = []
    for delivery_id in sorted(world.truth.accepted):
        item = world.inbox.get(delivery_id)
        if item is None or item.state is not State.COMPLETED or item.expires_at <= world.t:
            continue
        stored = world.dynamodb.get_item(TableName=TABLE_NAME, Key=inbox_key(delivery_id))
        kept = package_from_item(stored.get("Item") or {})
        ran_on = world.history.packages.get(delivery_id, set())
        if kept is None or kept.digest not in ran_on:
            found.append(
                f"package_kept: {delivery_id}: completed, and its inbox item keeps"
                f" {'no package' if kept is None else 'another package than it ran on'}"
            )
    return found


def _approvals(simulation: Simulation) -> list[str]:
    """``what_ran_is_approved`` (with approval=alert) and ``decision_once``, from the
    approval records the store committed (local/simulate/approvals.py)."""
    world = simulation.world
    approvals = getattr(simulation, "approval_truth", None)
    if approvals is None:
        return []
    found = []
    if approvals.alert_waits:
        sent = [
            (name, key, content)
            for name in (ALERT_EFFECT, ALERT_HTTP_EFFECT)
            if name in world.far
            for key, content in world.far[name].received
        ]
        found += sorted(set(what_ran_is_approved(approvals, sent)))
    ticket = tool_record_name(TICKET_USE_ID)
    if ticket in world.far:
        calls = [(ticket, key, content) for key, content in world.far[ticket].received]
        found += sorted(set(tool_calls_approved(approvals, calls)))
    found += [f"decision_once: {line}" for line in approvals.changed]
    return found


def _applied_for(world: World, name: str, delivery_id: str) -> bool:
    """Whether far side ``name`` acted at least once for the delivery (any of its keys:
    the idempotency key, the archive's object key)."""
    side = world.far.get(name)
    return side is not None and any(
        count and delivery_id in key for key, count in side.applied.items()
    )


def _effect_applied(world: World) -> list[str]:
    """Every effect recorded done was applied; so was every effect the attempt that
    completed a delivery went past (a ledger that writes "done" before it applies the
    effect completes deliveries whose effect never happened)."""
    found = []
    history = world.history
    for (delivery_id, name), how in sorted(history.marked_done.items()):
        if not _applied_for(world, name, delivery_id):
            found.append(
                f"effect_applied: {delivery_id}: {name} recorded done by {how},"
                " never applied by the far side"
            )
    for event in history.states:
        if event.to_state is not State.COMPLETED or event.writer is None:
            continue
        for delivery_id, name in sorted(history.ran_effects.get(event.writer, ())):
            recorded = (delivery_id, name) in history.marked_done
            if (
                delivery_id == event.delivery_id
                and not recorded
                and not _applied_for(world, name, delivery_id)
            ):
                found.append(
                    f"effect_applied: {delivery_id}: completed past {name},"
                    " which the far side never applied"
                )
    return found


# A pending item unchanged this long looks lost to the reconciler (its rule: it cannot
# see the queue), less the skew its clock may have (local/simulate/run.py's bound).
STALE_PENDING_SECONDS: Final = settings_table.RECONCILE_PENDING_AGE_SECONDS.default - 60

# The rows a worker writes as the lease's holder (conditional on lease_owner).
_HOLDER_ROWS: Final = frozenset(
    row.name for row in transitions.TRANSITIONS if row.condition == transitions.COMPLETE.condition
)


def _holders(world: World) -> list[str]:
    """From the history of committed state writes: a claim never takes a delivery whose
    lease another owner still holds (by the claimer's clock, as the claim's condition
    compares), and every outcome a worker writes names the lease's current holder."""
    found = []
    holder: dict[str, tuple[str, int]] = {}  # delivery -> (owner, lease_until)
    for event in world.history.states:
        current = holder.get(event.delivery_id)
        if event.transition == "claim":
            if (
                current is not None
                and current[0] != event.writer
                and event.now is not None
                and event.now < current[1]
            ):
                found.append(
                    f"one_live_holder: {event.delivery_id}: {event.writer} claimed it at"
                    f" {event.now} while {current[0]} held it until {current[1]}"
                )
            if event.writer is not None and event.lease_until is not None:
                holder[event.delivery_id] = (event.writer, event.lease_until)
            continue
        if event.transition in _HOLDER_ROWS and (current is None or current[0] != event.writer):
            held = "nobody" if current is None else current[0]
            found.append(
                f"holder_writes_outcome: {event.delivery_id}: {event.transition} written"
                f" by {event.writer} while {held} held the lease"
            )
        if event.to_state is not State.PROCESSING:
            holder.pop(event.delivery_id, None)
    return found


_ROWS: Final = {row.name: row for row in transitions.TRANSITIONS}


def _transitions_documented(world: World) -> list[str]:
    """Every state write is a row of the transition table, from one of its states to
    its state (docs/processing.md; the table in dynamodb_inbox_transitions)."""
    found = []
    for event in world.history.states:
        if event.transition == "accept":
            allowed = event.from_state is None and event.to_state in transitions.ACCEPT_STATES
        else:
            row = _ROWS.get(event.transition)
            allowed = (
                row is not None
                and event.from_state in row.from_states
                and (row.listing_only or event.to_state is row.to_state)
            )
        if not allowed:
            before = "nothing" if event.from_state is None else event.from_state.value
            found.append(
                f"transitions_documented: {event.delivery_id}: {event.transition} moved it"
                f" from {before} to {event.to_state.value}, which the table does not allow"
            )
    return found


def _terminal_or_waiting(simulation: Simulation, delivery_id: str) -> list[str]:
    world = simulation.world
    truth = world.truth
    if delivery_id in truth.vanished:
        return [
            f"terminal_or_waiting: {delivery_id}: deleted by TTL while"
            f" {truth.vanished[delivery_id]}, never completed or failed"
        ]
    item = world.inbox.get(delivery_id)
    if item is None or item.state not in (State.PENDING, State.PROCESSING):
        return []
    if item.last_error == BudgetExhausted.code:
        needed = truth.refused_reservation.get(delivery_id, 0)
        if needed > world.budget_limit:
            return [
                f"terminal_or_waiting: {delivery_id}: waits for a budget that can never"
                f" afford it (a call reserves {needed}, the day's limit is {world.budget_limit})"
            ]
        return []  # waits for the next day's budget, visibly
    why = "the run's step bound" if simulation.cut else "nothing that will move it"
    return [
        f"terminal_or_waiting: {delivery_id}: left {item.state.value} ({item.last_error})"
        f" with {why}"
    ]


def _unknown_outcomes_visible(simulation: Simulation) -> list[str]:
    """An effect acted on, while its delivery's item exists: done, or listed in doubt."""
    world = simulation.world
    found = []
    for delivery_id in sorted(world.truth.accepted):
        item = world.inbox.get(delivery_id)
        if item is None or item.expires_at <= world.t:
            continue  # expired: TTL deletes its records in any order
        for name in sorted(world.far):
            side = world.far[name]
            if side.repeatable or name in ("model", "mcp"):
                continue
            key = f"{delivery_id}:{'alert' if name.startswith('alert') else name}"
            if not side.applied[key]:
                continue
            record = world.effects.get((delivery_id, name))
            if record is None and item.state is State.COMPLETED:
                continue  # the record may expire before its item
            if record is None or record.status is EffectStatus.NOT_APPLIED:
                state = "no record" if record is None else "recorded as not applied"
                found.append(
                    f"unknown_outcomes_visible: {delivery_id}: {name} was applied, {state}"
                    f" ({item.state.value}, {item.last_error})"
                )
    return found


def _definite_no_in_doubt(simulation: Simulation) -> list[str]:
    world = simulation.world
    found = []
    for (delivery_id, name), record in sorted(world.effects.items()):
        if record.status is not EffectStatus.INTENT:
            continue
        item = world.inbox.get(delivery_id)
        if item is None or item.state is not State.FAILED:
            continue  # only a finished delivery's intent is an operator's case
        side = world.far.get(name)
        if side is None or side.applied[record.key]:
            continue
        owner = world.truth.heard_no.get((delivery_id, name))
        if owner not in world.truth.finished or (delivery_id, name) in world.truth.unrecorded_no:
            continue  # the attempt that heard "no" died, or could not write it: unknown
        # Only the requests since the intent count: an intent nothing followed (its worker
        # died, or its answer was lost) is a real unknown.
        requests, definite = world.truth.at_intent.get((delivery_id, name), (0, 0))
        requests = side.requests[record.key] - requests
        definite = side.definite_no[record.key] - definite
        if requests and definite == requests:
            found.append(
                f"no_false_doubt: {delivery_id}: {name} left in doubt, though every answer"
                f" since its intent ({requests}) said it was not done"
            )
    return found
