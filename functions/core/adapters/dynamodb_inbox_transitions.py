"""Every state change of the inbox item (``sk = inbox``), driven by one table.

The receiver creates the item (``accept``: a put, in one transaction with the outbox
record); every later change is one row of the table below, which :func:`apply` turns
into one conditional ``UpdateItem``. Nothing else writes the inbox item. A row says
which states it starts from, the condition that lets it happen (named parts, each with
its reason), the state it ends in and the attributes it sets and removes; how the item
moves in the state index follows from the states (:attr:`Transition.index`).

Why one delivery is processed by one worker at a time and its outcome recorded once:

* ``accept`` writes only where no item holds the delivery id: one receipt per delivery.
* Only ``claim`` enters ``processing``: from ``pending``, or from ``processing`` whose
  lease ran out. So there is never more than one live lease holder.
* Only the lease owner leaves ``processing`` (``complete``, ``release``,
  ``release_transient``, ``defer``, ``give_back``, ``fail``, ``park`` check
  ``lease_owner``): a worker that lost its lease records nothing. The retry counters
  (``attempts``, ``transient_failures``) decide only when to give up, never who may write.
* The reconciler's rows (``touch_pending``, ``release_expired``) check exactly what it
  saw when it listed the item (``:seen``), so any change in between wins over them.
* ``awaiting_approval`` (parked by ``park``, no lease) is left once, by the decision:
  ``approve`` (to ``pending``), ``deny`` or the reconciler's ``approval_timeout`` (to ``failed``),
  each conditional on the item still waiting for the same approval; the decision's
  own record is written in the same transaction (:mod:`.dynamodb_approvals`).
* No row starts from ``completed`` or ``ignored``; only the operator's ``reset_failed``
  and ``reset_dead_letter`` (a dead letter redriven by SQS) start from ``failed``, the
  latter only for the very failure the letter was sent for (``failed_by``).
* Nothing runs on an item past its TTL (``expires_at``): DynamoDB deletes expired items
  late and in any order, so the delivery's effect records may be gone while its inbox
  item is still there, and an attempt would apply a done effect again. ``claim`` takes
  only a lease that ends before the TTL, ``reset_failed`` reopens only an unexpired
  item, and ``expire`` closes an open item the claim refused for its TTL (``failed``,
  ``last_error`` = ``item_expired``): visibly, never silently.
* ``list_open`` (reconciler) changes no state: it only gives an open item the receiver
  did not list its ``open`` index entry, and only while it is open and unlisted.

Each update and its condition are one atomic request, so a row either happens whole
or not at all; a refused row reports the item as it was (``ALL_OLD``), with no read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Final

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_requests
from functions.core.adapters.dynamodb_conditions import Condition, condition_expression
from functions.core.models import State

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import PutTypeDef, UpdateItemInputTypeDef


class IndexMove(Enum):
    """How a transition moves the item in the state index (keys only, sparse)."""

    # The item stays listed under the same label: no index key changes, so the index
    # is not written at all (claim, touch and release keep an open item open).
    KEEP = "keep"
    # Listed under the to-state's label from now: ``state_shard`` = its shard of that
    # label, ``listed_at`` = now (one index delete and one put).
    LIST = "list"


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of the table. Placeholders: ``:<state>`` for each state, ``:now``,
    ``:zero``/``:one``, and the caller's values (``:owner``, ``:lease``, ``:error``,
    ``:seen``)."""

    name: str
    from_states: tuple[State, ...]
    condition: Condition
    to_state: State
    sets: tuple[tuple[str, str], ...] = ()  # (attribute, value expression)
    removes: tuple[str, ...] = ()
    # Only lists the item under its state's label (``:listed`` for ``listed_at``): no
    # state, no clock (``state_changed_at``) changes.
    listing_only: bool = False

    @property
    def index(self) -> IndexMove:
        """Derived from the states' labels, so no row can forget to move the item."""
        if self.listing_only:
            return IndexMove.LIST
        to_label = dynamodb_items.state_label(self.to_state)
        if {dynamodb_items.state_label(state) for state in self.from_states} == {to_label}:
            return IndexMove.KEEP
        return IndexMove.LIST

    def update_expression(self, also_set: tuple[str, ...] = ()) -> str:
        """``also_set``: more attributes set, each to its own ``:<name>`` placeholder."""
        if self.listing_only:
            return (
                f"SET {table_layout.STATE_INDEX_PARTITION_KEY} = :shard,"
                f" {table_layout.STATE_INDEX_SORT_KEY} = :listed"
            )
        sets = list(self.sets)
        if self.from_states != (self.to_state,):
            sets.insert(0, ("#state", f":{self.to_state.value}"))
        sets.append((dynamodb_items.STATE_CHANGED_AT, ":now"))
        sets.extend((name, f":{name}") for name in also_set)
        removes = list(self.removes)
        if self.index is IndexMove.LIST:
            sets.append((table_layout.STATE_INDEX_PARTITION_KEY, ":shard"))
            sets.append((table_layout.STATE_INDEX_SORT_KEY, ":now"))
        update = "SET " + ", ".join(f"{attribute} = {value}" for attribute, value in sets)
        if removes:
            update += " REMOVE " + ", ".join(removes)
        return update


