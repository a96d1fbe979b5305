"""Counting the AWS calls of boto3 clients, through botocore's event hooks."""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from botocore.model import OperationModel


class AwsCalls:
    """Counts the AWS API calls of the clients it watches, via botocore event hooks.

    ``before-call`` fires once per API call (SDK retries not included);
    ``before-send`` fires once per HTTP attempt (retries included).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.attempts: Counter[tuple[str, str]] = Counter()

    def watch(self, *clients: BaseClient) -> None:
        for client in clients:
            client.meta.events.register("before-call", self._on_call)
            client.meta.events.register_first("before-send", self._on_send)

    def _on_call(self, model: OperationModel, **_: object) -> None:
        with self._lock:
            self.calls[(model.service_model.service_name, model.name)] += 1

    def _on_send(self, event_name: str, **_: object) -> None:
        _prefix, service, operation = event_name.split(".", 2)
        with self._lock:
            self.attempts[(service, operation)] += 1

    def count(self, service: str | None = None) -> int:
        with self._lock:
            return sum(n for (s, _), n in self.calls.items() if service in (None, s))

    def operations(self, service: str | None = None) -> list[str]:
        with self._lock:
            return sorted(f"{op}x{n}" for (s, op), n in self.calls.items() if service in (None, s))

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.attempts.clear()
