"""The ports of the approval records: asking, deciding, waiting."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from functions.core.models import InboxItem
from functions.core.ports.recovery import OpenCursor, OpenPage


class ApprovalDecision(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"  # by a person
    EXPIRED = "expired"  # by the reconciler, at the deadline: denied by the timeout

    @property
    def error_code(self) -> str:
        """The ``last_error`` of a delivery this decision ended (none for approved)."""
        return f"approval_{self.value}"


# A proposal's short digest: what ``approvals list`` prints and ``--proposal`` names.
SHORT_DIGEST_CHARS = 12


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision as recorded: what, who or what made it, when, with which token.

    ``proposal``: the digest of the proposal a person decided (what they were shown);
    the store refuses the decision when the record holds another. None: the timeout's,
    which decides whatever waits.
    """

    decision: ApprovalDecision
    decided_by: str
    decided_at: int
    token: str
    note: str | None = None
    proposal: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """What waits for a person (``name``) in one delivery, and its decision once made.

    Attributes:
        proposal: what the delivery will do once approved (a JSON object: the agent's
            alert, an acting tool's call). Untrusted where it quotes a model: shown as
            data, never followed.
        package_digest: the digest of the package the proposal was made from
            (:meth:`functions.core.package.Package.digest`); None on a record written
            before it was kept (a resumed run never matches it: asked again).
        traceparent: the span that asked (a tool call's, the attempt's): the wait
            for the decision is its child, recorded when the decision is made.
        requested_at_ns: when it was asked, in nanoseconds (the wait span's start).
    """

    delivery_id: str
    name: str
    proposal: Mapping[str, Any]
    requested_at: int
    deadline: int
    decided: Decision | None = None
    package_digest: str | None = None
    traceparent: str | None = field(default=None, compare=False)
    requested_at_ns: int | None = field(default=None, compare=False)

    def proposal_json(self) -> str:
        """The canonical form: sorted keys, no spaces (what the digest is over)."""
        return json.dumps(self.proposal, separators=(",", ":"), sort_keys=True)

    def proposal_digest(self) -> str:
        """SHA-256 (hex) of what a decision is about: the proposal and its package."""
        return proposal_digest(self.proposal, self.package_digest)

    def short_digest(self) -> str:
        return self.proposal_digest()[:SHORT_DIGEST_CHARS]


def proposal_digest(proposal: Mapping[str, Any], package_digest: str | None) -> str:
    """SHA-256 (hex) over the canonical proposal and the package digest: two proposals
    with another argument, text or package never share it."""
    canonical = json.dumps(
        {"package_digest": package_digest, "proposal": proposal},
        separators=(",", ":"),
        sort_keys=True,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class ApprovalStore(Protocol):
    """Port: the delivery's approval records (the table in production)."""

    def get(self, delivery_id: str, name: str) -> ApprovalRecord | None: ...

    def request(self, record: ApprovalRecord, *, expires_at: int) -> bool:
        """Write ``record`` (undecided) unless one exists; False when one did."""
        ...


class ApprovalDecisions(ApprovalStore, Protocol):
    """Port: deciding, and the deliveries waiting (the CLI, the console, the reconciler)."""

    def decide(self, delivery_id: str, name: str, decision: Decision) -> bool:
        """Record ``decision`` and move the waiting inbox item, in one transaction.

        Returns False when a condition refused it (decided already, the delivery is
        not waiting for ``name``, the record holds another proposal than
        ``decision.proposal``, or a person's decision comes at or after the deadline
        and the timeout's before it); raises ``TransientError`` when the outcome is
        unknown (it may have committed).
        """
        ...

    def waiting(self, *, page_size: int) -> Iterable[InboxItem]:
        """Every inbox item parked ``awaiting_approval``, page by page (a parked time
        ahead of the reader's clock, a skew between machines, hides none)."""
        ...

    def waiting_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterable[OpenPage]:
        """The parked items from ``start`` (None: the first shard's start), a page at a
        time, read lazily."""
        ...

    def waiting_cursor(self) -> OpenCursor | None:
        """Where the last run left the reconciler's pass over the parked items."""
        ...

    def save_waiting_cursor(self, cursor: OpenCursor | None) -> None: ...

    def waiting_since(self) -> int | None:
        """When the delivery parked longest ago was parked; None: none is parked."""
        ...