APPROVAL_NAME: Final = dynamodb_items.APPROVAL_NAME
APPROVAL_DEADLINE: Final = dynamodb_items.APPROVAL_DEADLINE
# --- the table -------------------------------------------------------------------------

_HOLDING: Final[Condition] = (
    ("#state = :processing", "a finished or released attempt cannot change state again"),
    ("lease_owner = :owner", "a worker whose lease expired must not overwrite its successor"),
)
_LEASE: Final = ("lease_until", "lease_owner")

CLAIM: Final = Transition(  # worker, before it processes
    name="claim",
    from_states=(State.PENDING, State.PROCESSING),
    condition=(
        ("attribute_exists(pk)", "only a delivery the receiver accepted is processed"),
        (
            "#state = :pending OR (#state = :processing AND lease_until <= :now)",
            "free, or abandoned by a worker whose lease ran out; never two live holders",
        ),
        (
            "expires_at > :lease",
            "the whole lease ends before the TTL: no attempt runs while TTL may delete the"
            " delivery's effect records, which would let it apply a done effect again",
        ),
    ),
    to_state=State.PROCESSING,
    sets=(
        ("lease_until", ":lease"),
        ("lease_owner", ":owner"),
        ("attempts", "if_not_exists(attempts, :zero) + :one"),
    ),
)
COMPLETE: Final = Transition(  # worker: the workflow succeeded
    name="complete",
    from_states=(State.PROCESSING,),
    condition=_HOLDING,
    to_state=State.COMPLETED,
    sets=(("completed_at", ":now"),),
    removes=_LEASE,
)
COMPLETE_WITH_EFFECTS: Final = Transition(  # worker: succeeded, repeatable effects applied
    name="complete_with_effects",
    from_states=(State.PROCESSING,),
    condition=_HOLDING,
    to_state=State.COMPLETED,
    # The repeatable effects' "done" mark (a string set, never empty): it rides on the
    # completion instead of a record of its own per effect.
    sets=(("completed_at", ":now"), (dynamodb_items.EFFECTS_DONE, ":effects")),
    removes=_LEASE,
)
RELEASE: Final = Transition(  # worker: transient failure, try again later
    name="release",
    from_states=(State.PROCESSING,),
    condition=_HOLDING,
    to_state=State.PENDING,
    sets=(("last_error", ":error"),),
    removes=_LEASE,
)
RELEASE_TRANSIENT: Final = Transition(  # worker: known-transient failure, retried
    name="release_transient",
    from_states=(State.PROCESSING,),
    condition=_HOLDING,
    to_state=State.PENDING,
    # Counted apart from ``attempts``: only the attempts that did not end this way use
    # the budget of WORKER_MAX_ATTEMPTS (the horizon bounds these).
    sets=(
        ("last_error", ":error"),
        ("transient_failures", "if_not_exists(transient_failures, :zero) + :one"),
    ),
    removes=_LEASE,
)
DEFER: Final = Transition(  # worker: the workflow waits for the token budget
    name="defer",
    from_states=(State.PROCESSING,),
    condition=_HOLDING,
    to_state=State.PENDING,
    # Waiting is no failure and spends neither retry budget: the attempt the claim
    # counted is given back, and the retry horizon starts again once the wait is over
    # (reset_at), so a delivery may wait any number of times, for up to a day each.
    sets=(("last_error", ":error"), ("attempts", "attempts - :one"), ("reset_at", ":now")),
    removes=_LEASE,
)
GIVE_BACK: Final = Transition(  # worker: a suspect claimed in company, to run alone
    name="give_back",
    from_states=(State.PROCESSING,),
    condition=_HOLDING,
    to_state=State.PENDING,
    # Nothing ran: the attempt the claim counted is given back; last_error and the
    # retry horizon stay as they were.
    sets=(("attempts", "attempts - :one"),),
    removes=_LEASE,
)
FAIL: Final = Transition(  # worker: permanent failure, or the retry budget is spent
    name="fail",
    from_states=(State.PROCESSING,),
    condition=_HOLDING,
    to_state=State.FAILED,
    # failed_by names this failure (the failing claim's owner token): the worker's dead
    # letter carries it, and its redrive reopens this failure only (reset_dead_letter).
    sets=(("last_error", ":error"), (dynamodb_items.FAILED_BY, ":owner")),
    removes=_LEASE,
)
EXPIRE: Final = Transition(  # worker: the claim was refused for the item's TTL
    name="expire",
    from_states=(State.PENDING, State.PROCESSING),
    condition=(
        (
            "#state = :pending OR (#state = :processing AND lease_until <= :now)",
            "open and held by no live worker: a live attempt ends on its own",
        ),
        (
            "expires_at <= :lease",
            "exactly the items the claim refuses for their TTL: one whose lease would end"
            " before it is claimed, never closed",
        ),
    ),
    to_state=State.FAILED,
    # Failed, so the console, ``failures`` and the state index show it until TTL
    # deletes it; reset_failed refuses it (expired).
    sets=(("last_error", ":error"),),
    removes=_LEASE,
)
TOUCH_PENDING: Final = Transition(  # reconciler: re-enqueues a pending item it listed
    name="touch_pending",
    from_states=(State.PENDING,),
    condition=(
        ("#state = :pending", "a worker claimed it meanwhile: nothing to recover"),
        ("state_changed_at = :seen", "another reconciler run re-enqueued it already"),
    ),
    to_state=State.PENDING,
)
LIST_OPEN: Final = Transition(  # reconciler: an open receipt older than its age
    name="list_open",
    from_states=(State.PENDING, State.PROCESSING),
    condition=(
        (
            "#state = :pending OR #state = :processing",
            "an item that completed, failed or was ignored meanwhile is listed by its end",
        ),
        (
            f"attribute_not_exists({table_layout.STATE_INDEX_PARTITION_KEY})",
            "listed already (an earlier run, a reset): its entry and time are kept",
        ),
    ),
    to_state=State.PENDING,  # (its label: open; the state itself is not written)
    listing_only=True,
)
RELEASE_EXPIRED: Final = Transition(  # reconciler: the lease holder died
    name="release_expired",
    from_states=(State.PROCESSING,),
    condition=(
        ("#state = :processing", "it finished or was released meanwhile"),
        ("lease_until = :seen", "a new claim (a new lease) happened meanwhile"),
        ("lease_until <= :now", "the lease must really have run out"),
    ),
    to_state=State.PENDING,
    sets=(("last_error", ":error"),),
    removes=_LEASE,
)
# last_error is kept: it says why the delivery failed until the next attempt ends.
# reset_at restarts the retry horizon, which otherwise runs from received_at;
# requeued_at tells a bulk requeue run again that an operator already did this.
_RESET: Final = (
    ("attempts", ":zero"),
    ("transient_failures", ":zero"),
    ("reset_at", ":now"),
    ("requeued_at", ":now"),
)
RESET_FAILED: Final = Transition(  # operator: requeue or redrive gives a fresh budget
    name="reset_failed",
    from_states=(State.FAILED,),
    condition=(
        ("attribute_exists(pk)", "an item that expired meanwhile is not re-created"),
        ("#state = :failed", "only a failed delivery is retried; never undo a completion"),
        (
            "expires_at > :now",
            "an expired item's effect records may be deleted already: a retry could apply"
            " a done effect again",
        ),
    ),
    to_state=State.PENDING,
    sets=_RESET,
    removes=(dynamodb_items.FAILED_BY,),
)
RESET_DEAD_LETTER: Final = Transition(  # worker: a dead letter of its own came back
    name="reset_dead_letter",
    from_states=(State.FAILED,),
    condition=(
        *RESET_FAILED.condition,
        (
            f"{dynamodb_items.FAILED_BY} = :failure",
            "only the failure the letter was sent for: the delivery may have been retried"
            " and failed since (say with an effect in doubt an operator settled)",
        ),
    ),
    to_state=State.PENDING,
    sets=_RESET,
    removes=(dynamodb_items.FAILED_BY,),
)

