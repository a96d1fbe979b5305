"""The effect ledger: an external effect is applied at most once per delivery.

``ledger.run(name, fn)`` writes an *intent* record before calling ``fn`` and a
*done* record after it, both in the table under the delivery's partition. An effect
declared ``repeatable`` gets no record at all: for it, "no record" and "intent without
done" lead to the same retry, a repeat, so a record would buy nothing. The ledger only
remembers its name (:attr:`EffectLedger.repeated`), and the completion of the delivery
marks it done on the inbox item (``ClaimStore.complete``); an attempt that does not
complete leaves no mark, and the next one applies it again. A retry of the same
delivery knows, per effect that is not repeatable:

* done: skip it;
* intent without done: the previous attempt died somewhere around the call, so
  the outcome is uncertain. Ask the downstream system with the effect's own
  ``reconcile`` check when it has one; else repeat it only if it is declared
  ``repeatable``; else stop and leave it to the reconciler or an operator
  (:class:`~functions.core.errors.UncertainEffect`), who resolves it as applied
  or not applied;
* not applied: ``fn`` raised :class:`~functions.core.errors.NotApplied` (it knows
  the effect did not happen), or an operator said so: as if there were no record.

Only a failure whose outcome is unknown (a timeout after sending, a connection lost
mid-request, a crash) leaves the intent for the next attempt to find uncertain.

Every call gets an idempotency key, ``<delivery_id>:<name>`` unless the workflow
chooses another: a downstream system that honours it makes even the uncertain
window harmless.

The ledger also records *steps* (:meth:`EffectLedger.step`, :mod:`functions.core.steps`):
work whose result later effects use, kept so that retries reuse it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from functions.core.clock import Clock
from functions.core.errors import NotApplied, TransientError, UncertainEffect
from functions.core.steps import StepRecorder, StepStorage

_EFFECT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


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


class EffectStore(Protocol):
    """Port: where intent and done records live (the table in production)."""

    def get(self, delivery_id: str, name: str) -> EffectRecord | None: ...

    def record_intent(
        self, delivery_id: str, name: str, *, key: str, now: int, expires_at: int
    ) -> bool:
        """Write the intent unless a record other than NOT_APPLIED exists; returns
        False when one did."""
        ...

    def record_done(self, delivery_id: str, name: str, *, now: int) -> None: ...

    def resolve_not_applied(self, delivery_id: str, name: str, *, now: int) -> bool:
        """Mark an intent NOT_APPLIED (no longer listed as uncertain); False when the
        record is not an intent (done, already cleared, or missing)."""
        ...


def idempotency_key(delivery_id: str, name: str) -> str:
    """The key every downstream call of effect ``name`` carries."""
    return f"{delivery_id}:{name}"


class EffectLedger:
    """The ledger of one delivery, handed to the workflow."""

    def __init__(
        self,
        delivery_id: str,
        *,
        store: EffectStore,
        clock: Clock,
        expires_at: int = 0,
        steps: StepStorage | None = None,
    ) -> None:
        self.delivery_id = delivery_id
        self._expires_at = expires_at
        self._store = store
        self._clock = clock
        self._steps = (
            None
            if steps is None
            else StepRecorder(delivery_id, storage=steps, clock=clock, expires_at=expires_at)
        )
        self._repeated: set[str] = set()

    @property
    def repeated(self) -> frozenset[str]:
        """The repeatable effects applied by this attempt: what the completion marks done."""
        return frozenset(self._repeated)

    def run(
        self,
        name: str,
        fn: Callable[[str], object],
        *,
        key: str | None = None,
        reconcile: Callable[[str], bool] | None = None,
        repeatable: bool = False,
    ) -> bool:
        """Apply effect ``name`` unless this delivery already applied it.

        Args:
            name: Stable name of the effect within the workflow (``[a-z0-9_.-]``).
            fn: Applies the effect; called with the idempotency key.
            key: Idempotency key; ``<delivery_id>:<name>`` by default.
            reconcile: Asks the downstream system whether the effect with this key
                was applied (True) or not (False); used when an earlier attempt
                left the outcome uncertain.
            repeatable: Repeating the effect reaches the same state (e.g. a put): it is
                applied on every attempt, with no record (see the module's docstring).

        Returns:
            True when ``fn`` ran in this call, False when it was skipped.

        Raises:
            UncertainEffect: The outcome of an earlier attempt is unknown and the
                effect can neither be checked nor repeated.
            NotApplied: ``fn`` raised it; the intent is cleared first.
        """
        _check_name(name, "effect")
        key = key or idempotency_key(self.delivery_id, name)
        if repeatable:
            fn(key)  # NotApplied: nothing recorded, the next attempt applies it as new
            self._repeated.add(name)
            return True
        record = _current(self._store.get(self.delivery_id, name))
        if record is None and not self._store.record_intent(
            self.delivery_id, name, key=key, now=self._clock.now(), expires_at=self._expires_at
        ):
            # Someone wrote a record between our read and our write: only a worker
            # whose lease expired can, so take the retry path with what it wrote.
            record = _current(self._store.get(self.delivery_id, name))
            if record is None:
                raise TransientError("effect_conflict")
        if record is not None:
            if record.status is EffectStatus.DONE:
                return False
            if reconcile is None:
                raise UncertainEffect()
            if reconcile(key):
                self._store.record_done(self.delivery_id, name, now=self._clock.now())
                return False
        try:
            fn(key)
        except NotApplied:
            # Certainly not applied: the next attempt applies it as new, not in doubt.
            self._store.resolve_not_applied(self.delivery_id, name, now=self._clock.now())
            raise
        self._store.record_done(self.delivery_id, name, now=self._clock.now())
        return True

    def step(self, name: str, fn: Callable[[], object]) -> Any:
        """The recorded result of step ``name``, calling ``fn`` only when there is none.

        Later effects should use this result, never a fresh ``fn()``: a retry then
        applies them with the same value the first attempt would have.

        Args:
            name: Stable name of the step within the workflow (``[a-z0-9_.-]``).
            fn: Does the work; returns a JSON-serialisable value.

        Returns:
            The result as stored (JSON-decoded), the same on every attempt.

        Raises:
            RuntimeError: The ledger was built without step storage.
        """
        _check_name(name, "step")
        if self._steps is None:
            raise RuntimeError("this effect ledger was built without step storage")
        return self._steps.run(name, fn)


def _check_name(name: str, kind: str) -> None:
    if not _EFFECT_NAME.match(name):
        raise ValueError(f"{kind} name {name!r} must match {_EFFECT_NAME.pattern}")


def _current(record: EffectRecord | None) -> EffectRecord | None:
    """The record that counts: one marked not applied counts as none."""
    if record is not None and record.status is EffectStatus.NOT_APPLIED:
        return None
    return record
