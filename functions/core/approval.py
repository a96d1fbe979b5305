"""The approval gate: an action that waits for a person's yes, decided exactly once.

A workflow calls :func:`require_approval` once its proposal is recorded (the agent:
after the model step, before the alert). The first call writes the delivery's
*approval record* (``approval#<name>``: the proposal, when it was asked for and its
deadline) and raises :class:`AwaitingApproval`; the worker then parks the delivery
(``awaiting_approval``: no lease, no message in flight, no compute while a person
thinks). A decision is one transaction on the approval record and the inbox item
(:func:`decide`): approved, the delivery goes back to ``pending`` and its work item is
sent again, and the resumed run finds the record approved and goes on, reusing every
recorded step; denied (by a person) or expired (by the reconciler at the deadline), it
ends ``failed`` with ``approval_denied`` / ``approval_expired``, and any later run of
it (a requeue) meets the same recorded refusal.

**What was approved is what runs.** The record binds the exact call: the proposal
(an alert's text, a tool's name and canonical arguments) and the digest of the
package it was made from. A person's decision names the proposal's digest, and the
store refuses it when the record holds another one, or when it comes at or after the
deadline (``approval_expired``, whatever the reconciler has done). A resumed run that
proposes anything else (other arguments, other text, another package) finds no
decision for it: it asks again under a name of its own (``<name>.<short digest>``)
and parks; the old decision never runs what nobody saw.

**Exactly once, also when an answer is lost.** Each decision carries a fresh token,
written with it. A decision whose write committed but whose answer was lost (the SDK
retries it and meets its own condition; or it raises after committing) is recognised
by its token on the record and reported as applied, never as a conflict; a second
decision of the same kind changes nothing and says so; the other kind is refused.
"""

from __future__ import annotations

import dataclasses
import secrets
import string
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from functions.core import tracing
from functions.core.errors import PermanentError, ProcessingError, TransientError
from functions.core.observability import logger
from functions.core.ports.approvals import (
    SHORT_DIGEST_CHARS,
    ApprovalDecision,
    ApprovalDecisions,
    ApprovalRecord,
    ApprovalStore,
    Decision,
)

# Who or what decided: a person through the CLI or the console, or the deadline.
DECIDED_BY_TIMEOUT: Final = "timeout"
# The proposal kept on the record and shown to the person deciding (DynamoDB's item
# limit is 400 KB; a proposal is an alert, a few KB).
MAX_PROPOSAL_BYTES: Final = 64_000
MAX_NOTE_CHARS: Final = 500
# An approval's deadline comes at least this long before its delivery expires.
EXPIRY_MARGIN_SECONDS: Final = 3600


# What the ``approval`` setting may name: the alert, and (for workflows with tools) the
# tools whose calls wait for a person.
APPROVAL_ALERT: Final = "alert"
_TOOLS_PREFIX: Final = "tools:"
# A tool's name is Bedrock's ([a-zA-Z0-9_-]); the dot is kept for names read before.
_NAME_CHARS: Final = frozenset(string.ascii_letters + string.digits + "_.-")


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """What waits for a person, from the ``approval`` setting.

    The setting is ``alert``, ``tools:NAME,NAME`` or both joined by ``;``
    (``alert;tools:open_ticket``); empty or absent: the alert goes out unasked. Acting
    tools wait whatever it says, unless the setting ``tools_without_approval`` exempts
    them by name (``functions.workflows.tool_loop.ToolApproval``); naming one here
    keeps it waiting, and a name both here and exempted is refused.
    """

    alert: bool = False
    tools: frozenset[str] = frozenset()

    @property
    def any(self) -> bool:
        return self.alert or bool(self.tools)

    @classmethod
    def parse(cls, text: str | None) -> ApprovalPolicy:
        """Raises ``ValueError`` naming the part it does not understand."""
        alert = False
        tools: set[str] = set()
        for raw in (text or "").split(";"):
            part = raw.strip()
            if not part:
                continue
            if part == APPROVAL_ALERT:
                alert = True
            elif part.startswith(_TOOLS_PREFIX):
                names = _names(part.removeprefix(_TOOLS_PREFIX))
                if names is None:
                    raise ValueError(f"approval: {part!r} must be tools:NAME,NAME ([a-zA-Z0-9_.-])")
                tools.update(names)
            else:
                raise ValueError(f"approval: {part!r} is neither 'alert' nor 'tools:NAME,...'")
        return cls(alert=alert, tools=frozenset(tools))

    def needs_tool(self, name: str) -> bool:
        return name in self.tools


