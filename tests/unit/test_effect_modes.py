"""The effect ledger's outcome modes, and its own writes whose answers were lost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from functions.core.effects import EffectLedger, EffectMode, outcome_mode
from functions.core.errors import (
    NotApplied,
    PermanentError,
    Rejected,
    StorageUnavailable,
    TransientError,
    UncertainEffect,
)
from functions.core.ports.effects import EffectStatus
from local.testkit.clock import FakeClock

if TYPE_CHECKING:
    from collections.abc import Callable

DELIVERY = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"
KEY = f"{DELIVERY}:notify"


@dataclass
class FarSide:
    """A downstream system: applies each call, deduplicating on the key when ``keyed``.

    ``then_fail`` is raised *after* applying (the far side acted, its answer was lost).
    """

    keyed: bool = False
    then_fail: list[BaseException] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)

    def apply(self, key: str) -> None:
        self.calls.append(key)
        if not (self.keyed and key in self.applied):
            self.applied.append(key)
        if self.then_fail:
            raise self.then_fail.pop(0)

    def was_applied(self, key: str) -> bool:
        return key in self.applied


class LosingStore:
    """An effect store whose named writes commit, then lose their answer (raise)."""

    def __init__(self, inner: Any, *, lose: dict[str, int]) -> None:
        self._inner = inner
        self.lose = dict(lose)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)
        if name not in self.lose:
            return method

        def committed_then_lost(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if self.lose[name] > 0:
                self.lose[name] -= 1
                raise StorageUnavailable()
            return result

        return committed_then_lost


def attempt(store: Any) -> EffectLedger:
    """A new attempt's ledger (a fresh attempt token)."""
    return EffectLedger(DELIVERY, store=store, clock=FakeClock(), expires_at=0)


def run_keyed(store: Any, far: FarSide) -> bool:
    return attempt(store).run("notify", far.apply, mode=EffectMode.KEYED)


# --- modes ----------------------------------------------------------------------------


def test_keyed_effect_of_unknown_outcome_is_retried_with_the_same_key(store: Any) -> None:
    far = FarSide(keyed=True, then_fail=[TransientError("notify_unconfirmed")])
    with pytest.raises(TransientError):
        attempt(store).run("notify", far.apply, key="order-17", mode=EffectMode.KEYED)
    assert store.get(DELIVERY, "notify").status is EffectStatus.INTENT
    # The retry (its workflow now passing no key) calls again with the recorded key.
    assert run_keyed(store, far) is True
    assert far.calls == ["order-17", "order-17"]
    assert far.applied == ["order-17"]
    assert store.get(DELIVERY, "notify").status is EffectStatus.DONE
    assert run_keyed(store, far) is False
    assert len(far.calls) == 2


def test_operator_mode_is_the_default_and_leaves_an_unknown_outcome_in_doubt(store: Any) -> None:
    far = FarSide(then_fail=[TransientError("notify_unconfirmed")])
    with pytest.raises(TransientError):
        attempt(store).run("notify", far.apply)
    with pytest.raises(UncertainEffect):
        attempt(store).run("notify", far.apply, mode=EffectMode.OPERATOR)
    with pytest.raises(UncertainEffect):
        attempt(store).run("notify", far.apply)
    assert far.calls == [KEY]


def test_checked_mode_asks_the_far_side(store: Any) -> None:
    far = FarSide(then_fail=[TransientError("notify_unconfirmed")])
    with pytest.raises(TransientError):
        attempt(store).run("notify", far.apply, mode=EffectMode.CHECKED, reconcile=far.was_applied)
    ran = attempt(store).run(
        "notify", far.apply, mode=EffectMode.CHECKED, reconcile=far.was_applied
    )
    assert ran is False
    assert far.calls == [KEY]
    assert store.get(DELIVERY, "notify").status is EffectStatus.DONE