PARK: Final = Transition(  # worker: the workflow's proposal waits for a person
    name="park",
    from_states=(State.PROCESSING,),
    condition=_HOLDING,
    to_state=State.AWAITING_APPROVAL,
    # Waiting is no failure: the attempt is given back, as a budget wait gives it back.
    # No lease stays: no worker holds the delivery while a person thinks.
    sets=(
        ("attempts", "attempts - :one"),
        (APPROVAL_NAME, ":approval"),
        (APPROVAL_DEADLINE, ":deadline"),
    ),
    removes=_LEASE,
)
_WAITING: Final[Condition] = (
    ("#state = :awaiting_approval", "decided already, or never parked: nothing to decide"),
    (f"{APPROVAL_NAME} = :approval", "the decision is about what this delivery waits for"),
)
APPROVE: Final = Transition(  # operator: approved; the worker resumes the delivery
    name="approve",
    from_states=(State.AWAITING_APPROVAL,),
    condition=_WAITING,
    to_state=State.PENDING,
    # The retry horizon restarts: the wait for a person is no part of the retry window.
    sets=(("reset_at", ":now"),),
    removes=(APPROVAL_NAME, APPROVAL_DEADLINE),
)
DENY: Final = Transition(  # operator: denied; the delivery ends failed, saying so
    name="deny",
    from_states=(State.AWAITING_APPROVAL,),
    condition=_WAITING,
    to_state=State.FAILED,
    sets=(("last_error", ":error"),),
    removes=(APPROVAL_NAME, APPROVAL_DEADLINE),
)
APPROVAL_TIMEOUT: Final = Transition(  # reconciler: nobody decided in time; denied
    name="approval_timeout",
    from_states=(State.AWAITING_APPROVAL,),
    condition=(
        *_WAITING,
        (f"{APPROVAL_DEADLINE} <= :now", "only once its time has really run out"),
    ),
    to_state=State.FAILED,
    sets=(("last_error", ":error"),),
    removes=(APPROVAL_NAME, APPROVAL_DEADLINE),
)

