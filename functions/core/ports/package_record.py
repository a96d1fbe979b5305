"""The port of a delivery's package record: the package it ran on, kept once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from functions.core.claim import Claim
from functions.core.ports.steps import StoredResult


@dataclass(frozen=True, slots=True)
class PackageRecord:
    """The package a delivery's first successful fetch returned, as the store keeps it.

    Attributes:
        digest: :meth:`functions.core.package.Package.digest`, kept for good.
        content: the canonical form (the bytes the digest is over), inline or in the
            object store under that digest, as a step's result is kept.
        recorded_by: the owner token of the claim that wrote it.
        refetched_digest: set when a later fetch (the content gone) returned another
            package: the delivery failed ``package_changed``, and this says with what.
    """

    delivery_id: str
    digest: str
    content: StoredResult
    recorded_at: int
    recorded_by: str
    refetched_digest: str | None = None
    refetched_at: int | None = None


class PackageRecordStore(Protocol):
    """Port: one package record per delivery (the table in production)."""

    def get(self, delivery_id: str) -> PackageRecord | None: ...

    def record(
        self, claim: Claim, record: PackageRecord, *, expires_at: int
    ) -> PackageRecord | None:
        """Keep ``record`` if ``claim`` still holds the delivery and none is kept yet.

        Returns:
            None when ``record`` was kept; else the record kept before (the first wins).

        Raises:
            ClaimLost: ``claim`` no longer holds the delivery: nothing was written.
            StorageUnavailable: throttled, or the answer was lost (it may have been kept).
        """
        ...

    def record_refetch(self, delivery_id: str, *, digest: str, now: int) -> None:
        """Note that a refetch returned a package of ``digest`` (another than the kept one)."""
        ...
