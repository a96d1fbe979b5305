"""The ports of the step records and of the objects too large for a record."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class StepStatus(StrEnum):
    STARTED = "started"  # running, or its worker died inside it
    FAILED = "failed"  # the function raised: run it again, no rerun counted
    RECORDED = "recorded"  # the result is kept; never run again


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A step's result as kept: inline JSON, or the digest of an object holding it."""

    size: int  # bytes of compact JSON
    inline: str | None = None
    digest: str | None = None  # sha256 hex of the JSON bytes


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of one delivery, as the store keeps it."""

    delivery_id: str
    name: str
    status: StepStatus
    runs: int  # runs started so far
    started_at: int
    recorded_at: int | None = None
    result: StoredResult | None = None  # set when RECORDED
    # What the step is, for people, beside a name that may be a digest ("tool lookup").
    label: str | None = None
    # Why its last run failed, naming the culprit and the exception's type, never its
    # message ("tool lookup raised KeyError"): set when FAILED.
    error: str | None = None


class StepStore(Protocol):
    """Port: the step records (the table in production)."""

    def get(self, delivery_id: str, name: str) -> StepRecord | None: ...

    def start(
        self, delivery_id: str, name: str, *, now: int, expires_at: int, label: str = ""
    ) -> StepRecord | None:
        """Mark a new run started (adding one to ``runs``) unless a result is recorded;
        keep ``label`` (when given) as the step's readable name.

        Returns:
            The record as it was before: None for the first run. A RECORDED record
            means the start was refused and nothing was written.
        """
        ...

    def record_failed(
        self, delivery_id: str, name: str, *, run: int, now: int, error: str = ""
    ) -> bool:
        """Mark run ``run`` failed, with ``error`` (what failed, no message), if it is still
        the latest run and nothing is recorded."""
        ...

    def record_result(
        self, delivery_id: str, name: str, *, result: StoredResult, now: int
    ) -> StepRecord | None:
        """Keep ``result`` unless a result is already recorded.

        Returns:
            None when ``result`` was kept; else the record holding the first result.
        """
        ...


class ObjectStore(Protocol):
    """Port: content-addressed objects for results too large for a record (S3)."""

    def put(self, key: str, body: bytes) -> None: ...

    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None when there is no such object."""
        ...