TRANSITIONS: Final = (
    CLAIM,
    COMPLETE,
    COMPLETE_WITH_EFFECTS,
    RELEASE,
    RELEASE_TRANSIENT,
    DEFER,
    GIVE_BACK,
    FAIL,
    EXPIRE,
    TOUCH_PENDING,
    LIST_OPEN,
    RELEASE_EXPIRED,
    RESET_FAILED,
    RESET_DEAD_LETTER,
    PARK,
    APPROVE,
    DENY,
    APPROVAL_TIMEOUT,
)

# The creation, for completeness of the table: the receiver's put.
ACCEPT_STATES: Final = (State.PENDING, State.IGNORED)
_ABSENT: Final[Condition] = (
    (
        "attribute_not_exists(#pk)",
        "the inbox item is the receipt: written only where no item holds this delivery"
        " id, it makes acceptance exactly-once across attempts",
    ),
)

# --- building and applying ---------------------------------------------------------------

_PLACEHOLDER: Final = re.compile(r":\w+")
_NAME: Final = re.compile(r"#\w+")
# Stand-ins for attribute names that DynamoDB reserves ("state") or that are shared.
_NAMES: Final = {"#state": "state", "#pk": table_layout.TABLE_PARTITION_KEY}
_CONSTANTS: Final[dict[str, dynamodb_items.AttributeValue]] = {
    ":zero": {"N": "0"},
    ":one": {"N": "1"},
    **{f":{state.value}": {"S": state.value} for state in State},
}


# A caller's value for a placeholder: a number, a string, or a set of strings.
Value = int | str | frozenset[str]


