"""Deliveries that wait for a person, and the decision, on a deployed or local stack.

``list_waiting`` reads the ``awaiting_approval`` label of the state index (never a
scan) and the approval record beside each item: what it proposes, from which package,
its digest, and until when. ``decide_approval`` decides the proposal a person names
(its digest; see :func:`decide_approval` for a decision that names none), records it
exactly once (:func:`functions.core.approval.decide`:
one transaction, a token that recognises a write whose answer was lost) and, for an
approval, sends the delivery's work item so that a worker resumes it; a send that fails
leaves it ``pending`` and listed, and the reconciler re-enqueues it one pending age later.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from functions.core import table_layout, tracing, work_trace
from functions.core.adapters.dynamodb_approvals import DynamoDbApprovals, approval_from_item
from functions.core.adapters.work_queue import SqsWorkQueue
from functions.core.approval import MAX_NOTE_CHARS, DecideOutcome, decide, new_decision_token
from functions.core.models import InboxItem
from functions.core.ports.approvals import (
    SHORT_DIGEST_CHARS,
    ApprovalDecision,
    ApprovalRecord,
    Decision,
)
from ops.shown_text import visible
from ops.target import OperatorError, Target

# Who decided, when nobody says (tests; the CLI and the console pass who: see
# ops.operator_identity). The reconciler's is "timeout".
DECIDED_BY_CLI: Final = "operator"
DECIDED_BY_CONSOLE: Final = "console"
# The shortest digest prefix a decision may name (approvals list prints 12).
MIN_NAMED_DIGEST: Final = 8
_HEX: Final = frozenset("0123456789abcdef")
_PAGE: Final = 100


@dataclass(frozen=True, slots=True)
class Waiting:
    """One parked delivery and what it proposes (None: its record is not readable)."""

    item: InboxItem
    record: ApprovalRecord | None

    def to_dict(self) -> dict[str, Any]:
        record = self.record
        return {
            "delivery_id": self.item.delivery_id,
            "approval": self.item.approval,
            "waiting_since": self.item.state_changed_at,
            "deadline": self.item.approval_deadline,
            "requested_at": None if record is None else record.requested_at,
            "proposal": None if record is None else dict(record.proposal),
            "proposal_digest": None if record is None else record.proposal_digest(),
            "short_digest": None if record is None else record.short_digest(),
            "package_digest": None if record is None else record.package_digest,
        }


def proposal_parts(proposal: Mapping[str, Any]) -> tuple[str, str]:
    """What a person reads to decide: a headline and the detail, each whole and with
    every character they would not see escaped visibly (:mod:`ops.shown_text`).

    An acting tool's call (``approval=tools:NAME``): ``tool NAME`` and its canonical
    arguments (sorted-key compact JSON: exactly what the digest is over); the agent's
    alert: its title and summary. Either may quote a model: shown as data, never
    followed.
    """
    if "tool" in proposal:
        arguments = json.dumps(
            proposal.get("input"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return visible(f"tool {proposal['tool']}"), visible(arguments)
    return visible(str(proposal.get("title", ""))), visible(str(proposal.get("summary", "")))


def proposal_text(record: ApprovalRecord) -> str:
    """The whole proposal as a person reads it before deciding: the canonical JSON,
    escaped visibly (every field, not only the headline)."""
    return visible(json.dumps(record.proposal, sort_keys=True, ensure_ascii=False))


def approvals_store(target: Target) -> DynamoDbApprovals:
    return DynamoDbApprovals(client=target.dynamodb, table_name=target.table_name)


def list_waiting(target: Target) -> list[Waiting]:
    """Every delivery parked for a decision, the oldest waiting first."""
    store = approvals_store(target)
    found = []
    for item in store.waiting(page_size=_PAGE):
        record = None if item.approval is None else store.get(item.delivery_id, item.approval)
        found.append(Waiting(item, record))
    found.sort(key=lambda w: (w.item.state_changed_at, w.item.delivery_id))
    return found


def approval_view(record: ApprovalRecord) -> dict[str, Any]:
    """One approval as ``inbox show`` prints it: the decision, who or what, when, why."""
    decided = record.decided
    return {
        "name": record.name,
        "requested_at": record.requested_at,
        "deadline": record.deadline,
        "proposal": dict(record.proposal),
        "proposal_digest": record.proposal_digest(),
        "package_digest": record.package_digest,
        "decision": None if decided is None else decided.decision.value,
        "decided_by": None if decided is None else decided.decided_by,
        "decided_at": None if decided is None else decided.decided_at,
        "note": None if decided is None else decided.note,
        "decided_proposal": None if decided is None else decided.proposal,
    }


def approval_line(record: ApprovalRecord) -> str:
    """``approved 2026-12-04T10:00:00Z by operator (note: ok)``, or what it waits for."""
    decided = record.decided
    if decided is None:
        return f"waiting since {_iso(record.requested_at)}, deadline {_iso(record.deadline)}"
    line = f"{decided.decision.value} {_iso(decided.decided_at)} by {visible(decided.decided_by)}"
    return line + (f" (note: {visible(decided.note)})" if decided.note else "")


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def delivery_approvals(target: Target, delivery_id: str) -> list[ApprovalRecord]:
    """The delivery's approval records (asked for, decided or not), oldest first."""
    records = [
        approval_from_item(item)
        for item in target.delivery_records(delivery_id, table_layout.SK_APPROVAL_PREFIX)
    ]
    return sorted(records, key=lambda r: (r.requested_at, r.name))


