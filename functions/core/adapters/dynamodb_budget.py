"""The daily token budget in DynamoDB (the :class:`~functions.core.ports.budget.BudgetStore` port).

Two kinds of item, in the table beside the deliveries (never in the state index):

* ``pk = budget#<YYYY-MM-DD>``, ``sk = budget``: one UTC day. ``limit`` is copied
  from the configured limit when the day is first used; ``reserved`` and ``used``
  count tokens; ``headroom`` is ``limit - reserved``, kept by the same writes;
  ``open_reservations`` is the string set of the ids of the reservations not settled
  yet (absent when there are none).
* ``pk = budget#limit``, ``sk = budget``: the configured limit, set by an operator;
  without it, the limit the adapter is built with.

A condition expression can compare attributes but cannot add, so a reservation cannot
say ``reserved + :n <= limit``. It says ``headroom >= :n`` and moves both counters in
the same UpdateItem, which DynamoDB applies atomically: concurrent reservations never
overspend. A limit change moves ``limit`` and ``headroom`` together the same way.

**Each reservation and each settlement applies once.** A write whose answer is lost
(a timeout, a 500 after the commit) is sent again, by botocore's retries or by this
adapter, and a plain ``ADD`` would count twice: a settlement applied twice frees
tokens that were spent. So the same UpdateItem that moves the counters adds the
reservation's id to ``open_reservations`` (on condition that it is not there yet), and
its settlement removes it (on condition that it is there). A resent reservation finds
its id and is reported admitted; a resent settlement finds it gone and does nothing.
A call whose outcome is unknown is *kept*: its id leaves the set, its tokens stay
counted at the estimate.
The ids live on the day item itself, not in items of their own written in a
transaction: a day is one hot item that every worker writes, single-item updates on
it never conflict (concurrent transactions on one item cancel each other) and cost a
quarter of a two-item transaction's write units. The set holds only the reservations
in flight and the few a dead worker left (counted at their estimate for good), so the
item stays small: a write's units grow with the item's size.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_requests
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.budget import DAY_SECONDS
from functions.core.errors import StorageUnavailable, TransientError
from functions.core.ports.budget import BudgetDay

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

DAY_PK_PREFIX: Final = "budget#"  # + YYYY-MM-DD
LIMIT_PK: Final = "budget#limit"
SK_BUDGET: Final = "budget"
KIND_BUDGET: Final = "budget"
DAY_RETENTION_SECONDS: Final = 90 * DAY_SECONDS  # a quarter of history to look back on
# Attempts of a limit change against concurrent ones (each retry re-reads the day).
_LIMIT_CHANGE_TRIES: Final = 5
# Sends of one reservation or settlement whose outcome was unknown (the answer lost
# after botocore's own retries): safe, since each applies once.
_SENDS: Final = 2
OPEN_RESERVATIONS: Final = "open_reservations"

_NEW_DAY: Condition = (
    ("attribute_not_exists(pk)", "a day is opened once; its counters are never reset"),
)
_AFFORDABLE: Condition = (
    ("attribute_exists(pk)", "a day is opened with its limit before anything is counted"),
    ("#headroom >= :tokens", "the day's total stays within its limit"),
    ("NOT contains(#open, :id)", "a reservation resent after it committed counts once"),
)
_SAME_LIMIT: Condition = (
    ("#limit = :old", "headroom moves by the change from the limit it was computed with"),
)
_OPEN: Condition = (
    # Also false when the day does not exist: a settlement never creates one.
    ("contains(#open, :id)", "a reservation is settled once; a resent settlement finds it gone"),
)
_NAMES: Final = {
    "#limit": "limit",
    "#reserved": "reserved",
    "#used": "used",
    "#headroom": "headroom",
    "#open": OPEN_RESERVATIONS,
}


def day_key(day: str) -> dynamodb_items.Item:
    return dynamodb_items.key(DAY_PK_PREFIX + day, SK_BUDGET)


def limit_key() -> dynamodb_items.Item:
    return dynamodb_items.key(LIMIT_PK, SK_BUDGET)


def day_from_item(day: str, item: dynamodb_items.Item) -> BudgetDay:
    return BudgetDay(
        day=day,
        limit=int(item["limit"]["N"]),
        reserved=int(item["reserved"]["N"]),
        used=int(item["used"]["N"]),
        open_reservations=len(item.get(OPEN_RESERVATIONS, {}).get("SS", [])),
    )


class DynamoDbBudget:
    """Token budget days and the configured limit, in the table."""

    def __init__(self, *, client: DynamoDBClient, table_name: str, default_limit: int) -> None:
        self._client = client
        self._table = table_name
        self._default_limit = default_limit

    def reserve(self, day: str, tokens: int, *, reservation_id: str) -> bool:
        # Two passes: the first finds the day unopened at most once, opens it, retries.
        for _ in range(2):
            written = self._update(
                day,
                "ADD #reserved :tokens, #headroom :minus, #open :ids",
                _AFFORDABLE,
                {
                    ":tokens": _number(tokens),
                    ":minus": _number(-tokens),
                    ":ids": {"SS": [reservation_id]},
                    ":id": {"S": reservation_id},
                },
                sends=_SENDS,
            )
            if written.written:
                return True
            if written.item is not None:
                # Ours already (an earlier send committed), or opened and spent.
                return reservation_id in written.item.get(OPEN_RESERVATIONS, {}).get("SS", [])
            self._open(day, self._configured_limit())
        raise TransientError("budget_conflict")  # opened, yet not there: the table changed

    def settle(self, day: str, *, reservation_id: str, reserved: int, used: int) -> None:
        difference = used - reserved
        self._update(
            day,
            "DELETE #open :ids ADD #reserved :difference, #headroom :minus, #used :used",
            _OPEN,
            {
                ":difference": _number(difference),
                ":minus": _number(-difference),
                ":used": _number(used),
                ":ids": {"SS": [reservation_id]},
                ":id": {"S": reservation_id},
            },
            sends=_SENDS,
        )  # refused when settled already (a resent write) or the day expired: nothing to do

    def keep(self, day: str, *, reservation_id: str) -> None:
        self._update(
            day,
            "DELETE #open :ids",
            _OPEN,
            {":ids": {"SS": [reservation_id]}, ":id": {"S": reservation_id}},
            sends=_SENDS,
        )  # refused when settled or kept already: nothing to do

    def set_limit(self, day: str, tokens: int) -> None:
        dynamodb_requests.conditional(
            self._client.put_item,
            TableName=self._table,
            Item={
                **limit_key(),
                table_layout.KIND_ATTRIBUTE: {"S": KIND_BUDGET},
                "limit": _number(tokens),
            },
        )
        # Then the current day, which may have been opened with the old limit (even
        # by a reservation that read it just before the write above).
        for _ in range(_LIMIT_CHANGE_TRIES):
            item = dynamodb_requests.get(self._client, self._table, day_key(day))
            if item is None:
                if self._open(day, tokens):
                    return
                continue  # opened meanwhile: change it
            old = int(item["limit"]["N"])
            written = self._update(
                day,
                "SET #limit = :new ADD #headroom :change",
                _SAME_LIMIT,
                {":new": _number(tokens), ":old": _number(old), ":change": _number(tokens - old)},
            )
            if written.written:
                return
        raise TransientError("budget_conflict")

    def get(self, day: str) -> BudgetDay:
        item = dynamodb_requests.get(self._client, self._table, day_key(day))
        if item is None:
            return BudgetDay(day=day, limit=self._configured_limit(), reserved=0, used=0)
        return day_from_item(day, item)

    def _configured_limit(self) -> int:
        item = dynamodb_requests.get(self._client, self._table, limit_key())
        return self._default_limit if item is None else int(item["limit"]["N"])

    def _open(self, day: str, limit: int) -> bool:
        """Create the day with ``limit``; False when it exists already."""
        starts = int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())
        return dynamodb_requests.conditional(
            self._client.put_item,
            TableName=self._table,
            Item={
                **day_key(day),
                table_layout.KIND_ATTRIBUTE: {"S": KIND_BUDGET},
                "day": {"S": day},
                "limit": _number(limit),
                "headroom": _number(limit),
                "reserved": _number(0),
                "used": _number(0),
                table_layout.TTL_ATTRIBUTE: _number(starts + DAY_SECONDS + DAY_RETENTION_SECONDS),
            },
            ConditionExpression=condition_expression(_NEW_DAY),
        ).written

    def _update(
        self,
        day: str,
        update: str,
        condition: Condition,
        values: dynamodb_items.Item,
        *,
        sends: int = 1,
    ) -> dynamodb_requests.Written:
        """One conditional UpdateItem of the day; ``sends`` > 1 only for a write whose
        condition makes it apply once: it is sent again while its outcome is unknown."""
        expression = condition_expression(condition)
        used = f"{update} {expression}"
        for send in range(1, sends + 1):
            try:
                return dynamodb_requests.conditional(
                    self._client.update_item,
                    TableName=self._table,
                    Key=day_key(day),
                    UpdateExpression=update,
                    ConditionExpression=expression,
                    ExpressionAttributeNames={k: v for k, v in _NAMES.items() if k in used},
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except StorageUnavailable:
                if send == sends:
                    raise
        raise AssertionError("unreachable: the last send returns or raises")


def _number(value: int) -> dynamodb_items.AttributeValue:
    return {"N": str(value)}
