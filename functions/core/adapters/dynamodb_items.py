"""The table's item shapes in DynamoDB's low-level attribute-value format.

Every adapter that reads or writes the table goes through these functions, so the
item layout is defined once. The low-level format (``{"S": ...}``) is used rather
than boto3's resource layer: it is what the wire carries and costs no conversion.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Final, TypeAlias

from functions.core import table_layout
from functions.core.delivery import Delivery
from functions.core.models import InboxItem, QuarantineRecord, State, WorkItem

if TYPE_CHECKING:
    # The stubs are a development dependency only; at run time the shape is a plain dict.
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

    AttributeValue: TypeAlias = AttributeValueTypeDef
else:
    AttributeValue = dict

Item = dict[str, AttributeValue]

# When the inbox item last changed state (or the reconciler restarted its clock): what
# the reconciler's age rules read. Not an index key, so changing it rewrites no entry.
STATE_CHANGED_AT: Final = "state_changed_at"

# The repeatable effects a completed delivery applied (a string set): their "done" mark
# is written by the completion itself, not by a record of their own (docs/processing.md).
EFFECTS_DONE: Final = "effects_done"
# Which failure a failed item is in: the owner token of the claim that failed it.
FAILED_BY: Final = "failed_by"

# What a parked (``awaiting_approval``) item waits for, and until when: what the decision
# and the reconciler's approval timeout check.
APPROVAL_NAME: Final = "approval"
APPROVAL_DEADLINE: Final = "approval_deadline"
# The delivery's trace (W3C traceparent of its accept span), on the inbox item and the
# outbox record: whoever sends its work again continues that trace.
TRACEPARENT: Final = "traceparent"

# The state index label of quarantine records (docs/architecture.md: quarantined#NN).
QUARANTINED_LABEL = "quarantined"

# Where each inbox state is listed in the state index: open work together (a claim then
# changes no index key), every end state under its own label (the reconciler and a bulk
# requeue read only the labels they act on).
_STATE_LABELS: Final[dict[State, str]] = {
    State.PENDING: table_layout.STATE_LABEL_OPEN,
    State.PROCESSING: table_layout.STATE_LABEL_OPEN,
    State.FAILED: table_layout.STATE_LABEL_FAILED,
    State.COMPLETED: table_layout.STATE_LABEL_COMPLETED,
    State.IGNORED: table_layout.STATE_LABEL_IGNORED,
    State.AWAITING_APPROVAL: table_layout.STATE_LABEL_AWAITING_APPROVAL,
}


# The states of open work: listed ``open`` only once the reconciler lists them.
OPEN_STATES: Final = frozenset({State.PENDING, State.PROCESSING})


def state_label(state: State) -> str:
    """The index label listing inbox items in ``state``."""
    return _STATE_LABELS[state]


def key(delivery_id: str, sort_key: str) -> Item:
    return {
        table_layout.TABLE_PARTITION_KEY: {"S": delivery_id},
        table_layout.TABLE_SORT_KEY: {"S": sort_key},
    }


def inbox_key(delivery_id: str) -> Item:
    return key(delivery_id, table_layout.SK_INBOX)


def outbox_key(delivery_id: str, received_at: int, *, shards: int) -> Item:
    """The outbox record's key: its place in the received log of ``shards`` partitions
    (table_layout)."""
    return key(
        received_log_shard(delivery_id, shards=shards),
        received_log_position(received_at, delivery_id),
    )


def received_log_shard(delivery_id: str, *, shards: int) -> str:
    """The received log's partition of one delivery, of ``shards``."""
    shard = zlib.crc32(delivery_id.encode()) % shards
    return f"{table_layout.RECEIVED_LOG_PREFIX}{shard:02d}"


def all_received_log_shards(shards: int) -> list[str]:
    """The first ``shards`` partitions of the received log."""
    return [f"{table_layout.RECEIVED_LOG_PREFIX}{shard:02d}" for shard in range(shards)]


def received_log_position(received_at: int, delivery_id: str = "") -> str:
    """The sort key of a receipt in its log partition; with no id, a window's bound: the
    bare second is a prefix of, so sorts before, every receipt of that second."""
    return f"{received_at:010d}#{delivery_id}" if delivery_id else f"{received_at:010d}"


def watermark_key() -> Item:
    return key(table_layout.WATERMARK_PARTITION, table_layout.WATERMARK_SORT_KEY)


def received_watermark_key(shard: int) -> Item:
    """The watermark of one shard of the received log (a run reading shards side by side)."""
    separator = table_layout.SHARD_WATERMARK_SEPARATOR
    sort_key = f"{table_layout.WATERMARK_SORT_KEY}{separator}{shard:02d}"
    return key(table_layout.WATERMARK_PARTITION, sort_key)


