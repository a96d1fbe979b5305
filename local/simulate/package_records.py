"""The package records of a simulated world: the port's rules on a dict of its own.

Kept beside the world rather than in it (no fault boundary, no TTL): the simulator's
invariants do not judge these records yet, and a record outliving its delivery is
never read.
"""

from __future__ import annotations

from functions.core.claim import Claim, ClaimLost
from functions.core.models import State
from functions.core.ports.package_record import PackageRecord
from local.simulate.world import World


class PackageRecords:
    """:class:`functions.core.ports.package_record.PackageRecordStore`: only the claim's
    holder records, and the first record wins."""

    def __init__(self, world: World) -> None:
        self._w = world
        self._records: dict[str, PackageRecord] = {}

    def get(self, delivery_id: str) -> PackageRecord | None:
        return self._records.get(delivery_id)

    def record(
        self, claim: Claim, record: PackageRecord, *, expires_at: int
    ) -> PackageRecord | None:
        item = self._w.inbox.get(claim.delivery_id)
        holding = self._w.owners.get(claim.delivery_id) == claim.owner
        if item is None or item.state is not State.PROCESSING or not holding:
            raise ClaimLost()
        first = self._records.get(record.delivery_id)
        if first is not None:
            return first
        self._records[record.delivery_id] = record
        return None

    def record_refetch(self, delivery_id: str, *, digest: str, now: int) -> None:
        raise AssertionError("a simulated package's content is never lost")