def test_older_keywords_map_onto_modes() -> None:
    def check(key: str) -> bool:
        return False

    assert outcome_mode(None, reconcile=None, repeatable=False) is EffectMode.OPERATOR
    assert outcome_mode(None, reconcile=None, repeatable=True) is EffectMode.REPEATABLE
    assert outcome_mode(None, reconcile=check, repeatable=False) is EffectMode.CHECKED
    # As before modes: repeatable wins over a reconcile check passed with it.
    assert outcome_mode(None, reconcile=check, repeatable=True) is EffectMode.REPEATABLE
    assert outcome_mode(EffectMode.KEYED, reconcile=None, repeatable=False) is EffectMode.KEYED
    with pytest.raises(ValueError, match="contradicts"):
        outcome_mode(EffectMode.KEYED, reconcile=None, repeatable=True)
    with pytest.raises(ValueError, match="reconcile"):
        outcome_mode(EffectMode.CHECKED, reconcile=None, repeatable=False)
    with pytest.raises(ValueError, match="reconcile"):
        outcome_mode(EffectMode.KEYED, reconcile=check, repeatable=False)


@pytest.mark.parametrize("mode", [EffectMode.OPERATOR, EffectMode.KEYED])
def test_definite_rejection_fails_without_leaving_the_effect_in_doubt(
    store: Any, mode: EffectMode
) -> None:
    far = FarSide()

    def refuse(key: str) -> None:
        far.calls.append(key)
        raise Rejected("notify_rejected")

    with pytest.raises(Rejected, match="notify_rejected"):
        attempt(store).run("notify", refuse, mode=mode)
    assert store.get(DELIVERY, "notify").status is EffectStatus.NOT_APPLIED
    # Fixed and requeued: applied as new, not in doubt.
    assert attempt(store).run("notify", far.apply, mode=mode) is True
    assert far.applied == [KEY]


def test_other_permanent_errors_leave_the_outcome_unknown(store: Any) -> None:
    """Only ``Rejected`` proves nothing was done; a plain give-up may follow an action."""
    far = FarSide(then_fail=[PermanentError("alert_redirected")])
    with pytest.raises(PermanentError):
        attempt(store).run("notify", far.apply)
    assert store.get(DELIVERY, "notify").status is EffectStatus.INTENT


# --- lost answers: each write of the ledger commits, then its caller hears an error ---------


def test_own_intent_whose_answer_was_lost_is_not_in_doubt(store: Any) -> None:
    far = FarSide()
    losing = LosingStore(store, lose={"record_intent": 1})
    assert attempt(losing).run("notify", far.apply) is True  # the default mode: operator
    assert far.calls == [KEY]
    assert store.get(DELIVERY, "notify").status is EffectStatus.DONE


@pytest.mark.parametrize("mode", [EffectMode.KEYED, EffectMode.CHECKED])
def test_own_intent_whose_answer_was_lost_is_applied_once_in_every_mode(
    store: Any, mode: EffectMode
) -> None:
    far = FarSide()
    losing = LosingStore(store, lose={"record_intent": 1})
    reconcile: Callable[[str], bool] | None = (
        far.was_applied if mode is EffectMode.CHECKED else None
    )
    assert attempt(losing).run("notify", far.apply, mode=mode, reconcile=reconcile) is True
    assert far.calls == [KEY]
    assert store.get(DELIVERY, "notify").status is EffectStatus.DONE


def test_own_intent_found_by_a_retried_put_is_not_in_doubt(store: Any) -> None:
    """The SDK's retry of a put that committed finds the record: it is our own."""
    far = FarSide()

    class RetriedPut(LosingStore):
        def record_intent(self, *args: Any, **kwargs: Any) -> bool:
            store.record_intent(*args, **kwargs)  # the first try commits, its answer lost
            return bool(store.record_intent(*args, **kwargs))  # the retry: condition fails

    assert attempt(RetriedPut(store, lose={})).run("notify", far.apply) is True
    assert far.calls == [KEY]