def state_shard(
    label: str, delivery_id: str, *, log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS
) -> str:
    """Index partition for ``label`` (a state or record kind) of one delivery, with the
    received log deployed at ``log_shards`` (``table_layout.listing_keys``).

    crc32 spreads ids evenly over the shards and is stable across processes,
    unlike ``hash()``.
    """
    keys = table_layout.listing_keys(label, log_shards)
    shard = zlib.crc32(delivery_id.encode()) % keys
    return f"{label}#{shard:02d}"


def is_listed(item: Item) -> bool:
    """Whether the item has an entry in the state index (both of its keys)."""
    return (
        table_layout.STATE_INDEX_PARTITION_KEY in item and table_layout.STATE_INDEX_SORT_KEY in item
    )


def all_state_shards(
    label: str, *, log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS
) -> list[str]:
    """Every index partition of ``label``, for queries that list it (``log_shards``: the
    largest count of the received log ever deployed, ``table_layout.listing_keys``)."""
    keys = table_layout.listing_keys(label, log_shards)
    return [f"{label}#{shard:02d}" for shard in range(keys)]


def _s(value: str) -> AttributeValue:
    return {"S": value}


def _n(value: int) -> AttributeValue:
    return {"N": str(value)}


def inbox_to_item(inbox: InboxItem) -> Item:
    item = _inbox_item(
        inbox.delivery_id,
        inbox.event,
        inbox.body_sha256,
        inbox.received_at,
        inbox.state,
        inbox.attempts,
        inbox.expires_at,
        inbox.state_changed_at or inbox.received_at,
        inbox.package_id,
        inbox.mcp_url,
    )
    if inbox.last_error is not None:
        item["last_error"] = _s(inbox.last_error)
    if inbox.lease_until is not None:
        item["lease_until"] = _n(inbox.lease_until)
    if inbox.completed_at is not None:
        item["completed_at"] = _n(inbox.completed_at)
    if inbox.transient_failures:
        item["transient_failures"] = _n(inbox.transient_failures)
    if inbox.reset_at is not None:
        item["reset_at"] = _n(inbox.reset_at)
    if inbox.requeued_at is not None:
        item["requeued_at"] = _n(inbox.requeued_at)
    if inbox.effects_done:
        item[EFFECTS_DONE] = {"SS": sorted(inbox.effects_done)}
    if inbox.approval is not None:
        item[APPROVAL_NAME] = _s(inbox.approval)
    if inbox.approval_deadline is not None:
        item[APPROVAL_DEADLINE] = _n(inbox.approval_deadline)
    if inbox.traceparent is not None:
        item[TRACEPARENT] = _s(inbox.traceparent)
    return item


def accepted_to_item(
    delivery: Delivery,
    work: WorkItem | None,
    *,
    body_sha256: str,
    received_at: int,
    expires_at: int,
    traceparent: str | None = None,
) -> Item:
    """``inbox_to_item(accept.inbox_item(...))`` of the same arguments, without the
    :class:`InboxItem` (the receiver writes one per request; see ``InboxWriter.record``)."""
    item = _inbox_item(
        delivery.delivery_id,
        delivery.event,
        body_sha256,
        received_at,
        State.PENDING if work is not None else State.IGNORED,
        0,
        expires_at,
        received_at,
        delivery.package_id,
        delivery.mcp_url,
    )
    if traceparent is not None:
        item[TRACEPARENT] = {"S": traceparent}
    return item


def _inbox_item(  # noqa: PLR0917 (every attribute an inbox item is created with)
    delivery_id: str,
    event: str,
    body_sha256: str,
    received_at: int,
    state: State,
    attempts: int,
    expires_at: int,
    state_changed_at: int,
    package_id: str | None,
    mcp_url: str | None,
) -> Item:
    # Attribute values written out rather than through _s/_n: this runs on every
    # accepted delivery, and a call per attribute is a fifth of its cost (figure 2).
    changed_at = str(state_changed_at)
    item: Item = {
        table_layout.TABLE_PARTITION_KEY: {"S": delivery_id},
        table_layout.TABLE_SORT_KEY: {"S": table_layout.SK_INBOX},
        table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_INBOX},
        "delivery_id": {"S": delivery_id},
        "event": {"S": event},
        "body_sha256": {"S": body_sha256},
        "received_at": {"N": str(received_at)},
        "state": {"S": state.value},
        "attempts": {"N": str(attempts)},
        table_layout.TTL_ATTRIBUTE: {"N": str(expires_at)},
        STATE_CHANGED_AT: {"N": changed_at},
    }
    if state not in OPEN_STATES:
        # An open item is not listed when it is written: its receipt is in the received
        # log, and the reconciler lists it once it has been open too long (table_layout).
        label = state_label(state)
        item[table_layout.STATE_INDEX_PARTITION_KEY] = {"S": state_shard(label, delivery_id)}
        item[table_layout.STATE_INDEX_SORT_KEY] = {"N": changed_at}
    if package_id is not None:
        item["package_id"] = {"S": package_id}
    if mcp_url is not None:
        item["mcp_url"] = {"S": mcp_url}
    return item


