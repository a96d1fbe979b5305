"""The effect ledger: done skips, uncertain intents reconcile, repeat or stop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from functions.core import table_layout
from functions.core.adapters.dynamodb_effects import DynamoDbEffects, effect_key
from functions.core.effects import EffectLedger, idempotency_key
from functions.core.errors import NotApplied, TransientError, UncertainEffect
from functions.core.ports.effects import EffectStatus
from local.testkit.clock import FakeClock

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

DELIVERY = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"


class Downstream:
    """Counts every application per key, like the notify sink."""

    def __init__(self, *, fail_with: BaseException | None = None) -> None:
        self.applied: list[str] = []
        self.fail_with = fail_with

    def apply(self, key: str) -> None:
        self.applied.append(key)
        if self.fail_with is not None:
            raise self.fail_with

    def was_applied(self, key: str) -> bool:
        return key in self.applied


class Crash(BaseException):
    """The process dies here (not an error any code handles)."""


def ledger(store: Any, clock: FakeClock | None = None) -> EffectLedger:
    return EffectLedger(DELIVERY, store=store, clock=clock or FakeClock(), expires_at=0)


def test_run_applies_once_and_skips_when_done(store: Any) -> None:
    downstream = Downstream()
    assert ledger(store).run("notify", downstream.apply) is True
    assert ledger(store).run("notify", downstream.apply) is False
    assert downstream.applied == [f"{DELIVERY}:notify"]
    record = store.get(DELIVERY, "notify")
    assert record.status is EffectStatus.DONE
    assert record.key == idempotency_key(DELIVERY, "notify")


def test_run_passes_a_chosen_key(store: Any) -> None:
    downstream = Downstream()
    ledger(store).run("charge", downstream.apply, key="order-17")
    assert downstream.applied == ["order-17"]


def test_uncertain_intent_with_reconcile_saying_applied_is_not_repeated(store: Any) -> None:
    downstream = Downstream()

    def apply_then_crash(key: str) -> None:
        downstream.apply(key)
        raise Crash  # applied, then died before the done record

    with pytest.raises(Crash):
        ledger(store).run("notify", apply_then_crash)
    assert store.get(DELIVERY, "notify").status is EffectStatus.INTENT
    ran = ledger(store).run("notify", downstream.apply, reconcile=downstream.was_applied)
    assert ran is False
    assert len(downstream.applied) == 1
    assert store.get(DELIVERY, "notify").status is EffectStatus.DONE


def test_uncertain_intent_with_reconcile_saying_not_applied_runs(store: Any) -> None:
    downstream = Downstream()
    with pytest.raises(Crash):
        ledger(store).run("notify", lambda key: _raise(Crash()))  # died before the call
    assert ledger(store).run("notify", downstream.apply, reconcile=downstream.was_applied)
    assert downstream.applied == [f"{DELIVERY}:notify"]


def test_uncertain_repeatable_effect_is_repeated(store: Any) -> None:
    downstream = Downstream(fail_with=TransientError("archive_unavailable"))
    with pytest.raises(TransientError):
        ledger(store).run("archive", downstream.apply, repeatable=True)
    downstream.fail_with = None
    assert ledger(store).run("archive", downstream.apply, repeatable=True) is True
    assert len(downstream.applied) == 2


def test_repeatable_effect_writes_no_record_and_is_named_for_the_completion(store: Any) -> None:
    downstream = Downstream(fail_with=Crash())
    with pytest.raises(Crash):
        ledger(store).run("archive", downstream.apply, repeatable=True)
    # Died around the call: no record, so the next attempt applies it (as an intent would).
    assert store.get(DELIVERY, "archive") is None
    downstream.fail_with = None
    attempt = ledger(store)
    assert attempt.run("archive", downstream.apply, repeatable=True) is True
    assert attempt.run("notify", downstream.apply) is True
    # Still no record of its own: the completion marks what this attempt applied.
    assert store.get(DELIVERY, "archive") is None
    assert attempt.repeated == {"archive"}
    # A retry (the completion did not happen) repeats it: that is what repeatable means.
    again = ledger(store)
    assert again.run("archive", downstream.apply, repeatable=True) is True
    assert again.run("notify", downstream.apply) is False  # not repeatable: done, skipped
    archive, notify = f"{DELIVERY}:archive", f"{DELIVERY}:notify"
    assert downstream.applied == [archive, archive, notify, archive]


def test_repeatable_effect_that_says_not_applied_is_not_named(store: Any) -> None:
    attempt = ledger(store)
    with pytest.raises(NotApplied):
        attempt.run("archive", lambda key: _raise(NotApplied()), repeatable=True)
    assert attempt.repeated == frozenset()
    assert store.get(DELIVERY, "archive") is None


def test_repeatable_effect_ignores_an_intent_an_older_version_left(store: Any) -> None:
    store.record_intent(DELIVERY, "archive", key="k", now=1, expires_at=0)
    downstream = Downstream()
    attempt = ledger(store)
    assert attempt.run("archive", downstream.apply, repeatable=True) is True
    assert attempt.repeated == {"archive"}


def test_repeatable_effect_writes_nothing_to_the_table(
    dynamodb: DynamoDBClient, table: str
) -> None:
    store = DynamoDbEffects(client=dynamodb, table_name=table)
    ledger(store).run("archive", Downstream().apply, repeatable=True)
    assert "Item" not in dynamodb.get_item(TableName=table, Key=effect_key(DELIVERY, "archive"))
    assert dynamodb.scan(TableName=table)["Count"] == 0


def test_uncertain_effect_without_check_stops(store: Any) -> None:
    downstream = Downstream(fail_with=TransientError("notify_unavailable"))
    with pytest.raises(TransientError):
        ledger(store).run("notify", downstream.apply)
    downstream.fail_with = None
    with pytest.raises(UncertainEffect):
        ledger(store).run("notify", downstream.apply)
    assert len(downstream.applied) == 1


def test_effect_that_was_certainly_not_applied_runs_as_new_next_time(store: Any) -> None:
    downstream = Downstream(fail_with=NotApplied("notify_unavailable"))
    with pytest.raises(NotApplied, match="notify_unavailable"):
        ledger(store).run("notify", downstream.apply)
    assert store.get(DELIVERY, "notify").status is EffectStatus.NOT_APPLIED
    downstream.fail_with = None
    # Neither reconcile nor repeatable: only a cleared intent lets it run again.
    assert ledger(store).run("notify", downstream.apply) is True
    assert len(downstream.applied) == 2
    assert store.get(DELIVERY, "notify").status is EffectStatus.DONE


def test_not_applied_after_an_uncertain_intent_clears_it_too(store: Any) -> None:
    downstream = Downstream(fail_with=TransientError("notify_timeout"))
    with pytest.raises(TransientError):
        ledger(store).run("notify", downstream.apply)
    downstream.fail_with = NotApplied("notify_unavailable")
    with pytest.raises(NotApplied):
        ledger(store).run("notify", downstream.apply, reconcile=lambda key: False)
    assert store.get(DELIVERY, "notify").status is EffectStatus.NOT_APPLIED


def test_operator_resolves_an_uncertain_effect(store: Any) -> None:
    downstream = Downstream(fail_with=TransientError("notify_timeout"))
    for name in ("applied", "not-applied"):
        with pytest.raises(TransientError):
            ledger(store).run(name, downstream.apply)
    downstream.fail_with = None
    assert store.resolve_applied(DELIVERY, "applied", now=5) is True
    assert store.resolve_not_applied(DELIVERY, "not-applied", now=5) is True
    # Only an effect still in doubt is resolved.
    assert store.resolve_not_applied(DELIVERY, "applied", now=6) is False
    assert store.resolve_applied(DELIVERY, "not-applied", now=6) is False
    assert store.resolve_applied(DELIVERY, "never-intended", now=6) is False
    assert ledger(store).run("applied", downstream.apply) is False
    assert ledger(store).run("not-applied", downstream.apply) is True
    assert downstream.applied[2:] == [f"{DELIVERY}:not-applied"]


def test_effect_names_are_checked(store: Any) -> None:
    with pytest.raises(ValueError, match="effect name"):
        ledger(store).run("Notify Me#", lambda key: None)


def test_intent_is_listed_until_done_and_flagged_once(dynamodb: DynamoDBClient, table: str) -> None:
    store = DynamoDbEffects(client=dynamodb, table_name=table)
    clock = FakeClock()
    assert store.record_intent(DELIVERY, "notify", key="k", now=clock.value, expires_at=99) is True
    assert store.record_intent(DELIVERY, "notify", key="k", now=clock.value, expires_at=99) is False
    item = dynamodb.get_item(TableName=table, Key=effect_key(DELIVERY, "notify"))["Item"]
    assert item[table_layout.KIND_ATTRIBUTE]["S"] == table_layout.KIND_EFFECT
    assert item[table_layout.TTL_ATTRIBUTE]["N"] == "99"
    assert item[table_layout.STATE_INDEX_PARTITION_KEY]["S"].startswith("effect_intent#")
    assert list(store.uncertain(intended_before=clock.value, page_size=10)) == []
    listed = list(store.uncertain(intended_before=clock.value + 1, page_size=10))
    assert [(r.delivery_id, r.name) for r in listed] == [(DELIVERY, "notify")]
    assert store.flag(listed[0], now=clock.value + 1) is True
    assert store.flag(listed[0], now=clock.value + 2) is False
    assert list(store.uncertain(intended_before=clock.value + 10, page_size=10)) == []
    store.record_done(DELIVERY, "notify", now=clock.value + 3)
    item = dynamodb.get_item(TableName=table, Key=effect_key(DELIVERY, "notify"))["Item"]
    assert table_layout.STATE_INDEX_PARTITION_KEY not in item
    assert "flagged_at" not in item
    assert store.flag(listed[0], now=clock.value + 4) is False


def test_uncertain_lists_every_intent_page_by_page(dynamodb: DynamoDBClient, table: str) -> None:
    store = DynamoDbEffects(client=dynamodb, table_name=table)
    clock = FakeClock()
    ids = [f"11111111-1111-4111-8111-{n:012d}" for n in range(25)]
    for delivery_id in ids:
        store.record_intent(delivery_id, "notify", key="k", now=clock.value, expires_at=0)
    store.flag(next(iter(store.uncertain(intended_before=clock.value + 1, page_size=1))), now=1)
    listed = store.uncertain(intended_before=clock.value + 1, page_size=4)
    assert len({r.delivery_id for r in listed}) == 24  # all but the flagged one


def _raise(exc: BaseException) -> None:
    raise exc
