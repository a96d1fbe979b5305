"""The port of an inbox item's processing state: claim, complete, release, fail."""

from __future__ import annotations

from typing import Protocol

from functions.core.claim import Claim, ClaimAttempt
from functions.core.ports.package_record import PackageRecord


class ClaimStore(Protocol):
    """Port: the inbox item's processing state (DynamoDB in production)."""

    def claim(
        self, delivery_id: str, *, owner: str, now: int, lease_seconds: int
    ) -> ClaimAttempt: ...

    def complete(
        self,
        claim: Claim,
        *,
        now: int,
        effects_done: frozenset[str] = frozenset(),
        package: PackageRecord | None = None,
    ) -> None:
        """Mark completed, with the names of the repeatable effects this attempt applied
        (their only "done" mark) and, for a workflow without effects, the package record
        not written before the run (in the same write); raises :class:`ClaimLost` when
        we no longer hold it."""
        ...

    def release(self, claim: Claim, *, now: int, error_code: str) -> None:
        """Back to pending with ``last_error``; raises :class:`ClaimLost`."""
        ...

    def release_transient(self, claim: Claim, *, now: int, error_code: str) -> None:
        """Back to pending with ``last_error``, counting the attempt as a known-transient
        failure (so it does not use the budget of unexplained attempts); raises
        :class:`ClaimLost`."""
        ...

    def give_back(self, claim: Claim, *, now: int) -> None:
        """Back to pending as if never claimed (the attempt it counted is given back):
        nothing ran. Raises :class:`ClaimLost`."""
        ...

    def fail(self, claim: Claim, *, now: int, error_code: str) -> None:
        """Mark failed with ``last_error``, this failure named by ``claim.owner``; raises
        :class:`ClaimLost`."""
        ...

    def defer(self, claim: Claim, *, now: int, error_code: str) -> None:
        """Back to pending with ``last_error``: the delivery waits for something outside
        it (the token budget), it did not fail. Neither retry budget is spent: the
        attempt is given back and the retry horizon restarts at ``now``. Raises
        :class:`ClaimLost`."""
        ...

    def park(self, claim: Claim, *, now: int, approval: str, deadline: int) -> None:
        """``awaiting_approval``: the delivery waits for a person's decision on
        ``approval`` until ``deadline``; the lease is let go and the attempt given back
        (waiting is no failure). Raises :class:`ClaimLost`."""
        ...

    def close_expired(self, delivery_id: str, *, now: int, lease_seconds: int) -> bool:
        """Close an open item that :meth:`claim` refused for its TTL: ``failed`` with
        ``last_error`` = :data:`ITEM_EXPIRED`. False when it is not open, a live worker
        holds it, or a lease from ``now`` would end before its TTL."""
        ...

    def reopen(self, delivery_id: str, *, now: int, failure: str | None = None) -> bool:
        """``failed`` -> ``pending`` with a fresh attempt budget (a dead letter moved back
        by an operator); False when the delivery is not failed, or has expired.

        Args:
            failure: reopen only this failure (:attr:`Claim.owner` of the claim that
                failed it, which its dead letter carries); None: whichever it is in.
        """
        ...
