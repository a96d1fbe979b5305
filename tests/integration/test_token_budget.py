"""The daily token budget in DynamoDB: moto in-process, and moto's server for concurrency.

The concurrency tests run many threads against the local stack's AWS emulator (moto's
server behind one lock per request), which gives each request the atomicity DynamoDB
gives each item write; what they check is that our writes never overspend on top of it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError

from functions.core import table_layout
from functions.core.adapters.dynamodb_budget import (
    KIND_BUDGET,
    OPEN_RESERVATIONS,
    DynamoDbBudget,
    day_key,
)
from functions.core.budget import TokenBudget, next_day_starts
from functions.core.errors import BudgetTooSmall
from functions.core.ports.budget import BudgetDay
from local.aws_emulator import AwsEmulator
from local.aws_resources import create_table
from local.testkit.moto_world import REGION

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

NOW = 1_760_019_200  # 2025-10-09 14:13:20 UTC
TODAY = "2025-10-09"
THREADS = 8
RESERVATIONS_PER_THREAD = 50


@pytest.fixture
def store(dynamodb: DynamoDBClient, table: str) -> DynamoDbBudget:
    return DynamoDbBudget(client=dynamodb, table_name=table, default_limit=1000)


def test_first_reservation_opens_the_day_with_the_default_limit(
    store: DynamoDbBudget, dynamodb: DynamoDBClient, table: str
) -> None:
    budget = TokenBudget(store)
    assert budget.show(NOW) == BudgetDay(TODAY, limit=1000, reserved=0, used=0)
    assert dynamodb.get_item(TableName=table, Key=day_key(TODAY)).get("Item") is None
    reservation = budget.require(700, NOW)
    assert budget.reserve(301, NOW) is None
    item = dynamodb.get_item(TableName=table, Key=day_key(TODAY))["Item"]
    assert item[table_layout.TABLE_PARTITION_KEY]["S"] == f"budget#{TODAY}"
    assert item[table_layout.KIND_ATTRIBUTE]["S"] == KIND_BUDGET
    assert item["headroom"]["N"] == "300"
    assert int(item[table_layout.TTL_ATTRIBUTE]["N"]) > next_day_starts(NOW)
    assert table_layout.STATE_INDEX_PARTITION_KEY not in item
    budget.settle(reservation, 200)
    assert budget.show(NOW) == BudgetDay(TODAY, limit=1000, reserved=200, used=200)
    assert budget.reserve(800, NOW) is not None
    assert budget.reserve(1, NOW) is None


def test_operator_limit_applies_today_and_to_days_not_opened_yet(store: DynamoDbBudget) -> None:
    budget = TokenBudget(store)
    budget.require(1000, NOW)
    budget.set_limit(1500, NOW)
    assert budget.show(NOW) == BudgetDay(
        TODAY, limit=1500, reserved=1000, used=0, open_reservations=1
    )
    assert budget.reserve(500, NOW) is not None
    assert budget.reserve(1, NOW) is None
    tomorrow = next_day_starts(NOW)
    assert budget.show(tomorrow).limit == 1500
    budget.set_limit(200, NOW)  # lowered below what is reserved: nothing more today
    assert budget.reserve(1, NOW) is None
    assert budget.show(NOW).remaining == 0
    assert budget.reserve(200, tomorrow) is not None
    assert budget.reserve(1, tomorrow) is None


def test_limit_change_corrects_a_day_opened_with_the_old_limit_meanwhile(
    dynamodb: DynamoDBClient, table: str
) -> None:
    def open_with_the_old_limit() -> None:
        # A worker read the configured limit (100) before the operator's write, and
        # opens the day with it between the operator's read of the day and its put.
        dynamodb.put_item(
            TableName=table,
            Item={
                **day_key(TODAY),
                "limit": {"N": "100"},
                "headroom": {"N": "90"},
                "reserved": {"N": "10"},
                "used": {"N": "0"},
            },
        )

    opens = OpensDayFirst(dynamodb, open_with_the_old_limit)
    budget = TokenBudget(DynamoDbBudget(client=dynamodb, table_name=table, default_limit=100))
    budget.set_limit(500, NOW)
    assert opens.opened
    assert budget.show(NOW) == BudgetDay(TODAY, limit=500, reserved=10, used=0)
    assert budget.reserve(490, NOW) is not None
    assert budget.reserve(1, NOW) is None


class LostAnswers:
    """The answer to an ``UpdateItem`` that committed goes missing, once per :meth:`arm`.

    ``resend``: botocore's own retry sends the request again (a ``needs-retry`` hook
    asks for it, as after a 500 or a timeout). ``raise``: the client raises a read
    timeout, as when botocore's retries are spent, and the caller decides.
    """

    def __init__(self, client: DynamoDBClient, how: str) -> None:
        self._armed = False
        self.lost = 0
        if how == "resend":
            client.meta.events.register("needs-retry.dynamodb.UpdateItem", self._resend)
        else:
            client.meta.events.register("after-call.dynamodb.UpdateItem", self._raise)

    def arm(self) -> None:
        self._armed = True

    def _committed(self, status: int) -> bool:
        if not self._armed or status != 200:
            return False
        self._armed = False
        self.lost += 1
        return True

    def _resend(self, response: Any, **_: object) -> Any:  # the delay, or None: no resend
        if response is not None and self._committed(response[0].status_code):
            return 0  # seconds to wait before sending it again
        return None

    def _raise(self, http_response: Any, **_: object) -> None:
        if self._committed(http_response.status_code):
            raise ReadTimeoutError(endpoint_url="https://dynamodb.invalid")


@pytest.mark.parametrize("how", ["resend", "raise"])
def test_reservation_and_settlement_whose_answers_are_lost_count_once(
    dynamodb: DynamoDBClient, table: str, how: str
) -> None:
    store = DynamoDbBudget(client=dynamodb, table_name=table, default_limit=10_000)
    budget = TokenBudget(store)
    lost = LostAnswers(dynamodb, how)
    lost.arm()
    reservation = budget.require(4_000, NOW)
    assert budget.show(NOW) == BudgetDay(
        TODAY, limit=10_000, reserved=4_000, used=0, open_reservations=1
    )
    lost.arm()
    budget.settle(reservation, 1_000)
    assert lost.lost == 2
    assert budget.show(NOW) == BudgetDay(TODAY, limit=10_000, reserved=1_000, used=1_000)
    # Settled again (our own retry): nothing changes.
    budget.settle(reservation, 1_000)
    assert budget.show(NOW) == BudgetDay(TODAY, limit=10_000, reserved=1_000, used=1_000)
    # Freed tokens are exactly what the call did not use.
    assert budget.reserve(9_001, NOW) is None
    assert budget.reserve(9_000, NOW) is not None
    item = dynamodb.get_item(TableName=table, Key=day_key(TODAY))["Item"]
    assert item["headroom"]["N"] == "0"


def test_open_reservations_are_listed_on_the_day_until_settled(
    store: DynamoDbBudget, dynamodb: DynamoDBClient, table: str
) -> None:
    budget = TokenBudget(store)
    first, second = budget.require(100, NOW), budget.require(200, NOW)
    item = dynamodb.get_item(TableName=table, Key=day_key(TODAY))["Item"]
    assert set(item[OPEN_RESERVATIONS]["SS"]) == {first.id, second.id}
    budget.settle(first, 10)
    budget.settle(second, 20)
    item = dynamodb.get_item(TableName=table, Key=day_key(TODAY))["Item"]
    assert OPEN_RESERVATIONS not in item
    assert budget.show(NOW) == BudgetDay(TODAY, limit=1000, reserved=30, used=30)


def test_a_kept_reservation_stays_counted_and_leaves_the_open_ones(
    store: DynamoDbBudget,
) -> None:
    budget = TokenBudget(store)
    reservation = budget.require(300, NOW)
    budget.keep(reservation)  # the call's outcome is unknown
    budget.keep(reservation)
    assert budget.show(NOW) == BudgetDay(TODAY, limit=1000, reserved=300, used=0)
    budget.settle(reservation, 10)  # closed already: nothing moves
    assert budget.show(NOW) == BudgetDay(TODAY, limit=1000, reserved=300, used=0)


def test_a_call_larger_than_the_day_limit_is_refused_as_too_small(store: DynamoDbBudget) -> None:
    budget = TokenBudget(store)
    with pytest.raises(BudgetTooSmall) as raised:
        budget.require(1001, NOW)
    assert (raised.value.tokens, raised.value.limit) == (1001, 1000)
    assert budget.show(NOW).reserved == 0


class OpensDayFirst:
    """Lets someone else open the day just before ``client``'s put of it (a botocore hook
    on the client, which runs before the put is built and sent)."""

    def __init__(self, client: DynamoDBClient, open_day: Callable[[], None]) -> None:
        self._open_day = open_day
        self.opened = False
        client.meta.events.register("before-parameter-build.dynamodb.PutItem", self._before_put)

    def _before_put(self, params: dict[str, Any], **_: object) -> None:
        if (
            not self.opened
            and params["Item"][table_layout.TABLE_PARTITION_KEY]["S"] == f"budget#{TODAY}"
        ):
            self.opened = True
            self._open_day()


@pytest.fixture
def emulated_dynamodb() -> Iterator[tuple[Callable[[], Any], str]]:
    """A client factory for moto's server on loopback, and a fresh table in it."""
    emulator = AwsEmulator()
    emulator.start()
    table = f"budget-{uuid.uuid4().hex[:8]}"

    def client() -> DynamoDBClient:
        return boto3.client("dynamodb", region_name=REGION, endpoint_url=emulator.endpoint_url)

    try:
        create_table(client(), table)
        yield client, table
        client().delete_table(TableName=table)
    finally:
        emulator.stop()