def _opt_s(item: Item, name: str) -> str | None:
    value = item.get(name)
    return None if value is None else str(value["S"])


def _opt_n(item: Item, name: str) -> int | None:
    value = item.get(name)
    return None if value is None else int(value["N"])


def inbox_from_item(item: Item) -> InboxItem:
    """Parse a stored inbox item; raises ``KeyError``/``ValueError`` on another shape."""
    return InboxItem(
        delivery_id=str(item["delivery_id"]["S"]),
        event=str(item["event"]["S"]),
        body_sha256=str(item["body_sha256"]["S"]),
        received_at=int(item["received_at"]["N"]),
        state=State(item["state"]["S"]),
        attempts=int(item["attempts"]["N"]),
        last_error=_opt_s(item, "last_error"),
        expires_at=int(item[table_layout.TTL_ATTRIBUTE]["N"]),
        package_id=_opt_s(item, "package_id"),
        mcp_url=_opt_s(item, "mcp_url"),
        state_changed_at=_opt_n(item, STATE_CHANGED_AT) or 0,
        lease_until=_opt_n(item, "lease_until"),
        completed_at=_opt_n(item, "completed_at"),
        transient_failures=_opt_n(item, "transient_failures") or 0,
        approval=_opt_s(item, APPROVAL_NAME),
        approval_deadline=_opt_n(item, APPROVAL_DEADLINE),
        reset_at=_opt_n(item, "reset_at"),
        requeued_at=_opt_n(item, "requeued_at"),
        effects_done=frozenset(item.get(EFFECTS_DONE, {}).get("SS", ())),
        traceparent=_opt_s(item, TRACEPARENT),
    )


def outbox_to_item(work: WorkItem, *, created_at: int, expires_at: int, shards: int) -> Item:
    """The outbox record of an accepted delivery. It expires with its inbox item
    (``expires_at``): as the received log it is how the reconciler finds an open item
    that was never listed, so it must outlive none of them."""
    # Values (and outbox_key's two) written out as inbox_to_item's are: it runs on every
    # accepted delivery.
    item: Item = {
        table_layout.TABLE_PARTITION_KEY: {
            "S": received_log_shard(work.delivery_id, shards=shards)
        },
        table_layout.TABLE_SORT_KEY: {"S": received_log_position(created_at, work.delivery_id)},
        table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_OUTBOX},
        "delivery_id": {"S": work.delivery_id},
        "event": {"S": work.event},
        "package_id": {"S": work.package_id},
        "mcp_url": {"S": work.mcp_url},
        "created_at": {"N": str(created_at)},
        table_layout.TTL_ATTRIBUTE: {"N": str(expires_at)},
    }
    if work.traceparent is not None:
        item[TRACEPARENT] = {"S": work.traceparent}
    return item


def work_item_from_outbox(item: Item) -> WorkItem:
    """The work item an outbox record (e.g. a stream NewImage) carries."""
    return WorkItem(
        delivery_id=str(item["delivery_id"]["S"]),
        event=str(item["event"]["S"]),
        package_id=str(item["package_id"]["S"]),
        mcp_url=str(item["mcp_url"]["S"]),
        traceparent=_opt_s(item, TRACEPARENT),
    )


def quarantine_key(delivery_id: str, received_sha256: str) -> Item:
    return key(delivery_id, table_layout.SK_QUARANTINE_PREFIX + received_sha256)


def quarantine_to_item(record: QuarantineRecord) -> Item:
    """A quarantine record: both digests and the time, never the body."""
    return {
        **quarantine_key(record.delivery_id, record.received_sha256),
        table_layout.KIND_ATTRIBUTE: _s(table_layout.KIND_QUARANTINE),
        "delivery_id": _s(record.delivery_id),
        "event": _s(record.event),
        "stored_sha256": _s(record.stored_sha256),
        "received_sha256": _s(record.received_sha256),
        "quarantined_at": _n(record.quarantined_at),
        table_layout.TTL_ATTRIBUTE: _n(record.expires_at),
        table_layout.STATE_INDEX_PARTITION_KEY: _s(
            state_shard(QUARANTINED_LABEL, record.delivery_id)
        ),
        table_layout.STATE_INDEX_SORT_KEY: _n(record.quarantined_at),
    }


def quarantine_from_item(item: Item) -> QuarantineRecord:
    """Parse a stored quarantine record; raises ``KeyError``/``ValueError`` on another shape."""
    return QuarantineRecord(
        delivery_id=str(item["delivery_id"]["S"]),
        event=str(item["event"]["S"]),
        stored_sha256=str(item["stored_sha256"]["S"]),
        received_sha256=str(item["received_sha256"]["S"]),
        quarantined_at=int(item["quarantined_at"]["N"]),
        expires_at=int(item[table_layout.TTL_ATTRIBUTE]["N"]),
    )
