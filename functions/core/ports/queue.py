"""The ports of the work queue and its dead-letter queue (SQS in production)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from functions.core.models import UnsentWork, WorkItem


class WorkQueue(Protocol):
    """Port: the work queue and its dead-letter queue (SQS in production)."""

    def send(self, work: WorkItem, *, delay_seconds: int = 0) -> None: ...

    def change_visibility(self, receipt_handle: str, *, seconds: int) -> None: ...

    def dead_letter(self, body: str, *, reason: str, failure: str | None = None) -> None:
        """Copy ``body`` to the dead-letter queue, marked as dead-lettered by the worker
        for ``reason`` and ``failure`` (:attr:`Decision.failure`); the mark comes back
        with the message if SQS redrives it."""
        ...


class Enqueue(Protocol):
    def send(self, work: WorkItem, *, delay_seconds: int = 0) -> None: ...


class EnqueueBatch(Protocol):
    def send_batch(self, works: Sequence[WorkItem]) -> list[UnsentWork]:
        """Send ``works``; return those the queue refused (a failed call raises)."""
        ...
