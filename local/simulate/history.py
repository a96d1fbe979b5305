"""What the mechanisms did, in order: the seed's history, checked after the seed.

The end state shows what a mechanism broke only where nothing healed it: a relay that
drops a record is covered by the reconciler, a second live lease holder shows only
where it repeats an effect. So, as Jepsen checks a history rather than a final read,
the world notes each committed write of a mechanism as it happens (the store's side
of the request: what committed, not what its caller heard), and
:mod:`local.simulate.invariants` checks the list: one live holder per claim, outcomes
written by the lease's holder, states moving along the transition table, every outbox
record relayed, the reconciler re-enqueueing only what was lost.

The world calls the ``note_*`` methods from its ports (a line each), the run from the
relay's and the reconciler's invocations; nothing here decides an outcome. A world that
runs the adapters' own requests names a write's transition with :func:`transition_of`
(and its writer by the request's ``:owner``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters.dynamodb_conditions import condition_expression
from functions.core.models import State


@dataclass(frozen=True, slots=True)
class StateWritten:
    """A state change of the inbox item committed, by ``transition`` (a row of
    :mod:`functions.core.adapters.dynamodb_inbox_transitions`, or ``accept``)."""

    at: float
    delivery_id: str
    transition: str
    from_state: State | None  # None: the item was created
    to_state: State
    writer: str | None  # the claim owner the write named (None: no owner token)
    # A claim's: the claimer's clock when it claimed, and the lease it took (that clock).
    now: int | None = None
    lease_until: int | None = None


@dataclass(frozen=True, slots=True)
class Enqueued:
    """A work message reached the work queue, sent by a process of ``role``."""

    at: float
    delivery_id: str
    role: str


@dataclass(slots=True)
class History:
    """The seed's mechanism events, in the order they committed."""

    states: list[StateWritten] = field(default_factory=list)
    enqueued: list[Enqueued] = field(default_factory=list)
    # The relay's answers that no queue write backs, and failures no fault explains.
    relay_lies: list[str] = field(default_factory=list)
    # Re-enqueues by the reconciler: (time, delivery, what lost it ("" when nothing
    # did), seconds its state had not moved, when its queued copies were due).
    reconciler_sends: list[tuple[float, str, str, float, str]] = field(default_factory=list)
    # Effects each finished attempt ran through the ledger (owner -> (delivery, effect)).
    ran_effects: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    # Effects recorded done, by (delivery, effect): how (ledger, operator, completion).
    marked_done: dict[tuple[str, str], str] = field(default_factory=dict)
    # Other bytes under a known id that were not quarantined, or changed the item.
    other_bytes: list[str] = field(default_factory=list)
    # Step records started again over a recorded result (a second paid run).
    step_restarts: list[str] = field(default_factory=list)
    # Overlapping attempts the schedule staged (counted for the report).
    overlaps: Counter[str] = field(default_factory=Counter)
    # The digests of the packages each delivery's workflow ran on (by delivery id).
    packages: dict[str, set[str]] = field(default_factory=dict)

    def note_state(
        self,
        at: float,
        delivery_id: str,
        *,
        transition: str,
        from_state: State | None,
        to_state: State,
        writer: str | None = None,
        now: int | None = None,
        lease_until: int | None = None,
    ) -> None:
        self.states.append(
            StateWritten(
                at, delivery_id, transition, from_state, to_state, writer, now, lease_until
            )
        )

    def note_enqueued(self, at: float, delivery_id: str, *, role: str) -> None:
        self.enqueued.append(Enqueued(at, delivery_id, role))

    def note_done(self, delivery_id: str, name: str, *, how: str) -> None:
        self.marked_done.setdefault((delivery_id, name), how)


def transition_of(update_expression: str, condition: str) -> str | None:
    """The row of the transition table an ``UpdateItem`` of the inbox item carries out
    (None: no row), told by its update and condition expressions."""
    for row in transitions.TRANSITIONS:
        if (
            row.update_expression() == update_expression
            and condition_expression(row.condition) == condition
        ):
            return row.name
    return None
