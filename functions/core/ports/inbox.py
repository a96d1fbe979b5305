"""The port of the durable inbox as the receiver writes it (the table in production)."""

from __future__ import annotations

from typing import Protocol

from functions.core.delivery import Delivery
from functions.core.models import InboxItem, QuarantineRecord, WorkItem


class InboxWriter(Protocol):
    """The durable inbox: the receiver's only storage."""

    def record(
        self,
        delivery: Delivery,
        work: WorkItem | None,
        *,
        body_sha256: str,
        received_at: int,
        expires_at: int,
    ) -> InboxItem | None:
        """Write the delivery's new inbox item (:func:`inbox_item`) and ``work`` as its
        outbox record, atomically, if the delivery is new.

        Why not an :class:`InboxItem` argument: building one (17 frozen fields) was the
        largest part of the receiver's own item work per request (docs/benchmarks.md,
        figure 2); a writer builds its stored form from these fields directly.

        Returns:
            None when written; otherwise the inbox item already stored under the
            delivery id, and nothing was written.

        Raises:
            StorageUnavailable: throttled or failed; nothing was written.
        """
        ...

    def quarantine(self, record: QuarantineRecord) -> None:
        """Keep ``record`` for an operator (idempotent per conflicting digest).

        Raises:
            StorageUnavailable: throttled or failed.
        """
        ...
