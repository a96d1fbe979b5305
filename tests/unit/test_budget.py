"""The daily token budget: reserve within the limit, settle once, defer to the next UTC
day, and refuse at once a call no day can afford."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from functions.core.budget import Reservation, TokenBudget, budget_day, next_day_starts
from functions.core.errors import BudgetExhausted, BudgetTooSmall, PermanentError, TransientError
from functions.core.ports.budget import BudgetDay
from tests.fakes import FakeBudget

# 2025-10-09 14:13:20 UTC
NOW = 1_760_019_200
TODAY = "2025-10-09"
TOMORROW_STARTS = int(datetime(2025, 10, 10, tzinfo=UTC).timestamp())


def test_days_are_utc_days() -> None:
    assert budget_day(NOW) == TODAY
    assert next_day_starts(NOW) == TOMORROW_STARTS
    assert budget_day(TOMORROW_STARTS - 1) == TODAY
    assert budget_day(TOMORROW_STARTS) == "2025-10-10"
    assert next_day_starts(TOMORROW_STARTS) == TOMORROW_STARTS + 24 * 3600


def _numbered() -> TokenBudget:
    ids = iter(f"r{n}" for n in range(100))
    return TokenBudget(FakeBudget(default_limit=1000), new_id=lambda: next(ids))


def test_reserve_admits_until_the_limit_then_refuses() -> None:
    budget = _numbered()
    assert budget.reserve(600, NOW) == Reservation(TODAY, 600, "r0")
    assert budget.reserve(400, NOW) == Reservation(TODAY, 400, "r1")
    assert budget.reserve(1, NOW) is None
    assert budget.show(NOW) == BudgetDay(
        TODAY, limit=1000, reserved=1000, used=0, open_reservations=2
    )
    assert budget.reserve(1000, TOMORROW_STARTS) == Reservation("2025-10-10", 1000, "r3")


def test_every_reservation_has_an_id_of_its_own() -> None:
    budget = TokenBudget(FakeBudget(default_limit=1000))
    ids = {reservation.id for reservation in (budget.require(1, NOW) for _ in range(50))}
    assert len(ids) == 50


def test_settle_frees_what_a_call_did_not_use() -> None:
    budget = TokenBudget(FakeBudget(default_limit=1000))
    reservation = budget.require(800, NOW)
    assert budget.reserve(300, NOW) is None
    budget.settle(reservation, 250)
    assert budget.show(NOW) == BudgetDay(TODAY, limit=1000, reserved=250, used=250)
    assert budget.show(NOW).remaining == 750
    assert budget.reserve(300, NOW) is not None


def test_settling_twice_frees_the_unused_tokens_once() -> None:
    budget = TokenBudget(FakeBudget(default_limit=1000))
    reservation = budget.require(800, NOW)
    budget.settle(reservation, 300)
    budget.settle(reservation, 300)
    assert budget.show(NOW) == BudgetDay(TODAY, limit=1000, reserved=300, used=300)


def test_spent_budget_defers_to_the_next_utc_midnight() -> None:
    budget = TokenBudget(FakeBudget(default_limit=100))
    budget.require(100, NOW)
    with pytest.raises(BudgetExhausted) as raised:
        budget.require(1, NOW)
    assert isinstance(raised.value, TransientError)
    assert raised.value.code == "budget_exhausted"
    assert raised.value.retry_at == TOMORROW_STARTS


def test_a_call_larger_than_the_whole_day_fails_at_once_naming_the_budget() -> None:
    budget = TokenBudget(FakeBudget(default_limit=50))
    with pytest.raises(BudgetTooSmall) as raised:
        budget.require(51, NOW)
    assert isinstance(raised.value, PermanentError)
    assert raised.value.code == "budget_too_small"
    assert (raised.value.tokens, raised.value.limit) == (51, 50)
    assert budget.show(NOW).reserved == 0
    # The same call on a day merely spent waits instead.
    budget.set_limit(100, NOW)
    budget.require(60, NOW)
    with pytest.raises(BudgetExhausted):
        budget.require(51, NOW)


def test_a_limit_of_zero_pauses_calls_instead_of_failing_them() -> None:
    budget = TokenBudget(FakeBudget(default_limit=1000))
    budget.set_limit(0, NOW)
    with pytest.raises(BudgetExhausted):
        budget.require(1, NOW)


def test_operator_raises_the_limit_for_today_and_later_days() -> None:
    budget = TokenBudget(FakeBudget(default_limit=100))
    budget.require(100, NOW)
    budget.set_limit(150, NOW)
    assert budget.reserve(50, NOW) is not None
    assert budget.reserve(1, NOW) is None
    assert budget.show(TOMORROW_STARTS).limit == 150


def test_nonsense_amounts_are_refused() -> None:
    budget = TokenBudget(FakeBudget(default_limit=100))
    with pytest.raises(ValueError, match="positive"):
        budget.reserve(0, NOW)
    with pytest.raises(ValueError, match="negative"):
        budget.settle(Reservation(TODAY, 5, "r0"), -1)
    with pytest.raises(ValueError, match="negative"):
        budget.set_limit(-1, NOW)
