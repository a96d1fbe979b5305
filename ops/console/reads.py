"""What the console's pages show, read through the by_state index (never a Scan).

Every inbox item is listed in the index under its state, sorted by the time of its
last state change, so "recent deliveries", "counts by state", "throughput of the last
hour" and a filtered, paginated list are index queries per shard, newest first.
The values are typed and hold no body (the table has none) and no secret.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem, QuarantineRecord, State
from ops.inbox import Progress, show_inbox, show_progress
from ops.quarantine import show_quarantine
from ops.target import OperatorError, Target, describe_aws_error

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.client import CloudWatchClient

HOUR: Final = 3600
# Later than any state change: the upper bound of an unbounded window.
_END_OF_TIME: Final = 2**53
# A lease owner is a random token: shown only far enough to tell attempts apart.
LEASE_OWNER_SHOWN: Final = 8


@dataclass(frozen=True, slots=True)
class Window:
    """State changes in ``[since, until)`` (epoch seconds); None: unbounded."""

    since: int | None = None
    until: int | None = None


def _index_query(
    target: Target,
    shard: str,
    window: Window,
    *,
    count: bool = False,
    limit: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Pages of one index shard within ``window``, newest first."""
    since = 0 if window.since is None else window.since
    until = _END_OF_TIME if window.until is None else window.until
    if since >= until:
        return  # an empty window (DynamoDB refuses a BETWEEN whose ends are reversed)
    arguments: dict[str, Any] = {
        "TableName": target.table_name,
        "IndexName": table_layout.STATE_INDEX,
        "KeyConditionExpression": "#shard = :shard AND #changed BETWEEN :since AND :last",
        "ExpressionAttributeNames": {
            "#shard": table_layout.STATE_INDEX_PARTITION_KEY,
            "#changed": table_layout.STATE_INDEX_SORT_KEY,
        },
        "ExpressionAttributeValues": {
            ":shard": {"S": shard},
            ":since": {"N": str(since)},
            ":last": {"N": str(until - 1)},
        },
        "ScanIndexForward": False,
    }
    if count:
        arguments["Select"] = "COUNT"
    if limit is not None:
        arguments["Limit"] = limit
    while True:
        try:
            response: Any = target.dynamodb.query(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise OperatorError(f"DynamoDB: {describe_aws_error(exc)}") from None
        yield response
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        arguments["ExclusiveStartKey"] = last


def count_label(target: Target, label: str, window: Window = Window()) -> int:
    """Records the index lists under ``label`` (a state: inbox items) changed in ``window``."""
    total = 0
    for shard in dynamodb_items.all_state_shards(label):
        for page in _index_query(target, shard, window, count=True):
            total += int(page.get("Count", 0))
    return total


def _is_inbox(item: dict[str, Any]) -> bool:
    # The index also lists quarantine and effect records under their own labels.
    return bool(item[table_layout.TABLE_SORT_KEY]["S"] == table_layout.SK_INBOX)


def newest(
    target: Target,
    states: tuple[State, ...],
    window: Window,
    *,
    wanted: int,
    keep: Callable[[InboxItem], bool] = lambda _item: True,
) -> list[InboxItem]:
    """The ``wanted`` most recently changed inbox items in ``states`` that ``keep`` admits.

    Each shard is read newest first until it has given ``wanted`` admitted items (no
    shard can contribute more), then the shards are merged.
    """
    found: list[InboxItem] = []
    for state in states:
        for shard in dynamodb_items.all_state_shards(state.value):
            taken = 0
            for page in _index_query(target, shard, window, limit=max(wanted, 1)):
                for raw in page.get("Items", []):
                    if not _is_inbox(raw):
                        continue
                    item = dynamodb_items.inbox_from_item(raw)
                    if keep(item):
                        found.append(item)
                        taken += 1
                if taken >= wanted:
                    break
    found.sort(key=lambda i: (i.state_changed_at, i.delivery_id), reverse=True)
    return found[:wanted]


@dataclass(frozen=True, slots=True)
class Alarm:
    name: str
    reason: str
    since: int  # epoch seconds of its last state change


@dataclass(frozen=True, slots=True)
class Alarms:
    """Alarms in ALARM; ``source`` None: the target has no CloudWatch alarms (local)."""

    source: str | None
    firing: list[Alarm] = field(default_factory=list)
    error: str | None = None


def alarms_in_alarm(cloudwatch: CloudWatchClient | None, stack_name: str | None) -> Alarms:
    """The stack's alarms in ALARM (CloudFormation names them after the stack)."""
    if cloudwatch is None or stack_name is None:
        return Alarms(source=None)
    firing: list[Alarm] = []
    try:
        pages = cloudwatch.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=stack_name, StateValue="ALARM", AlarmTypes=["MetricAlarm"]
        )
        for page in pages:
            for alarm in page.get("MetricAlarms", []):
                if alarm.get("StateValue") != "ALARM":  # not every endpoint filters by state
                    continue
                updated = alarm.get("StateUpdatedTimestamp")
                firing.append(
                    Alarm(
                        name=alarm.get("AlarmName", "?"),
                        reason=alarm.get("StateReason", ""),
                        since=0 if updated is None else int(updated.timestamp()),
                    )
                )
    except (ClientError, BotoCoreError) as exc:
        return Alarms(source=stack_name, error=f"CloudWatch: {describe_aws_error(exc)}")
    return Alarms(source=stack_name, firing=sorted(firing, key=lambda a: a.name))