def tool_names(text: str | None, *, setting: str) -> frozenset[str]:
    """The tool names a setting lists as ``NAME,NAME`` (empty or absent: none).

    Raises:
        ValueError: naming ``setting``, for a name outside ``[a-zA-Z0-9_.-]``.
    """
    if not (text or "").strip():
        return frozenset()
    names = _names(text or "")
    if names is None:
        raise ValueError(f"{setting}: {text!r} must be NAME,NAME ([a-zA-Z0-9_.-])")
    return frozenset(names)


def _names(text: str) -> list[str] | None:
    names = [n.strip() for n in text.split(",")]
    if not all(names) or any(set(n) - _NAME_CHARS for n in names):
        return None
    return names


class AwaitingApproval(ProcessingError):
    """The delivery waits for a person: the worker parks it (no retry, no failure)."""

    code = "awaiting_approval"
    # The spans it leaves are not failed: they end where the wait begins.
    span_error = False

    def __init__(
        self,
        name: str,
        deadline: int,
        proposal_digest: str = "",
        package_digest: str | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.deadline = deadline
        # What it waits for: the proposal's digest (what a decision names) and the
        # package it was made from; a resumed run goes on only for the same.
        self.proposal_digest = proposal_digest
        self.package_digest = package_digest


class ApprovalRefused(PermanentError):
    """Denied by a person or by the timeout; ``code`` says which."""

    code = "approval_denied"


def require_approval(
    store: ApprovalStore,
    *,
    delivery_id: str,
    name: str,
    proposal: Mapping[str, Any],
    package_digest: str | None,
    now: int,
    timeout_seconds: int,
    expires_at: int,
) -> ApprovalRecord:
    """The approved record of exactly this proposal; asks for it when it was not asked.

    Call it only with a proposal built from recorded results, so that the run resumed
    after approval proposes the same; one that proposes anything else (or from another
    package) is asked for anew (see the module docstring).

    Raises:
        AwaitingApproval: undecided (asked for now, or earlier): park the delivery.
        ApprovalRefused: denied, or expired (``approval_expired``).
        PermanentError: ``approval_proposal_too_large``, or
            ``approval_proposal_conflict`` (a record under the proposal's own name
            holds another proposal: a digest collision, or a forged record).
    """
    deadline = now + timeout_seconds
    if expires_at:
        # A decision after the item's expiry would find nothing to resume, and TTL
        # may delete the item soon after it: the timeout comes first, with time for
        # a reconciler run to deny it visibly.
        deadline = min(deadline, expires_at - EXPIRY_MARGIN_SECONDS)
    asked = ApprovalRecord(
        delivery_id,
        name,
        dict(proposal),
        now,
        deadline,
        package_digest=package_digest,
        traceparent=tracing.current_traceparent(),
        requested_at_ns=time.time_ns(),
    )
    digest = asked.proposal_digest()
    record = store.get(delivery_id, name)
    if record is not None and record.proposal_digest() != digest:
        # Decided or not, that record is about something else: this proposal waits
        # under its own name, and nothing decided about the other one applies to it.
        logger.warning(
            "the run proposes something else than the approval asked for: asked again",
            extra={
                "delivery_id": delivery_id,
                "approval": name,
                "asked": record.short_digest(),
                "proposed": digest[:SHORT_DIGEST_CHARS],
            },
        )
        asked = dataclasses.replace(asked, name=reproposal_name(name, digest))
        record = store.get(delivery_id, asked.name)
        if record is not None and record.proposal_digest() != digest:
            raise PermanentError("approval_proposal_conflict")
    if record is None:
        record = _ask(store, asked, expires_at=expires_at)
    if record.decided is None:
        logger.info(
            "waits for a person's decision",
            extra={
                "delivery_id": delivery_id,
                "approval": record.name,
                "proposal": record.short_digest(),
                "package_digest": package_digest,
            },
        )
        raise AwaitingApproval(record.name, record.deadline, digest, package_digest)
    if record.decided.decision is not ApprovalDecision.APPROVED:
        raise ApprovalRefused(record.decided.decision.error_code)
    return record


def reproposal_name(name: str, digest: str) -> str:
    """Where a proposal that differs from the one asked for under ``name`` waits."""
    return f"{name}.{digest[:SHORT_DIGEST_CHARS]}"


def _ask(store: ApprovalStore, asked: ApprovalRecord, *, expires_at: int) -> ApprovalRecord:
    if len(asked.proposal_json().encode()) > MAX_PROPOSAL_BYTES:
        raise PermanentError("approval_proposal_too_large")
    failure: TransientError | None = None
    try:
        written = store.request(asked, expires_at=expires_at)
    except TransientError as exc:
        written, failure = False, exc  # committed or not: the read below tells
    # A put whose answer was lost finds its own record (the SDK's retry meets its
    # condition, or it raised after committing); a put that met another record finds
    # that one, checked again by the caller's digest comparison below.
    record = asked if written else store.get(asked.delivery_id, asked.name)
    if record is None:
        raise failure or TransientError("approval_unreadable")
    if record.proposal_digest() != asked.proposal_digest():
        raise PermanentError("approval_proposal_conflict")
    return record


class DecideOutcome(StrEnum):
    APPLIED = "applied"  # this call's decision is recorded
    UNCHANGED = "unchanged"  # the same decision was recorded before: nothing changed
    REFUSED = "refused"  # the other decision was recorded before
    NOT_WAITING = "not_waiting"  # no such approval, or its delivery is not parked for it
    EXPIRED = "expired"  # a person's decision at or after the deadline: refused
    OTHER_PROPOSAL = "other_proposal"  # the record holds another proposal than named


@dataclass(frozen=True, slots=True)
class DecideResult:
    outcome: DecideOutcome
    record: ApprovalRecord | None  # the record as it stands after the call


def new_decision_token() -> str:
    return secrets.token_hex(8)


def decide(store: ApprovalDecisions, delivery_id: str, name: str, wanted: Decision) -> DecideResult:
    """Record ``wanted`` exactly once (see the module docstring).

    A person's decision (approved or denied) at or after the deadline is ``EXPIRED``,
    also when the timeout's is recorded already; one naming another proposal than the
    record's is ``OTHER_PROPOSAL``. Neither changes anything.

    Raises:
        TransientError: the store failed and the record does not show the decision.
    """
    failure: TransientError | None = None
    try:
        if store.decide(delivery_id, name, wanted):
            return _waited(DecideResult(DecideOutcome.APPLIED, store.get(delivery_id, name)))
    except TransientError as exc:
        failure = exc  # committed or not: the record tells
    record = store.get(delivery_id, name)
    decided = None if record is None else record.decided
    if decided is not None and decided.token == wanted.token:
        return _waited(DecideResult(DecideOutcome.APPLIED, record))  # ours, its answer lost
    if record is not None and (late := _refused_as_made(record, wanted)) is not None:
        return DecideResult(late, record)
    if decided is None:
        if failure is not None:
            raise failure
        return DecideResult(DecideOutcome.NOT_WAITING, record)
    # Denied by a person or by the timeout: a deny meeting either one changes nothing.
    refusals = {ApprovalDecision.DENIED, ApprovalDecision.EXPIRED}
    same = decided.decision is wanted.decision or {decided.decision, wanted.decision} <= refusals
    if same:
        return DecideResult(DecideOutcome.UNCHANGED, record)
    return DecideResult(DecideOutcome.REFUSED, record)


def _waited(result: DecideResult) -> DecideResult:
    """Record the wait the decision ended, as one span from the asking to now, under
    the span that asked (the delivery's trace)."""
    record = result.record
    decided = None if record is None else record.decided
    asker = None if record is None else tracing.parent_from(record.traceparent)
    if record is None or decided is None or asker is None:
        return result
    ended_ns = time.time_ns()
    started_ns = record.requested_at_ns or record.requested_at * 1_000_000_000
    tracing.record(
        tracing.SPAN_APPROVAL_WAIT,
        parent=asker,
        start_ns=min(started_ns, ended_ns),
        end_ns=ended_ns,
        attributes={
            "delivery_id": record.delivery_id,
            "approval": record.name,
            "decision": decided.decision.value,
            "decided_by_timeout": decided.decided_by == DECIDED_BY_TIMEOUT,
        },
    )
    return result


def _refused_as_made(record: ApprovalRecord, wanted: Decision) -> DecideOutcome | None:
    """Why a person's decision cannot stand, whatever was recorded: it names another
    proposal, or it comes at or after the deadline (the timeout's, recorded or not)."""
    if wanted.decision is ApprovalDecision.EXPIRED:
        return None
    if wanted.proposal is not None and wanted.proposal != record.proposal_digest():
        return DecideOutcome.OTHER_PROPOSAL
    decided = record.decided
    timed_out = decided is not None and decided.decision is ApprovalDecision.EXPIRED
    if timed_out or (decided is None and record.deadline <= wanted.decided_at):
        return DecideOutcome.EXPIRED
    return None
