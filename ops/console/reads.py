"""What the console's pages show, read through the needs_attention index (never a Scan).

The index is sparse and holds keys only: it lists what needs someone (``open``:
pending and processing; ``failed``; ``quarantined``; ``effect_intent``), each under
the time it entered its label (``listed_at``), and a delivery leaves it on completion.
So Home and Deliveries show the work that needs or is getting attention, each record
read by its key; a completed (or ignored) delivery is found by its id (GetItem).
The values are typed and hold no body (the table has none) and no secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem, QuarantineRecord, State
from functions.core.setting_defaults import DEFAULT_RECONCILE_EFFECT_AGE_SECONDS
from ops.effects import list_effects
from ops.inbox import Progress, inbox_in_state, show_inbox, show_progress
from ops.quarantine import show_quarantine
from ops.target import Target, describe_aws_error

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.client import CloudWatchClient

HOUR: Final = 3600
# A lease owner is a random token: shown only far enough to tell attempts apart.
LEASE_OWNER_SHOWN: Final = 8
# The inbox states the index lists, in the order the pages show them.
INDEXED_STATES: Final = (State.PENDING, State.PROCESSING, State.FAILED)


@dataclass(frozen=True, slots=True)
class Window:
    """Entries into an index label in ``[since, until)`` (epoch seconds); None: unbounded."""

    since: int | None = None
    until: int | None = None


@dataclass(frozen=True, slots=True)
class Listed:
    """One record the index lists: an inbox item, or a quarantine record; ``listed_at``:
    when it entered its label."""

    listed_at: int
    item: InboxItem | None = None
    quarantine: QuarantineRecord | None = None

    @property
    def delivery_id(self) -> str:
        if self.item is not None:
            return self.item.delivery_id
        assert self.quarantine is not None
        return self.quarantine.delivery_id


def _listed_at(raw: dynamodb_items.Item) -> int:
    return int(raw[table_layout.STATE_INDEX_SORT_KEY]["N"])


def _listed(target: Target, label: str) -> list[Listed]:
    """Every record the index lists under ``label``, each read by its key."""
    found: list[Listed] = []
    for raw in target.state_index(label):
        sort_key = raw[table_layout.TABLE_SORT_KEY]["S"]
        if sort_key == table_layout.SK_INBOX:
            found.append(Listed(_listed_at(raw), item=dynamodb_items.inbox_from_item(raw)))
        elif sort_key.startswith(table_layout.SK_QUARANTINE_PREFIX):
            found.append(
                Listed(_listed_at(raw), quarantine=dynamodb_items.quarantine_from_item(raw))
            )
    return found


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
    """What needs or is getting attention now; completed deliveries are not listed."""

    counts: dict[State, int]  # the indexed states only
    quarantined: int
    effects_in_doubt: int
    failed_last_hour: int  # entered failed in the last hour
    recent: list[Listed]  # newest entry into its label first
    alarms: Alarms
    now: int


def _newest_first(listed: list[Listed]) -> list[Listed]:
    return sorted(listed, key=lambda entry: (entry.listed_at, entry.delivery_id), reverse=True)


def read_home(target: Target, alarms: Alarms, *, now: int, recent: int = 20) -> Home:
    """One read of each label that lists deliveries (the backlog, not the history)."""
    open_work = _listed(target, table_layout.STATE_LABEL_OPEN)
    failed = _listed(target, table_layout.STATE_LABEL_FAILED)
    quarantined = _listed(target, dynamodb_items.QUARANTINED_LABEL)
    items = [entry.item for entry in (*open_work, *failed) if entry.item is not None]
    effects = list_effects(target, now=now, effect_age_seconds=DEFAULT_RECONCILE_EFFECT_AGE_SECONDS)
    return Home(
        counts={state: sum(1 for i in items if i.state is state) for state in INDEXED_STATES},
        quarantined=len(quarantined),
        effects_in_doubt=len(effects),
        failed_last_hour=sum(1 for entry in failed if entry.listed_at >= now - HOUR),
        recent=_newest_first([*open_work, *failed, *quarantined])[:recent],
        alarms=alarms,
        now=now,
    )


@dataclass(frozen=True, slots=True)
class DeliveryFilter:
    """The Deliveries page's filter: an indexed state (None: all three), outcome code,
    window (on entry into the state's label), page."""

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
    """One page of the filtered deliveries, most recently changed first.

    A state the index does not list (completed, ignored) is refused by
    :func:`inbox_in_state` with an :class:`OperatorError`.
    """
    states = INDEXED_STATES if chosen.state is None else (chosen.state,)
    since, until = chosen.window.since, chosen.window.until
    found = [
        item
        for state in states
        for item in inbox_in_state(target, state, since=since, until=until)
        if chosen.reason is None or item.last_error == chosen.reason
    ]
    found.sort(key=lambda i: (i.state_changed_at, i.delivery_id), reverse=True)
    skip = (chosen.page - 1) * chosen.page_size
    return DeliveryPage(
        items=found[skip : skip + chosen.page_size],
        has_next=len(found) > skip + chosen.page_size,
    )


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
