"""Quarantine records: a delivery id seen again with other body bytes (both digests, no body)."""

from __future__ import annotations

from typing import Any

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import QuarantineRecord
from ops.target import Target


def quarantine_view(record: QuarantineRecord) -> dict[str, Any]:
    """One quarantine record: both digests and the time (never a body: none is kept)."""
    return {
        "delivery_id": record.delivery_id,
        "event": record.event,
        "stored_sha256": record.stored_sha256,
        "received_sha256": record.received_sha256,
        "quarantined_at": record.quarantined_at,
    }


def _quarantine_order(record: QuarantineRecord) -> tuple[int, str, str]:
    return (record.quarantined_at, record.delivery_id, record.received_sha256)


def list_quarantine(target: Target) -> list[QuarantineRecord]:
    """Every quarantine record (from the state index), oldest first."""
    records = [
        dynamodb_items.quarantine_from_item(item)
        for item in target.state_index(dynamodb_items.QUARANTINED_LABEL)
    ]
    return sorted(records, key=_quarantine_order)


def show_quarantine(target: Target, delivery_id: str) -> list[QuarantineRecord]:
    """The quarantine records of one delivery (one per conflicting body digest)."""
    records = [
        dynamodb_items.quarantine_from_item(item)
        for item in target.delivery_records(delivery_id, table_layout.SK_QUARANTINE_PREFIX)
    ]
    return sorted(records, key=_quarantine_order)
