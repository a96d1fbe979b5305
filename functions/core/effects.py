"""The effect ledger: an external effect is applied at most once per delivery.

``ledger.run(name, fn, mode=...)`` writes an *intent* record before calling ``fn`` and
a *done* record after it, both in the table under the delivery's partition. Every
effect declares its **outcome mode** (:class:`EffectMode`): how an outcome the ledger
cannot know is settled. It cannot know it when an attempt ends between the intent and
the done record: the call timed out after sending, the connection was lost, the far
side answered 5xx after acting, or the worker died. A retry of the same delivery
then finds the intent, and the mode says what it does:

* ``repeatable``: run it again; repeating it reaches the same state (a put of the same
  bytes). Such an effect gets no record at all: "no record" and "intent without done"
  would lead to the same repeat. The ledger only remembers its name
  (:attr:`EffectLedger.repeated`) and the completion of the delivery marks it done on
  the inbox item (``ClaimStore.complete``);
* ``keyed``: the far side deduplicates on the idempotency key, so call it again with
  the *same* key (the one the intent recorded): a copy that already arrived is dropped
  there;
* ``checked``: ask the far side with the effect's ``reconcile`` lookup (key -> applied?)
  and call again only if it says not applied;
* ``operator`` (the default): stop. The delivery fails with
  :class:`~functions.core.errors.UncertainEffect`, counted and alarmed; the reconciler
  flags the intent and an operator resolves it as applied or not applied.

Whatever the mode, an effect the far side certainly did not apply is no doubt at all.
``fn`` says so by raising :class:`~functions.core.errors.NotApplied` (nothing was
done, try again later: the connection never opened, a "not processed" answer such as
429) or :class:`~functions.core.errors.Rejected` (refused for good, e.g. a 400: the
delivery fails with its code, visibly, and is not retried). Either way the ledger
clears the intent first, so nothing is left in doubt and a later attempt (after an
operator's requeue, say) applies the effect as new. Any other failure of ``fn`` leaves
the intent: its outcome is unknown.

Every call gets an idempotency key, ``<delivery_id>:<name>`` unless the workflow
chooses another: a downstream system that honours it makes even the uncertain
window harmless, and ``keyed`` says it does.

**The ledger's own writes may lose their answers too.** Each ledger (one per attempt)
writes a random *attempt* token into the intents it puts. An intent put that committed
but whose answer was lost (the SDK then retries it and finds the record; or the put
raises after committing) is recognised as this attempt's own by its token, and the
effect is applied as planned instead of being reported in doubt.

The ledger also records *steps* (:meth:`EffectLedger.step`, :mod:`functions.core.steps`):
work whose result later effects use, kept so that retries reuse it; and *model steps*
(:meth:`EffectLedger.model`, :mod:`functions.core.model_step`): one budgeted model
call whose answer is recorded the same way.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from functions.core.clock import Clock
from functions.core.errors import NotApplied, Rejected, TransientError, UncertainEffect
from functions.core.model_step import ModelCall, ModelReply
from functions.core.ports.effects import EffectMode, EffectRecord, EffectStatus, EffectStore
from functions.core.ports.model import ModelCaller
from functions.core.steps import StepRecorder, StepStorage

# EffectMode is named with the ledger by every workflow; it lives in the effects port,
# which the workflow port's ledger protocol (``Ledger``) shares.
__all__ = ["EffectLedger", "EffectMode", "idempotency_key", "new_attempt_token", "outcome_mode"]

PromptT = TypeVar("PromptT")

_EFFECT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


def new_attempt_token() -> str:
    """A fresh token that tells one attempt's intents from every other's."""
    return secrets.token_hex(8)


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
        attempt: str | None = None,
    ) -> None:
        self.delivery_id = delivery_id
        self.attempt = attempt or new_attempt_token()
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
    def expires_at(self) -> int:
        """When the delivery's records expire (0: not known); what a record it adds shares."""
        return self._expires_at

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
        mode: EffectMode | None = None,
        reconcile: Callable[[str], bool] | None = None,
        repeatable: bool = False,
    ) -> bool:
        """Apply effect ``name`` unless this delivery already applied it.

        Args:
            name: Stable name of the effect within the workflow (``[a-z0-9_.-]``).
            fn: Applies the effect; called with the idempotency key.
            key: Idempotency key; ``<delivery_id>:<name>`` by default.
            mode: How an unknown outcome of an earlier attempt is settled. Without
                it: ``repeatable`` if ``repeatable``, ``checked`` if ``reconcile``
                is given, else ``operator``.
            reconcile: The ``checked`` mode's lookup: asks the downstream system
                whether the effect with this key was applied (True) or not (False).
            repeatable: The same as ``mode=EffectMode.REPEATABLE`` (kept for workflows
                written before ``mode``).

        Returns:
            True when ``fn`` ran in this call, False when it was skipped.

        Raises:
            UncertainEffect: The outcome of an earlier attempt is unknown and the
                effect's mode is ``operator``.
            NotApplied: ``fn`` raised it; the intent is cleared first.
            Rejected: ``fn`` raised it; the intent is cleared first.
            ValueError: ``mode`` contradicts ``repeatable`` or ``reconcile``.
        """
        _check_name(name, "effect")
        mode = outcome_mode(mode, reconcile=reconcile, repeatable=repeatable)
        key = key or idempotency_key(self.delivery_id, name)
        if mode is EffectMode.REPEATABLE:
            fn(key)  # NotApplied: nothing recorded, the next attempt applies it as new
            self._repeated.add(name)
            return True
        record = _current(self._store.get(self.delivery_id, name))
        if record is None:
            record = self._write_intent(name, key)
        if record is not None:
            if record.status is EffectStatus.DONE:
                return False
            if mode is EffectMode.KEYED:
                key = record.key  # the key the far side may have seen
            elif mode is EffectMode.OPERATOR:
                if record.attempt != self.attempt:
                    raise UncertainEffect()  # (our own intent is not in doubt)
            elif reconcile is not None and reconcile(key):
                self._store.record_done(self.delivery_id, name, now=self._clock.now())
                return False
        try:
            fn(key)
        except (NotApplied, Rejected):
            # Certainly not applied: nothing is in doubt; a later attempt applies it as new.
            self._store.resolve_not_applied(self.delivery_id, name, now=self._clock.now())
            raise
        self._store.record_done(self.delivery_id, name, now=self._clock.now())
        return True

    def _write_intent(self, name: str, key: str) -> EffectRecord | None:
        """Write this attempt's intent; None when it is written, else the record found.

        A put whose answer was lost may still have committed (the SDK's retry of it
        then finds the record, or it raises): the record's attempt token tells ours
        from a rival's, so our own is never taken for an earlier attempt's, and is
        returned as read (an overlapping attempt may have completed it meanwhile).
        """
        failure: TransientError | None = None
        try:
            if self._store.record_intent(
                self.delivery_id,
                name,
                key=key,
                now=self._clock.now(),
                expires_at=self._expires_at,
                attempt=self.attempt,
            ):
                return None
        except TransientError as exc:
            failure = exc  # committed or not: the read below tells
        record = _current(self._store.get(self.delivery_id, name))
        if record is not None and record.attempt == self.attempt:
            # Ours, yet read back: an attempt that took over while we stalled (our lease
            # ran out) may have found it and applied the effect. Done: skip it; an
            # intent: applied as ours, a checked effect after its lookup.
            return record
        if record is None:
            # Our put failed, or a rival's record vanished between the two calls.
            raise failure or TransientError("effect_conflict")
        # Someone else's record: only a worker whose lease expired writes one between
        # our read and our write; take the retry path with what it wrote.
        return record

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

    def model(self, name: str, prompt: PromptT, client: ModelCaller[PromptT]) -> ModelReply:
        """The recorded reply of model step ``name``, asking ``client`` only when there is none.

        A step (:meth:`step`) whose work is one call of ``client`` on ``prompt``: the
        first answer is recorded, and every later attempt of the delivery gets that
        reply without calling the model (nor spending budget) again.

        Args:
            name: Stable name of the step within the workflow (``[a-z0-9_.-]``).
            prompt: What to ask (for the shipped client, an
                :class:`~functions.workflows.agent_prompt.AgentPrompt`).
            client: Makes the call under the day's token budget and counts it in the
                delivery's spend record (``functions.workflows.wiring.model_client``).

        Returns:
            The reply, the same on every attempt.

        Raises:
            Whatever the call raises while no reply is recorded: ``NotApplied``
            (throttled), ``BudgetExhausted``, ``PermanentError`` (``model_rejected``,
            ``budget_too_small``), ``TransientError`` (the outcome is unknown).
        """
        call = ModelCall(delivery_id=self.delivery_id, step=name, expires_at=self._expires_at)
        return ModelReply.from_record(
            self.step(name, lambda: client.answer(prompt, call).to_record())
        )


def outcome_mode(
    mode: EffectMode | None, *, reconcile: Callable[[str], bool] | None, repeatable: bool
) -> EffectMode:
    """The mode ``run`` applies: ``mode``, or the one the older keywords stand for.

    Raises:
        ValueError: ``mode`` says otherwise than ``repeatable`` or ``reconcile``, or
            ``checked`` comes without ``reconcile``.
    """
    if mode is None:
        if repeatable:
            return EffectMode.REPEATABLE
        return EffectMode.OPERATOR if reconcile is None else EffectMode.CHECKED
    if repeatable and mode is not EffectMode.REPEATABLE:
        raise ValueError(f"repeatable=True contradicts mode={mode.value}")
    if (reconcile is not None) != (mode is EffectMode.CHECKED):
        raise ValueError("reconcile= goes with mode=checked, and mode=checked needs it")
    return mode


def _check_name(name: str, kind: str) -> None:
    if not _EFFECT_NAME.match(name):
        raise ValueError(f"{kind} name {name!r} must match {_EFFECT_NAME.pattern}")


def _current(record: EffectRecord | None) -> EffectRecord | None:
    """The record that counts: one marked not applied counts as none."""
    if record is not None and record.status is EffectStatus.NOT_APPLIED:
        return None
    return record
