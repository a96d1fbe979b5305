"""The package is an input of the delivery, recorded once: every attempt runs on the first.

A run is durable only if its input is. An attempt resumed after a person's approval
must read the package that person approved (and a screening passed), not whatever the
MCP server answers now: docs/contract.md promises byte-identical webhook bodies, not
immutable packages. So a delivery's first successful fetch is recorded: its digest
(:meth:`~functions.core.package.Package.digest`) always, and its canonical form where
the steps keep their results (:mod:`functions.core.steps`: inline in the record up to
the inline limit, else in the object store under the digest). Every later attempt
reads the record and fetches nothing.

Only the claim's holder records, checked in the same write, and the first record wins:
an attempt whose lease ran out cannot replace its successor's package, and two
overlapping attempts end up with one.

When the content is gone but the digest is kept (the object deleted), the package is
fetched again and used only if it is the recorded one; another is refused as
``package_changed`` (:class:`~functions.core.errors.PackageChanged`): nothing runs on
it, and the record keeps both digests for the operator.

The first run parses the stored form too, so it sees exactly what a retry will see.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from functions.core import tracing
from functions.core.claim import Claim
from functions.core.clock import Clock
from functions.core.errors import PackageChanged, StorageUnavailable, TransientError
from functions.core.models import WorkItem
from functions.core.package import Package
from functions.core.ports.package import PackageSource
from functions.core.ports.package_record import PackageRecord, PackageRecordStore
from functions.core.ports.steps import ObjectStore, StoredResult
from functions.core.steps import INLINE_RESULT_LIMIT, keep_result, result_object_key

# last_error of an attempt whose package record write lost its answer.
RECORD_UNKNOWN = "package_record_unknown"


@dataclass(frozen=True, slots=True)
class PackageStorage:
    """Where package records live: built once, shared by every delivery.

    Attributes:
        records: the records (digest, and content up to ``inline_limit``).
        objects: the steps' object store, for larger content; without it, larger
            content is an error, as a larger step result is.
    """

    records: PackageRecordStore
    objects: ObjectStore | None = None
    inline_limit: int = INLINE_RESULT_LIMIT


class PackageRecorder:
    """The recorded package of a claimed delivery, fetched only when there is none."""

    def __init__(self, storage: PackageStorage, *, clock: Clock) -> None:
        self._storage = storage
        self._clock = clock

    async def package(self, claim: Claim, work: WorkItem, source: PackageSource) -> Package:
        """The package ``work``'s delivery runs on: the recorded one, or the first fetch.

        Raises:
            PackageChanged: the content was gone and a refetch returned another package.
            ClaimLost: ``claim`` lost the delivery before its fetch was recorded.
            TransientError: ``package_record_unknown``: the record's write lost its
                answer. It may be kept: the next attempt reads it, never assumes not.
            Whatever ``source`` raises.
        """
        package, record = await self.unrecorded(claim, work, source)
        if record is None:
            return package
        try:
            first = self._storage.records.record(claim, record, expires_at=claim.expires_at)
        except StorageUnavailable as exc:
            raise TransientError(RECORD_UNKNOWN) from exc
        if first is not None:
            return await self._kept(first, work, source)
        return package

    async def unrecorded(
        self, claim: Claim, work: WorkItem, source: PackageSource
    ) -> tuple[Package, PackageRecord | None]:
        """The recorded package and None, or the first fetch and its record, unwritten.

        For a workflow without effects the completion writes that record
        (:meth:`~functions.core.ports.claims.ClaimStore.complete`): nothing happens
        outside between the fetch and that write, so an attempt that dies between them
        leaves no record, and the next one fetches as it would have before the record.

        Raises:
            PackageChanged: the content was gone and a refetch returned another package.
            Whatever ``source`` raises.
        """
        # The claim's write returned the item: when that settles it, no second read.
        records = self._storage.records
        kept = _settled(claim) if _settled_by(claim) else records.get(work.delivery_id)
        if kept is not None:
            return await self._kept(kept, work, source), None
        with tracing.span(tracing.SPAN_FETCH, attributes={"package_id": work.package_id}):
            fetched = await source.get_package(work.mcp_url, work.package_id)
        body = fetched.canonical()
        record = PackageRecord(
            delivery_id=work.delivery_id,
            digest=hashlib.sha256(body).hexdigest(),
            content=self._keep(body),
            recorded_at=self._clock.now(),
            recorded_by=claim.owner,
        )
        return _parse(body), record

    async def _kept(self, record: PackageRecord, work: WorkItem, source: PackageSource) -> Package:
        body = self._content(record)
        if body is not None:
            return _parse(body)
        with tracing.span(
            tracing.SPAN_FETCH, attributes={"package_id": work.package_id, "refetch": True}
        ):
            refetched = await source.get_package(work.mcp_url, work.package_id)
        digest = refetched.digest()
        if digest != record.digest:
            self._storage.records.record_refetch(
                work.delivery_id, digest=digest, now=self._clock.now()
            )
            raise PackageChanged()
        body = refetched.canonical()
        self._keep(body)  # its object back, under the same digest
        return _parse(body)

    def _keep(self, body: bytes) -> StoredResult:
        storage = self._storage
        return keep_result(body, objects=storage.objects, inline_limit=storage.inline_limit)

    def _content(self, record: PackageRecord) -> bytes | None:
        """The recorded canonical form, or None when it is gone (or not the digest's)."""
        content = record.content
        if content.inline is not None:
            body = content.inline.encode("utf-8")
        elif self._storage.objects is None:
            return None
        else:
            body = self._storage.objects.get(result_object_key(record.digest)) or b""
        return body if hashlib.sha256(body).hexdigest() == record.digest else None


def _settled_by(claim: Claim) -> bool:
    """Whether the item the claim's write returned settles the record: it holds one, or
    this is a first attempt (an earlier version's record of its own can only come from
    an earlier attempt)."""
    return claim.package_read and (claim.package is not None or claim.attempts <= 1)


def _settled(claim: Claim) -> PackageRecord | None:
    if claim.package is None or isinstance(claim.package, PackageRecord):
        return claim.package
    raise TypeError(f"a claim's package is a PackageRecord, not {type(claim.package)}")


def _parse(body: bytes) -> Package:
    return Package.from_mapping(json.loads(body))
