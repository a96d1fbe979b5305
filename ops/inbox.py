"""What the inbox holds, as the operator sees it: state, attempts, digest, times; no body."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem, State
from ops.target import Target, paginate


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
    }


def show_inbox(target: Target, delivery_id: str) -> InboxItem | None:
    """The inbox item (consistent read), or None for an unknown id."""
    return target.claims().get(delivery_id)


def list_inbox(
    target: Target, *, state: State | None = None, limit: int | None = None
) -> list[InboxItem]:
    """Inbox items, oldest received first (then by id); ``state`` uses the by_state index."""
    if state is None:
        found = [dynamodb_items.inbox_from_item(i) for i in _scan_inbox(target)]
    else:
        found = [
            dynamodb_items.inbox_from_item(item)
            for item in target.state_index(state.value)
            # The index also lists other records (quarantine, effect intents) by label.
            if item[table_layout.TABLE_SORT_KEY]["S"] == table_layout.SK_INBOX
        ]
    found.sort(key=lambda i: (i.received_at, i.delivery_id))
    return found if limit is None else found[:limit]


def _scan_inbox(target: Target) -> Iterator[dynamodb_items.Item]:
    arguments: dict[str, Any] = {
        "TableName": target.table_name,
        "FilterExpression": "#sk = :inbox",
        "ExpressionAttributeNames": {"#sk": table_layout.TABLE_SORT_KEY},
        "ExpressionAttributeValues": {":inbox": {"S": table_layout.SK_INBOX}},
        "ConsistentRead": True,
    }
    yield from paginate(target.dynamodb.scan, arguments)
