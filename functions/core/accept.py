"""The receiver's use case: turn one signed HTTP request into at most one work item.

The order of the checks is the security argument (docs/contract.md, Signature):

1. size (nothing else is looked at for an oversized body);
2. signature: until it matches, no storage is touched, so an unauthenticated
   request can neither learn nor change anything;
3. the body against the contract;
4. the digest of the exact bytes and one atomic inbox + outbox write.

Adapters are reached only through the ports below, so the whole flow runs in
unit tests against in-memory fakes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from functions.core import signature, tracing, wire
from functions.core.clock import Clock
from functions.core.delivery import Delivery, InvalidDelivery, parse_delivery
from functions.core.errors import SigningSecretsUnavailable, StorageUnavailable
from functions.core.models import InboxItem, Outcome, QuarantineRecord, State, WorkItem
from functions.core.ports.inbox import InboxWriter
from functions.core.ports.secrets import SigningSecretSource
from functions.core.signature import SignatureRejected

# Every outcome's HTTP status. Only 2xx stops RelayLink's retries (docs/contract.md,
# Responses), so a duplicate and an ignored event get 200.
STATUS: Final[Mapping[Outcome, int]] = {
    Outcome.ACCEPTED: 202,
    Outcome.DUPLICATE: 200,
    Outcome.IGNORED: 200,
    Outcome.REJECTED: 401,
    Outcome.INVALID: 400,
    Outcome.QUARANTINED: 409,
    Outcome.TOO_LARGE: 413,
    Outcome.UNAVAILABLE: 503,
}

# An empty SHA-256 to copy: hashlib.sha256() looks the algorithm up in OpenSSL on every
# call, which costs more than hashing a delivery's body (figure 2). Never updated itself.
_SHA256: Final = hashlib.sha256()


def _body_sha256(body: bytes) -> str:
    """The hex SHA-256 of the exact body bytes (what the inbox keeps and compares)."""
    digest = _SHA256.copy()
    digest.update(body)
    return digest.hexdigest()


REASON_TOO_LARGE: Final = "body_too_large"
REASON_NOT_PROCESSED: Final = "event_not_processed"
REASON_DIGEST_MISMATCH: Final = "body_digest_mismatch"


@dataclass(frozen=True, slots=True)
class Acceptance:
    """The verdict on one request.

    ``delivery_id`` is set only once the signature matched: before that the header
    is attacker-controlled and is neither logged nor echoed.
    """

    outcome: Outcome
    reason: str | None = None
    delivery_id: str | None = None

    @property
    def status(self) -> int:
        return STATUS[self.outcome]


def unavailable(reason: str) -> Acceptance:
    """A 503: RelayLink retries later (docs/contract.md, Retries and timing)."""
    return Acceptance(Outcome.UNAVAILABLE, reason)


def too_large() -> Acceptance:
    return Acceptance(Outcome.TOO_LARGE, REASON_TOO_LARGE)


def inbox_item(
    delivery: Delivery,
    work: WorkItem | None,
    *,
    body_sha256: str,
    received_at: int,
    expires_at: int,
) -> InboxItem:
    """The inbox item :meth:`InboxWriter.record` writes: pending when the delivery has
    work, otherwise ignored (acknowledged, never processed)."""
    return InboxItem(
        delivery_id=delivery.delivery_id,
        event=delivery.event,
        body_sha256=body_sha256,
        received_at=received_at,
        state=State.PENDING if work is not None else State.IGNORED,
        expires_at=expires_at,
        package_id=delivery.package_id,
        mcp_url=delivery.mcp_url,
        state_changed_at=received_at,
        traceparent=None if work is None else work.traceparent,
    )


class AcceptDelivery:
    """Verify, parse and record one delivery attempt."""

    def __init__(
        self,
        *,
        inbox: InboxWriter,
        secrets: SigningSecretSource,
        clock: Clock,
        retention_seconds: int,
    ) -> None:
        self._inbox = inbox
        self._secrets = secrets
        self._clock = clock
        self._retention_seconds = retention_seconds

    def __call__(self, headers: Mapping[str, str], body: bytes) -> Acceptance:
        """Run the checks in the contract's order.

        Args:
            headers: the request headers, names lower-cased.
            body: the exact body bytes.
        """
        if len(body) > wire.MAX_BODY_BYTES:
            return too_large()
        now = self._clock.now()
        try:
            signed = signature.read_headers(
                delivery_id=headers.get(wire.HEADER_DELIVERY),
                timestamp=headers.get(wire.HEADER_TIMESTAMP),
                signature=headers.get(wire.HEADER_SIGNATURE),
                now=now,
            )
            # Only now, with well-formed fresh headers, are the secrets looked up: a
            # stale or malformed request costs no Secrets Manager call even when cold.
            signature.verify(signed, body, self._secrets.current())
        except SignatureRejected as exc:
            return Acceptance(Outcome.REJECTED, exc.reason.value)
        except SigningSecretsUnavailable as exc:
            return unavailable(exc.code)
        try:
            delivery = parse_delivery(
                body,
                header_delivery_id=signed.delivery_id,
                header_event=headers.get(wire.HEADER_EVENT),
            )
        except InvalidDelivery as exc:
            return Acceptance(Outcome.INVALID, exc.reason.value)
        digest = _body_sha256(body)
        try:
            return self._record(delivery, digest, now)
        except StorageUnavailable as exc:
            return Acceptance(Outcome.UNAVAILABLE, exc.code, delivery.delivery_id)

    def _record(self, delivery: Delivery, digest: str, now: int) -> Acceptance:
        # The work continues the trace of this request's accept span.
        work = delivery.work_item(traceparent=tracing.current_traceparent())
        existing = self._inbox.record(
            delivery,
            work,
            body_sha256=digest,
            received_at=now,
            expires_at=now + self._retention_seconds,
        )
        if existing is None:
            if work is None:
                return Acceptance(Outcome.IGNORED, REASON_NOT_PROCESSED, delivery.delivery_id)
            return Acceptance(Outcome.ACCEPTED, None, delivery.delivery_id)
        if existing.body_sha256 == digest:
            # A retry of an attempt already recorded: 2xx so RelayLink stops, no new work.
            return Acceptance(Outcome.DUPLICATE, None, delivery.delivery_id)
        # Same id, other bytes: impossible under the contract (docs/contract.md, Deliveries
        # and attempts), so either a sender bug or a forgery with a leaked secret. Keep
        # evidence, touch nothing else.
        self._inbox.quarantine(
            QuarantineRecord(
                delivery_id=delivery.delivery_id,
                event=delivery.event,
                stored_sha256=existing.body_sha256,
                received_sha256=digest,
                quarantined_at=now,
                expires_at=now + self._retention_seconds,
            )
        )
        return Acceptance(Outcome.QUARANTINED, REASON_DIGEST_MISMATCH, delivery.delivery_id)
