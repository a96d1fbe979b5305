"""In-process moto's DynamoDB one call at a time.

moto's ``TransactWriteItems`` deep-copies the whole table to roll back, while the
batch's other messages (threads of the same worker) write it: "dictionary changed size
during iteration". DynamoDB itself takes concurrent requests; only the stand-in needs
this. The local stack's emulator has its own transaction path and is not affected.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Final

_LOCK: Final = threading.RLock()
_CALLS: Final = (
    "put_item",
    "update_item",
    "delete_item",
    "get_item",
    "query",
    "scan",
    "transact_write_items",
    "transact_get_items",
    "batch_get_item",
    "batch_write_item",
)


def serialize_dynamodb() -> None:
    """Make each of moto's DynamoDB backend calls hold one lock (once per process)."""
    from moto.dynamodb.models import DynamoDBBackend  # noqa: PLC0415 (moto: tests only)

    for name in _CALLS:
        call = getattr(DynamoDBBackend, name)
        if getattr(call, "serialized", False):
            continue

        @functools.wraps(call)
        def serialized(self: Any, *args: Any, _call: Any = call, **kwargs: Any) -> Any:
            with _LOCK:
                return _call(self, *args, **kwargs)

        serialized.serialized = True  # type: ignore[attr-defined]
        setattr(DynamoDBBackend, name, serialized)