@dataclass(frozen=True, slots=True)
class Home:
    counts: dict[State, int]
    quarantined: int
    completed_last_hour: int
    failed_last_hour: int
    recent: list[InboxItem]
    alarms: Alarms
    now: int


def read_home(target: Target, alarms: Alarms, *, now: int, recent: int = 20) -> Home:
    last_hour = Window(since=now - HOUR)
    return Home(
        counts={state: count_label(target, state.value) for state in State},
        quarantined=count_label(target, dynamodb_items.QUARANTINED_LABEL),
        completed_last_hour=count_label(target, State.COMPLETED.value, last_hour),
        failed_last_hour=count_label(target, State.FAILED.value, last_hour),
        recent=newest(target, tuple(State), Window(), wanted=recent),
        alarms=alarms,
        now=now,
    )


@dataclass(frozen=True, slots=True)
class DeliveryFilter:
    """The Deliveries page's filter: states (None: all), outcome code, window, page."""

    state: State | None = None
    reason: str | None = None
    window: Window = Window()
    page: int = 1
    page_size: int = 50


@dataclass(frozen=True, slots=True)
class DeliveryPage:
    items: list[InboxItem]
    has_next: bool


def list_deliveries(target: Target, chosen: DeliveryFilter) -> DeliveryPage:
    """One page of the filtered deliveries, most recently changed first."""
    states = tuple(State) if chosen.state is None else (chosen.state,)
    skip = (chosen.page - 1) * chosen.page_size
    reason = chosen.reason
    found = newest(
        target,
        states,
        chosen.window,
        wanted=skip + chosen.page_size + 1,  # one more: is there a next page?
        keep=lambda item: reason is None or item.last_error == reason,
    )
    items = found[skip : skip + chosen.page_size]
    return DeliveryPage(items=items, has_next=len(found) > skip + chosen.page_size)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery's journey: the inbox item, its last lease, steps, effects, quarantine."""

    item: InboxItem
    lease_owner: str | None  # shortened
    progress: Progress
    quarantine: list[QuarantineRecord]


def read_delivery(target: Target, delivery_id: str) -> Delivery | None:
    item = show_inbox(target, delivery_id)
    if item is None:
        return None
    owner = None
    for raw in target.delivery_records(delivery_id, table_layout.SK_INBOX):
        if raw[table_layout.TABLE_SORT_KEY]["S"] == table_layout.SK_INBOX and "lease_owner" in raw:
            owner = raw["lease_owner"].get("S", "")[:LEASE_OWNER_SHOWN]
    return Delivery(
        item=item,
        lease_owner=owner,
        progress=show_progress(target, delivery_id),
        quarantine=show_quarantine(target, delivery_id),
    )