@pytest.mark.parametrize("mode", [EffectMode.KEYED, EffectMode.CHECKED])
def test_own_intent_completed_by_an_overlapping_attempt_is_not_applied_again(
    store: Any, mode: EffectMode
) -> None:
    """Our intent commits and its answer is lost; before we read it back our process
    stalls past its lease, and the next attempt (finding our intent) applies the effect
    and marks it done. Our own token on a done record means done, not ours to apply."""
    far = FarSide()
    reconcile: Callable[[str], bool] | None = (
        far.was_applied if mode is EffectMode.CHECKED else None
    )

    class OvertakenPut(LosingStore):
        def record_intent(self, *args: Any, **kwargs: Any) -> bool:
            store.record_intent(*args, **kwargs)  # commits; its answer never comes
            attempt(store).run("notify", far.apply, mode=mode, reconcile=reconcile)
            raise StorageUnavailable()

    stalled = attempt(OvertakenPut(store, lose={}))
    assert stalled.run("notify", far.apply, mode=mode, reconcile=reconcile) is False
    assert far.calls == [KEY]
    assert store.get(DELIVERY, "notify").status is EffectStatus.DONE


def test_a_rivals_intent_is_still_in_doubt(store: Any) -> None:
    far = FarSide(then_fail=[TransientError("notify_unconfirmed")])
    with pytest.raises(TransientError):
        attempt(store).run("notify", far.apply)
    losing = LosingStore(store, lose={"record_intent": 1})
    with pytest.raises(UncertainEffect):
        attempt(losing).run("notify", far.apply)
    assert far.calls == [KEY]


def test_intent_put_that_failed_without_committing_is_retried_as_new(store: Any) -> None:
    far = FarSide()

    class FailingPut(LosingStore):
        def record_intent(self, *args: Any, **kwargs: Any) -> bool:
            raise StorageUnavailable()

    with pytest.raises(StorageUnavailable):
        attempt(FailingPut(store, lose={})).run("notify", far.apply)
    assert far.calls == []
    assert attempt(store).run("notify", far.apply) is True
    assert far.applied == [KEY]


@pytest.mark.parametrize("mode", [EffectMode.OPERATOR, EffectMode.KEYED])
def test_done_record_whose_answer_was_lost_is_skipped_next_time(
    store: Any, mode: EffectMode
) -> None:
    far = FarSide()
    with pytest.raises(StorageUnavailable):
        attempt(LosingStore(store, lose={"record_done": 1})).run("notify", far.apply, mode=mode)
    assert attempt(store).run("notify", far.apply, mode=mode) is False
    assert far.calls == [KEY]


def test_checked_done_record_whose_answer_was_lost_is_skipped_next_time(store: Any) -> None:
    far = FarSide(then_fail=[TransientError("notify_unconfirmed")])
    with pytest.raises(TransientError):
        attempt(store).run("notify", far.apply, reconcile=far.was_applied)
    losing = LosingStore(store, lose={"record_done": 1})
    with pytest.raises(StorageUnavailable):  # the lookup said applied; its done write lost
        attempt(losing).run("notify", far.apply, reconcile=far.was_applied)
    assert attempt(store).run("notify", far.apply, reconcile=far.was_applied) is False
    assert far.calls == [KEY]


@pytest.mark.parametrize("refusal", [NotApplied("notify_unavailable"), Rejected("x_rejected")])
def test_cleared_intent_whose_answer_was_lost_runs_as_new_next_time(
    store: Any, refusal: Exception
) -> None:
    far = FarSide()
    losing = LosingStore(store, lose={"resolve_not_applied": 1})
    with pytest.raises(StorageUnavailable):
        attempt(losing).run("notify", lambda key: _raise(refusal))
    assert attempt(store).run("notify", far.apply) is True
    assert far.applied == [KEY]


def test_keyed_retry_after_the_far_side_acted_and_the_answer_was_lost(store: Any) -> None:
    far = FarSide(keyed=True, then_fail=[TransientError("a"), TransientError("b")])
    for _ in range(2):
        with pytest.raises(TransientError):
            run_keyed(store, far)
    assert run_keyed(store, far) is True
    assert far.calls == [KEY, KEY, KEY]
    assert far.applied == [KEY]


def _raise(exc: BaseException) -> None:
    raise exc
