"""What the inbox holds, as the operator sees it: state, attempts, digest, times; no body.

Beside its inbox item, a delivery has a record per step and per effect its workflow
reached (``step#<name>``, ``effect#<name>``): :func:`show_progress` reads them with
the functions' own codecs. A repeatable effect has no record: the completion names it
on the inbox item (``effects_done``), and the progress shows it done at the completion.
A step's result is never shown, only its size: it may be
derived from the package. The package a delivery runs on (``package``, recorded at its
first fetch) is shown by its digest and size, never its content, with the digest of a
refetch that returned another package (``package_changed``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_effects import effect_from_item
from functions.core.adapters.dynamodb_package_record import package_from_item
from functions.core.adapters.dynamodb_spend import SK_SPEND, spend_from_item
from functions.core.adapters.dynamodb_steps import SK_STEP_PREFIX, step_from_item
from functions.core.models import InboxItem, State
from functions.core.ports.effects import EffectRecord, EffectStatus
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.steps import StepRecord
from functions.core.spend import ModelSpend
from ops.target import Target, paginate
from ops.trace import trace_id_of


def inbox_view(item: InboxItem) -> dict[str, Any]:
    """One inbox item as the commands print it: stable keys, epoch seconds, no body."""
    return {
        "delivery_id": item.delivery_id,
        "event": item.event,
        "state": item.state.value,
        "attempts": item.attempts,
        "body_sha256": item.body_sha256,
        "package_id": item.package_id,
        "mcp_url": item.mcp_url,
        "received_at": item.received_at,
        "state_changed_at": item.state_changed_at,
        "completed_at": item.completed_at,
        "lease_until": item.lease_until,
        "last_error": item.last_error,
        "trace_id": trace_id_of(item.traceparent),
    }


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a delivery's workflow got: its steps and effects, oldest first, and
    what its model calls cost (every call that may have run, from its spend record)."""

    steps: list[StepRecord]
    effects: list[EffectRecord]
    # Repeatable effects the completing attempt applied (no record of their own), by name,
    # and when the completion marked them done.
    repeatable_done: list[str] = field(default_factory=list)
    repeatable_done_at: int | None = None
    spend: ModelSpend = field(default_factory=ModelSpend)
    package: PackageRecord | None = None  # None: not fetched yet (or recorded before)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.spend.to_dict(),
            "package": None if self.package is None else package_view(self.package),
            "steps": [step_view(s) for s in self.steps],
            "effects": [effect_view(e) for e in self.effects]
            + [repeatable_view(name, self.repeatable_done_at) for name in self.repeatable_done],
        }


def step_view(record: StepRecord) -> dict[str, Any]:
    """One step: its state and run count, and its result's size (never the result)."""
    result = record.result
    return {
        "name": record.name,
        "label": record.label,
        "status": record.status.value,
        "error": record.error,
        "runs": record.runs,
        "started_at": record.started_at,
        "recorded_at": record.recorded_at,
        "result_size": None if result is None else result.size,
        "result_sha256": None if result is None else result.digest,  # kept as an object
    }


def effect_view(record: EffectRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "status": record.status.value,
        "idempotency_key": record.key,
        "intent_at": record.intent_at,
        "done_at": record.done_at,
        "flagged_at": record.flagged_at,
    }


def package_view(record: PackageRecord) -> dict[str, Any]:
    """The recorded package by its digest and size (never its content), and the digest of
    a refetch that returned another package."""
    return {
        "sha256": record.digest,
        "size": record.content.size,
        "recorded_at": record.recorded_at,
        "refetched_sha256": record.refetched_digest,
        "refetched_at": record.refetched_at,
    }


def repeatable_view(name: str, done_at: int | None) -> dict[str, Any]:
    """A repeatable effect marked done by the completion: no record, so no key or intent."""
    return {
        "name": name,
        "status": EffectStatus.DONE.value,
        "idempotency_key": None,
        "intent_at": None,
        "done_at": done_at,
        "flagged_at": None,
        "repeatable": True,
    }


