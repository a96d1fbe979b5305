"""The ports of the reconciler: the open inbox items, the received log, uncertain effects."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from functions.core.models import InboxItem
from functions.core.ports.effects import EffectRecord


@dataclass(frozen=True, slots=True)
class OpenCursor:
    """Where a pass over a list of inbox items (the ``open`` ones; the parked ones too)
    resumes: a shard of the state index, and (within it) the entry after which to
    continue; None there: the shard's start."""

    shard: int
    after: tuple[int, str] | None = None  # (listed_at, delivery id) of the last entry read


@dataclass(frozen=True, slots=True)
class OpenPage:
    """One page of ``open`` items, and where the pass resumes after it (None: done)."""

    items: Sequence[InboxItem]
    resume: OpenCursor | None


@dataclass(frozen=True, slots=True)
class IntentCursor:
    """Where a pass over the uncertain effect intents resumes: a shard of the state
    index, and (within it) the intent after which to continue; None there: its start."""

    shard: int
    # (listed_at, delivery id, effect name) of the last intent read
    after: tuple[int, str, str] | None = None


@dataclass(frozen=True, slots=True)
class IntentPage:
    """One page of uncertain intents, and where the pass resumes after it (None: done)."""

    items: Sequence[EffectRecord]
    resume: IntentCursor | None


class RecoveryStore(Protocol):
    """Port: the inbox as the reconciler sees it."""

    def get(self, delivery_id: str) -> InboxItem | None: ...

    def open_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterable[OpenPage]:
        """The open items from ``start`` (None: the first shard's start), a page at a
        time, read lazily; each item as it was read (possibly a moment stale)."""
        ...

    def open_cursor(self) -> OpenCursor | None:
        """Where the last run left the pass over the open items (None: at its start)."""
        ...

    def save_open_cursor(self, cursor: OpenCursor | None) -> None: ...

    def touch_pending(self, item: InboxItem, *, now: int) -> bool: ...

    def release_expired(self, item: InboxItem, *, now: int) -> bool: ...


class ReceivedLogPart(Protocol):
    """Port: the receipts by time (all of them, or one shard's), and how far the
    reconciler has looked at them."""

    def watermark(self) -> int | None: ...

    def oldest(self, *, since: int | None = None) -> int | None:
        """When the oldest receipt (at or after ``since``) was received; None: none."""
        ...

    def unlisted_open_pages(
        self, *, since: int, before: int, page_size: int
    ) -> Iterable[Sequence[InboxItem]]:
        """Items received in ``[since, before)``, still open and not listed, a page of
        receipts at a time (an empty page too: a run bounded by time looks at each)."""
        ...

    def list_open(self, item: InboxItem) -> bool: ...

    def advance(self, watermark: int) -> None: ...


class ReceivedLog(ReceivedLogPart, Protocol):
    """Port: the received log, read as one or shard by shard."""

    def slices(self) -> Sequence[ReceivedLogPart]:
        """The log shard by shard, each a log with a watermark of its own, to be read
        side by side; the shared watermark may then advance to the least of theirs."""
        ...


class UncertainEffects(Protocol):
    """Port: effect intents without a done record."""

    def uncertain_pages(
        self, *, start: IntentCursor | None, intended_before: int, page_size: int
    ) -> Iterable[IntentPage]:
        """Unflagged intents older than ``intended_before`` from ``start`` (None: the
        first shard's start), a page at a time, read lazily."""
        ...

    def intent_cursor(self) -> IntentCursor | None:
        """Where the last run left the pass over the intents (None: at its start)."""
        ...

    def save_intent_cursor(self, cursor: IntentCursor | None) -> None: ...

    def flag(self, record: EffectRecord, *, now: int) -> bool: ...
