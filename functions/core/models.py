"""The domain's typed values: what a delivery, an inbox item and a work item are."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class State(StrEnum):
    """Lifecycle of one inbox item."""

    PENDING = "pending"  # accepted, work item on its way to the queue
    PROCESSING = "processing"  # claimed by a worker holding a lease
    COMPLETED = "completed"  # the workflow reached its completion point
    FAILED = "failed"  # permanent failure or attempts exhausted
    IGNORED = "ignored"  # acknowledged event that needs no processing (ping, unknown)
    # parked: the workflow's proposal is recorded and waits for a person's decision; no
    # worker holds it (the decision re-enqueues it, or ends it ``failed``)
    AWAITING_APPROVAL = "awaiting_approval"


class Outcome(StrEnum):
    """What the receiver tells the sender (the ``outcome`` of every response body)."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    IGNORED = "ignored"
    REJECTED = "rejected"
    INVALID = "invalid"
    QUARANTINED = "quarantined"
    TOO_LARGE = "too_large"
    UNAVAILABLE = "unavailable"


EVENT_PACKAGE_RECEIVED = "package.received"
EVENT_PING = "ping"


@dataclass(frozen=True, slots=True)
class WorkItem:
    """What the outbox carries to the queue: everything the worker needs, no secret.

    ``traceparent`` (the span the work continues: the delivery's accept, the relay's
    send, a re-enqueue's) travels beside the body, as a message attribute; it is not
    part of what the work is (nor of equality).
    """

    delivery_id: str
    event: str
    package_id: str
    mcp_url: str
    traceparent: str | None = field(default=None, compare=False)

    def to_json(self) -> str:
        return json.dumps(
            {
                "delivery_id": self.delivery_id,
                "event": self.event,
                "package_id": self.package_id,
                "mcp_url": self.mcp_url,
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str, *, traceparent: str | None = None) -> WorkItem:
        """Parse a queue message body; raises ``ValueError`` on any other shape."""
        data: Any = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("work item is not a JSON object")
        values: list[str] = []
        for name in ("delivery_id", "event", "package_id", "mcp_url"):
            value = data.get(name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"work item lacks the string field {name}")
            values.append(value)
        delivery_id, event, package_id, mcp_url = values
        return cls(delivery_id, event, package_id, mcp_url, traceparent)


@dataclass(frozen=True, slots=True)
class UnsentWork:
    """A work item the queue refused in a batch send, with the queue's reason code."""

    work: WorkItem
    reason: str


@dataclass(frozen=True, slots=True)
class InboxItem:
    """One accepted delivery as the inbox stores it (never its body)."""

    delivery_id: str
    event: str
    body_sha256: str
    received_at: int
    state: State
    attempts: int = 0
    last_error: str | None = None
    expires_at: int = 0
    package_id: str | None = None
    mcp_url: str | None = None
    state_changed_at: int = 0
    lease_until: int | None = None
    completed_at: int | None = None
    transient_failures: int = 0  # attempts that ended in a known-transient failure
    # An operator's last reset of the failed delivery, or its last wait for the budget.
    reset_at: int | None = None
    # An operator's last requeue or redrive of the failed delivery (a bulk requeue does
    # not requeue it again within a window that began before it).
    requeued_at: int | None = None
    # The repeatable effects the completing attempt applied (marked by the completion).
    effects_done: frozenset[str] = frozenset()
    # While parked ``awaiting_approval``: the name of what waits, and its deadline.
    approval: str | None = None
    approval_deadline: int | None = None
    # The delivery's trace: its accept span (W3C traceparent; None: received untraced).
    traceparent: str | None = None

    @property
    def retry_window_start(self) -> int:
        """Where the retry horizon starts: the receipt, or the last reset or wait."""
        return self.received_at if self.reset_at is None else self.reset_at

    def work_item(self) -> WorkItem | None:
        """The work item this delivery needs, or None when it needs no processing."""
        if self.package_id is None or self.mcp_url is None:
            return None
        return WorkItem(
            self.delivery_id, self.event, self.package_id, self.mcp_url, self.traceparent
        )


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """A same-id, other-bytes delivery kept for an operator.

    The contract rules it out (docs/contract.md, Deliveries and attempts). Holds both
    digests and the time, never the body: the conflicting bytes may be a forgery made
    with a leaked secret.
    """

    delivery_id: str
    event: str
    stored_sha256: str  # the digest of the delivery accepted first
    received_sha256: str  # the digest of the conflicting body
    quarantined_at: int
    expires_at: int