@dataclass(frozen=True, slots=True)
class Applied:
    """What one transition did.

    Attributes:
        moved: True when the condition held and the item changed.
        item: the item after the change when ``moved``; otherwise the item as it was
            when the condition refused it (None: no such item).
    """

    moved: bool
    item: dynamodb_items.Item | None


def accept_put(table: str, item: dynamodb_items.Item) -> PutTypeDef:
    """The ``Put`` action (for ``TransactWriteItems``) that creates the inbox ``item``."""
    state = item["state"]["S"]
    if state not in ACCEPT_STATES:
        raise ValueError(f"an inbox item is created pending or ignored, not {state}")
    return {
        "TableName": table,
        "Item": item,
        "ConditionExpression": _ACCEPT_CONDITION,
        "ExpressionAttributeNames": dict(_ACCEPT_NAMES),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def update_request(
    table: str,
    transition: Transition,
    delivery_id: str,
    log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
    also_set: dynamodb_items.Item | None = None,
    /,
    *,
    now: int,
    **values: Value,
) -> UpdateItemInputTypeDef:
    """The ``UpdateItem`` arguments of ``transition`` for one delivery.

    Args:
        log_shards: the received log's deployed shard count (the completed listing's
            keys follow it: ``table_layout.listing_keys``).
        values: the row's own placeholders, e.g. ``owner="..."`` for ``:owner``.
        also_set: attributes the same write sets too, by name (the package record a
            completion keeps).

    Raises:
        TypeError: a placeholder of the row has no value, or a value no placeholder.
    """
    given = {f":{name}": _attribute(value) for name, value in values.items()}
    if not transition.listing_only:  # (a listing changes no clock)
        given[":now"] = _attribute(now)
    if transition.index is IndexMove.LIST:
        label = dynamodb_items.state_label(transition.to_state)
        shard = dynamodb_items.state_shard(label, delivery_id, log_shards=log_shards)
        given[":shard"] = _attribute(shard)
    extra = also_set or {}
    given.update({f":{name}": value for name, value in extra.items()})
    update = transition.update_expression(tuple(extra))
    condition = condition_expression(transition.condition)
    used = set(_PLACEHOLDER.findall(f"{update} {condition}"))
    available = {**_CONSTANTS, **given}
    if unused := given.keys() - used:
        raise TypeError(f"{transition.name} has no placeholder for {sorted(unused)}")
    if missing := used - available.keys():
        raise TypeError(f"{transition.name} needs a value for {sorted(missing)}")
    return {
        "TableName": table,
        "Key": dynamodb_items.inbox_key(delivery_id),
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": _names(f"{update} {condition}"),
        "ExpressionAttributeValues": {p: available[p] for p in sorted(used)},
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def apply(  # noqa: PLR0917 (positional: no placeholder name may shadow them)
    client: DynamoDBClient,
    table: str,
    transition: Transition,
    delivery_id: str,
    log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
    also_set: dynamodb_items.Item | None = None,
    /,
    *,
    now: int,
    **values: Value,
) -> Applied:
    """Make ``transition`` happen to the delivery's inbox item if its condition holds.

    ``log_shards``: as for :func:`update_request`.

    Raises:
        StorageUnavailable: throttled or failed; nothing written.
    """
    request = update_request(
        table, transition, delivery_id, log_shards, also_set, now=now, **values
    )
    written = dynamodb_requests.conditional(client.update_item, **request)
    return Applied(moved=written.written, item=written.item)


def _attribute(value: Value) -> dynamodb_items.AttributeValue:
    if isinstance(value, frozenset):
        if not value:
            raise ValueError("DynamoDB stores no empty set")
        return {"SS": sorted(value)}
    return {"S": value} if isinstance(value, str) else {"N": str(value)}


def _names(expression: str) -> dict[str, str]:
    return {name: _NAMES[name] for name in sorted(set(_NAME.findall(expression)))}


# The accept put's condition and names are the same for every delivery: built once, not
# per request (the receiver's time per request is measured, docs/benchmarks.md).
_ACCEPT_CONDITION: Final = condition_expression(_ABSENT)
_ACCEPT_NAMES: Final = _names(_ACCEPT_CONDITION)
