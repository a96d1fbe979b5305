"""The DynamoDB client the simulated adapters hold: the in-memory store, as botocore
sends to it, including the SDK's resend of a write whose answer was lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from local.memory_dynamodb import MemoryDynamoDB


class SimulatedClient:
    """Passes each request to the store; when :attr:`resend_next_write` is set (the
    world's ``sdk_retry`` fault), the next write commits, its answer is lost, and the
    same request is sent again: the caller gets the second answer (a conditional write
    is then refused by its own first send, an ``ADD`` applied twice)."""

    def __init__(self, store: MemoryDynamoDB) -> None:
        self._store = store
        self.resend_next_write = False
        self.get_item = store.get_item
        self.query = store.query
        self.batch_get_item = store.batch_get_item

    def put_item(self, **request: Any) -> dict[str, Any]:
        return self._write(self._store.put_item, request)

    def update_item(self, **request: Any) -> dict[str, Any]:
        return self._write(self._store.update_item, request)

    def delete_item(self, **request: Any) -> dict[str, Any]:
        return self._write(self._store.delete_item, request)

    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        return self._write(self._store.transact_write_items, request)

    def _write(
        self, send: Callable[..., dict[str, Any]], request: dict[str, Any]
    ) -> dict[str, Any]:
        if not self.resend_next_write:
            return send(**request)
        self.resend_next_write = False
        send(**request)  # committed (a refusal is an answer the SDK does not resend)
        return send(**request)
