"""Claiming a delivery for processing: one worker at a time, under a lease.

A claim is one conditional update of the inbox item (``pending``, or ``processing``
whose lease has expired, becomes ``processing`` with a new lease and one more
attempt). Every later state change of that attempt is conditional on still holding
the claim, identified by a random owner token written with it: a worker whose lease
expired (and whose delivery another worker took over) can no longer complete,
release or fail it.

A claim's whole lease ends before the item's TTL (``expires_at``). DynamoDB deletes
expired items late and in any order: past its TTL a delivery's effect records may be
gone while its inbox item is still there, and an attempt would find "no record" and
apply a done effect again. An item the claim refuses for its TTL is closed
(:meth:`ClaimStore.close_expired`), and an operator's reopen refuses it too.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from functions.core.errors import ProcessingError
from functions.core.models import WorkItem


class ClaimStatus(StrEnum):
    """What an attempt to claim a delivery found."""

    CLAIMED = "claimed"  # we hold it now
    COMPLETED = "completed"  # already done: acknowledge, do nothing
    CLOSED = "closed"  # failed or ignored: nothing to do either
    LEASED = "leased"  # another live worker holds it: come back later
    MISSING = "missing"  # no inbox item (expired by TTL, or not ours)
    # Open, but its TTL passes before a lease would end: its records may be deleted at
    # any time, so it must not run again (close it: ClaimStore.close_expired).
    EXPIRED = "expired"


# last_error of a delivery closed because its TTL passed before it could run again.
ITEM_EXPIRED: Final = "item_expired"


@dataclass(frozen=True, slots=True)
class Claim:
    """The right to process one delivery until ``lease_until``.

    Attributes:
        attempts: Claims of the delivery so far, this one included.
        expires_at: The inbox item's TTL; the delivery's other records share it.
        transient_failures: Earlier attempts that ended in a known-transient failure
            (released by :meth:`ClaimStore.release_transient`).
        retry_window_start: Where the retry horizon starts: the delivery's receipt, or
            the operator's reset of a failed delivery.
        work: The work item as the claimed inbox item stores it (None: it stores none).
            The worker runs this one: a queue message only says which delivery to claim.
        package: The :class:`~functions.core.ports.package_record.PackageRecord` the
            claimed item holds, when ``package_read``: the claim's own write returned the
            item, so the worker need not read it again. Typed ``object`` here: the port
            names claims, so a claim cannot name the port's record type (an import circle).
        package_read: Whether ``package`` is what the item held (False: not known).
    """

    delivery_id: str
    owner: str
    lease_until: int
    attempts: int
    expires_at: int = 0
    transient_failures: int = 0
    retry_window_start: int = 0
    work: WorkItem | None = None
    package: object | None = None
    package_read: bool = False

    @property
    def unexplained_attempts(self) -> int:
        """Attempts, this one included, that did not end in a known-transient failure:
        a workflow's unexpected error, or a worker that died holding the claim."""
        return self.attempts - self.transient_failures


@dataclass(frozen=True, slots=True)
class ClaimAttempt:
    """The result of :meth:`ClaimStore.claim`: a claim, or why there is none."""

    status: ClaimStatus
    claim: Claim | None = None
    lease_until: int | None = None  # the other holder's lease, when LEASED


class ClaimLost(ProcessingError):
    """Our lease expired and another worker claimed the delivery; it owns it now."""

    code = "claim_lost"


def new_owner_token() -> str:
    """A fresh, unguessable lease owner token (one per claim)."""
    return secrets.token_hex(16)