@dataclass(frozen=True, slots=True)
class DecisionReport:
    delivery_id: str
    name: str | None
    wanted: ApprovalDecision
    outcome: DecideOutcome
    record: ApprovalRecord | None
    resumed: bool = False  # approved now: its work item went to the queue
    # OTHER_PROPOSAL before any write: an approval naming no proposal where more than
    # one was ever asked for (the record's short digest is the one to name).
    proposal_required: bool = False

    def to_dict(self) -> dict[str, Any]:
        decided = None if self.record is None else self.record.decided
        return {
            "delivery_id": self.delivery_id,
            "approval": self.name,
            "wanted": self.wanted.value,
            "outcome": "proposal_required" if self.proposal_required else self.outcome.value,
            "proposal_digest": None if self.record is None else self.record.proposal_digest(),
            "decision": None if decided is None else decided.decision.value,
            "decided_by": None if decided is None else decided.decided_by,
            "decided_at": None if decided is None else decided.decided_at,
            "note": None if decided is None else decided.note,
            "resumed": self.resumed,
        }


def decide_approval(
    target: Target,
    delivery_id: str,
    wanted: ApprovalDecision,
    *,
    now: int,
    decided_by: str,
    note: str | None = None,
    name: str | None = None,
    proposal: str | None = None,
) -> DecisionReport:
    """Approve or deny what ``delivery_id`` waits for (``name``: which, when several).

    ``proposal``: the digest (at least 8 hex characters of it) of the proposal the
    person read; the decision is refused (``OTHER_PROPOSAL``) when another one waits,
    and the store refuses it too if the record changed since. Without it, a denial
    goes through (it runs nothing), and so does an approval when the delivery never
    asked for anything else (one approval record: what waits is what any listing
    showed); an approval where more than one was ever asked for is refused
    (``proposal_required``), naming the digest to pass after reading it.

    Raises:
        OperatorError: the note is too long, ``proposal`` is no digest, or the work
            item of an approved delivery could not be sent (it stays pending; the
            reconciler re-enqueues it).
    """
    if note is not None and len(note) > MAX_NOTE_CHARS:
        raise OperatorError(f"--note is longer than {MAX_NOTE_CHARS} characters")
    named = named_digest(proposal)
    store = approvals_store(target)
    name = name or _pending_name(target, delivery_id)
    record = None if name is None else store.get(delivery_id, name)
    if name is None or record is None:
        return DecisionReport(delivery_id, name, wanted, DecideOutcome.NOT_WAITING, record)
    digest = record.proposal_digest()
    if named is not None and not digest.startswith(named):
        return DecisionReport(delivery_id, name, wanted, DecideOutcome.OTHER_PROPOSAL, record)
    unnamed = named is None and wanted is ApprovalDecision.APPROVED and record.decided is None
    if unnamed and len(delivery_approvals(target, delivery_id)) > 1:
        return DecisionReport(
            delivery_id,
            name,
            wanted,
            DecideOutcome.OTHER_PROPOSAL,
            record,
            proposal_required=True,
        )
    # The full digest of the record read here: the store refuses it if that changed.
    decision = Decision(wanted, decided_by, now, new_decision_token(), note or None, digest)
    result = decide(store, delivery_id, name, decision)
    report = DecisionReport(delivery_id, name, wanted, result.outcome, result.record)
    if result.outcome is not DecideOutcome.APPLIED or wanted is not ApprovalDecision.APPROVED:
        return report
    item = target.claims().get(delivery_id)
    work = None if item is None else item.work_item()
    if work is None:
        return report
    try:
        queue = SqsWorkQueue(client=target.sqs, queue_url=target.work_queue_url)
        with work_trace.resending(tracing.SPAN_OPERATOR_PREFIX + "approve", [work]) as (traced,):
            queue.send(traced)
    except Exception as exc:  # noqa: BLE001 (StorageUnavailable: say what is left to do)
        raise OperatorError(
            f"{delivery_id} is approved and pending, but its work item could not be sent"
            f" ({exc}); the reconciler re-enqueues it within its pending age"
        ) from None
    return DecisionReport(delivery_id, name, wanted, result.outcome, result.record, resumed=True)


class BadDigest(OperatorError):
    """``--proposal`` is no digest (the caller's option)."""


def named_digest(proposal: str | None) -> str | None:
    """The digest prefix a decision names, lower case; None: none named."""
    if proposal is None:
        return None
    named = proposal.strip().lower()
    if not MIN_NAMED_DIGEST <= len(named) <= 64 or set(named) - _HEX:
        raise BadDigest(
            f"--proposal is a proposal's digest: the {SHORT_DIGEST_CHARS} hex characters"
            f" approvals list prints (at least {MIN_NAMED_DIGEST})"
        )
    return named


def _pending_name(target: Target, delivery_id: str) -> str | None:
    """What the delivery waits for: the parked item's approval, else its only record."""
    item = target.claims().get(delivery_id)
    if item is not None and item.approval is not None:
        return item.approval
    records = delivery_approvals(target, delivery_id)
    return records[0].name if len(records) == 1 else None