def reserve_concurrently(
    budgets: list[TokenBudget], attempt: Callable[[TokenBudget, int], int | None]
) -> list[int]:
    """Every thread makes its attempts at once; returns the tokens of those admitted."""
    start = threading.Barrier(len(budgets))
    admitted: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(budget: TokenBudget) -> None:
        try:
            start.wait(timeout=30)
            for number in range(RESERVATIONS_PER_THREAD):
                tokens = attempt(budget, number)
                if tokens is not None:
                    with lock:
                        admitted.append(tokens)
        except BaseException as exc:  # a failing thread fails the test, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(b,)) for b in budgets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    return admitted


def test_concurrent_reservations_admit_exactly_the_limit(
    emulated_dynamodb: tuple[Callable[[], Any], str],
) -> None:
    client, table = emulated_dynamodb
    limit = 137  # of THREADS * RESERVATIONS_PER_THREAD = 400 one-token attempts
    budgets = [
        TokenBudget(DynamoDbBudget(client=client(), table_name=table, default_limit=limit))
        for _ in range(THREADS)
    ]

    def one_token(budget: TokenBudget, number: int) -> int | None:
        return 1 if budget.reserve(1, NOW) is not None else None

    admitted = reserve_concurrently(budgets, one_token)
    assert len(admitted) == limit
    assert budgets[0].show(NOW) == BudgetDay(
        TODAY, limit=limit, reserved=limit, used=0, open_reservations=limit
    )


def test_concurrent_reservations_and_settlements_keep_the_counters_exact(
    emulated_dynamodb: tuple[Callable[[], Any], str],
) -> None:
    client, table = emulated_dynamodb
    limit = 500
    budgets = [
        TokenBudget(DynamoDbBudget(client=client(), table_name=table, default_limit=limit))
        for _ in range(THREADS)
    ]

    def reserve_and_settle(budget: TokenBudget, number: int) -> int | None:
        reservation = budget.reserve(number % 7 + 1, NOW)  # 1..7 tokens
        if reservation is None:
            return None
        used = reservation.tokens // 2  # calls use less than reserved: settling frees some
        budget.settle(reservation, used)
        return used

    used = reserve_concurrently(budgets, reserve_and_settle)
    day = budgets[0].show(NOW)
    assert day.reserved == day.used == sum(used) <= limit
    item = client().get_item(TableName=table, Key=day_key(TODAY))["Item"]
    assert int(item["headroom"]["N"]) == limit - day.reserved
