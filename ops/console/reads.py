"""What the console's pages show, read through the state index (never a Scan).

The index is sparse and holds keys only: each inbox item is listed under the label of
where it is in its life (``open``: pending and processing; ``failed``; ``completed``;
``ignored``), beside quarantine records (``quarantined``) and effects in doubt
(``effect_intent``), each under the time it entered its label (``listed_at``). Counts
are ``Select=COUNT`` Queries (no item read); lists merge the labels' shards newest
first and read each record by its key. The values are typed and hold no body (the
table has none) and no secret.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import settings_table, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem, QuarantineRecord, State
from functions.core.ports.approvals import ApprovalRecord
from functions.core.tracing import SpanRecord
from ops.approvals import delivery_approvals
from ops.effects import list_effects
from ops.inbox import Progress, show_inbox, show_progress
from ops.quarantine import show_quarantine
from ops.target import Target, describe_aws_error
from ops.trace import read_trace, trace_id_of

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.client import CloudWatchClient

HOUR: Final = 3600
# A lease owner is a random token: shown only far enough to tell attempts apart.
LEASE_OWNER_SHOWN: Final = 8
# The inbox states, in the order the pages show them (every one is listed by the index).
STATES: Final = (
    State.PENDING,
    State.PROCESSING,
    State.AWAITING_APPROVAL,
    State.FAILED,
    State.COMPLETED,
    State.IGNORED,
)
# Every label of a delivery's records: what Home's recent list merges.
DELIVERY_LABELS: Final = (
    table_layout.STATE_LABEL_OPEN,
    table_layout.STATE_LABEL_FAILED,
    table_layout.STATE_LABEL_COMPLETED,
    table_layout.STATE_LABEL_IGNORED,
    table_layout.STATE_LABEL_AWAITING_APPROVAL,
    dynamodb_items.QUARANTINED_LABEL,
)


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


def _newest(
    target: Target, labels: tuple[str, ...], window: Window, *, batch: int
) -> Iterator[Listed]:
    """Inbox items and quarantine records under ``labels``, most recently listed first."""
    for listed_at, raw in target.newest_listed(
        labels, changed_since=window.since, changed_before=window.until, batch=batch
    ):
        sort_key = raw[table_layout.TABLE_SORT_KEY]["S"]
        if sort_key == table_layout.SK_INBOX:
            yield Listed(listed_at, item=dynamodb_items.inbox_from_item(raw))
        elif sort_key.startswith(table_layout.SK_QUARANTINE_PREFIX):
            yield Listed(listed_at, quarantine=dynamodb_items.quarantine_from_item(raw))


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
    """Counts by state, the last hour's throughput and the most recent deliveries."""

    open_work: int  # pending and processing (one label: a claim writes no index entry)
    failed: int
    quarantined: int
    effects_in_doubt: int
    completed_last_hour: int  # entered completed in the last hour: the throughput
    failed_last_hour: int
    ignored_last_hour: int
    recent: list[Listed]  # newest entry into its label first, every state
    alarms: Alarms
    now: int
    awaiting_approval: int = 0  # parked for a person's decision (the approval gate)


def read_home(target: Target, alarms: Alarms, *, now: int, recent: int = 20) -> Home:
    """Counts by ``Select=COUNT`` Queries of the labels, the most recent records by a
    newest-first merge of every delivery label (one consistent read of ``recent``)."""
    hour_ago = now - HOUR
    effects = list_effects(
        target, now=now, effect_age_seconds=settings_table.RECONCILE_EFFECT_AGE_SECONDS.default
    )
    return Home(
        open_work=target.count_listed(table_layout.STATE_LABEL_OPEN),
        failed=target.count_listed(table_layout.STATE_LABEL_FAILED),
        quarantined=target.count_listed(dynamodb_items.QUARANTINED_LABEL),
        effects_in_doubt=len(effects),
        completed_last_hour=target.count_listed(
            table_layout.STATE_LABEL_COMPLETED, changed_since=hour_ago
        ),
        failed_last_hour=target.count_listed(
            table_layout.STATE_LABEL_FAILED, changed_since=hour_ago
        ),
        ignored_last_hour=target.count_listed(
            table_layout.STATE_LABEL_IGNORED, changed_since=hour_ago
        ),
        recent=list(
            itertools.islice(_newest(target, DELIVERY_LABELS, Window(), batch=recent), recent)
        ),
        alarms=alarms,
        now=now,
        awaiting_approval=target.count_listed(table_layout.STATE_LABEL_AWAITING_APPROVAL),
    )


@dataclass(frozen=True, slots=True)
class DeliveryFilter:
    """The Deliveries page's filter: a state (None: every state), outcome code, window
    (on entry into the state's label), page."""

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
    """One page of the filtered deliveries, most recently listed (entered their state's
    label) first, read lazily: a page reads only as far into the index as it shows."""
    states = STATES if chosen.state is None else (chosen.state,)
    labels = tuple(dict.fromkeys(dynamodb_items.state_label(state) for state in states))
    skip = (chosen.page - 1) * chosen.page_size
    matching = (
        entry.item
        for entry in _newest(target, labels, chosen.window, batch=chosen.page_size + 1)
        if entry.item is not None
        and entry.item.state in states
        and (chosen.reason is None or entry.item.last_error == chosen.reason)
    )
    found = list(itertools.islice(matching, skip, skip + chosen.page_size + 1))
    return DeliveryPage(items=found[: chosen.page_size], has_next=len(found) > chosen.page_size)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery's journey: the inbox item, its last lease, steps, effects, quarantine."""

    item: InboxItem
    lease_owner: str | None  # shortened
    progress: Progress
    quarantine: list[QuarantineRecord]
    approvals: list[ApprovalRecord] = field(default_factory=list)  # asked for, and decided
    # Its trace's spans (a local stack's span file), oldest first; none deployed.
    spans: list[SpanRecord] = field(default_factory=list)


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
        progress=show_progress(target, delivery_id, item),
        quarantine=show_quarantine(target, delivery_id),
        approvals=delivery_approvals(target, delivery_id),
        spans=_spans(target, item),
    )


def _spans(target: Target, item: InboxItem) -> list[SpanRecord]:
    trace_id = trace_id_of(item.traceparent)
    if target.spans_file is None or trace_id is None:
        return []
    return read_trace(target.spans_file, trace_id)