def show_progress(target: Target, delivery_id: str, item: InboxItem | None = None) -> Progress:
    """The delivery's step and effect records (consistent reads), each by start time;
    given its inbox ``item``, also the repeatable effects its completion marked done."""
    steps = [step_from_item(item) for item in target.delivery_records(delivery_id, SK_STEP_PREFIX)]
    effects = [
        effect_from_item(item)
        for item in target.delivery_records(delivery_id, table_layout.SK_EFFECT_PREFIX)
    ]
    spends = [spend_from_item(item) for item in target.delivery_records(delivery_id, SK_SPEND)]
    spend = spends[0] if spends else ModelSpend()
    # Kept on the inbox item; an earlier version kept it on an item of its own.
    kept = [
        *target.delivery_records(delivery_id, table_layout.SK_INBOX),
        *target.delivery_records(delivery_id, table_layout.SK_PACKAGE),
    ]
    package = next((p for p in map(package_from_item, kept) if p is not None), None)
    steps.sort(key=lambda s: (s.started_at, s.name))
    effects.sort(key=lambda e: (e.intent_at, e.name))
    if item is None:
        return Progress(steps, effects, spend=spend, package=package)
    recorded = {e.name for e in effects}
    marked = sorted(item.effects_done - recorded)
    done_at = item.completed_at if marked else None
    return Progress(steps, effects, marked, done_at, spend, package)


def show_inbox(target: Target, delivery_id: str) -> InboxItem | None:
    """The inbox item (consistent read), or None for an unknown id."""
    return target.claims().get(delivery_id)


def list_inbox(
    target: Target, *, state: State | None = None, limit: int | None = None
) -> list[InboxItem]:
    """Inbox items, oldest received first (then by id).

    With ``state``: a Query of the state index (pending and processing items share its
    ``open`` label; failed, completed and ignored ones each have their own), never a
    Scan; with a ``limit`` too, only the ``limit`` most recently listed are read (the
    completed label holds everything the table keeps). Without ``state``: every inbox
    item, by a paged Scan of the table (the one listing that reads everything).
    """
    if state is None:
        found = [dynamodb_items.inbox_from_item(i) for i in _scan_inbox(target)]
    elif limit is not None:
        found = list(itertools.islice(_newest_in_state(target, state, batch=limit), limit))
    else:
        found = list(inbox_in_state(target, state))
    found.sort(key=lambda i: (i.received_at, i.delivery_id))
    return found if limit is None else found[:limit]


def inbox_in_state(
    target: Target,
    state: State,
    *,
    since: int | None = None,
    until: int | None = None,
    page_size: int | None = None,
) -> Iterator[InboxItem]:
    """Inbox items in ``state`` listed (entered their index label) at or after ``since``
    and before ``until`` (epoch seconds), from the state index a page at a time (never a
    scan); in no particular order. The index is eventually consistent: read an item
    again before acting on it."""
    for item in target.state_index(
        dynamodb_items.state_label(state),
        changed_since=since,
        changed_before=until,
        page_size=page_size,
    ):
        if (inbox := _inbox_in(item, state)) is not None:
            yield inbox


def _newest_in_state(target: Target, state: State, *, batch: int) -> Iterator[InboxItem]:
    """Inbox items in ``state``, the most recently listed first, read lazily."""
    label = dynamodb_items.state_label(state)
    for _listed_at, item in target.newest_listed([label], batch=min(batch, 100)):
        if (inbox := _inbox_in(item, state)) is not None:
            yield inbox


def _inbox_in(item: dynamodb_items.Item, state: State) -> InboxItem | None:
    """The listed record as an inbox item in ``state``, else None. The labels list only
    inbox items, but read defensively; one label may hold more than one state (pending
    and processing are both open)."""
    if item[table_layout.TABLE_SORT_KEY]["S"] != table_layout.SK_INBOX:
        return None
    inbox = dynamodb_items.inbox_from_item(item)
    return inbox if inbox.state is state else None


def _scan_inbox(target: Target) -> Iterator[dynamodb_items.Item]:
    arguments: dict[str, Any] = {
        "TableName": target.table_name,
        "FilterExpression": "#sk = :inbox",
        "ExpressionAttributeNames": {"#sk": table_layout.TABLE_SORT_KEY},
        "ExpressionAttributeValues": {":inbox": {"S": table_layout.SK_INBOX}},
        "ConsistentRead": True,
    }
    yield from paginate(target.dynamodb.scan, arguments)
