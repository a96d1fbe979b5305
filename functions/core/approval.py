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

**Exactly once, also when an answer is lost.** Each decision carries a fresh token,
written with it. A decision whose write committed but whose answer was lost (the SDK
retries it and meets its own condition; or it raises after committing) is recognised
by its token on the record and reported as applied, never as a conflict; a second
decision of the same kind changes nothing and says so; the other kind is refused.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from functions.core.errors import PermanentError, ProcessingError, TransientError
from functions.core.ports.approvals import (
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

    def __init__(self, name: str, deadline: int) -> None:
        super().__init__()
        self.name = name
        self.deadline = deadline


class ApprovalRefused(PermanentError):
    """Denied by a person or by the timeout; ``code`` says which."""

    code = "approval_denied"


def require_approval(
    store: ApprovalStore,
    *,
    delivery_id: str,
    name: str,
    proposal: Mapping[str, Any],
    now: int,
    timeout_seconds: int,
    expires_at: int,
) -> ApprovalRecord:
    """The approved record of ``name``; asks for it first when it was never asked for.

    Call it only with a proposal built from recorded results: the record keeps the
    first one, and the run resumed after approval must do what was approved.

    Raises:
        AwaitingApproval: undecided (asked for now, or earlier): park the delivery.
        ApprovalRefused: denied, or expired (``approval_expired``).
    """
    record = store.get(delivery_id, name)
    if record is None:
        deadline = now + timeout_seconds
        if expires_at:
            # A decision after the item's expiry would find nothing to resume, and TTL
            # may delete the item soon after it: the timeout comes first, with time for
            # a reconciler run to deny it visibly.
            deadline = min(deadline, expires_at - EXPIRY_MARGIN_SECONDS)
        asked = ApprovalRecord(delivery_id, name, dict(proposal), now, deadline)
        if len(asked.proposal_json().encode()) > MAX_PROPOSAL_BYTES:
            raise PermanentError("approval_proposal_too_large")
        failure: TransientError | None = None
        try:
            written = store.request(asked, expires_at=expires_at)
        except TransientError as exc:
            written, failure = False, exc  # committed or not: the read below tells
        # A put whose answer was lost finds its own record (the SDK's retry meets its
        # condition, or it raised after committing): the same proposal, built from
        # recorded results, so the record read here is as good as ours.
        record = asked if written else store.get(delivery_id, name)
        if record is None:
            raise failure or TransientError("approval_unreadable")
    if record.decided is None:
        raise AwaitingApproval(name, record.deadline)
    if record.decided.decision is not ApprovalDecision.APPROVED:
        raise ApprovalRefused(record.decided.decision.error_code)
    return record


class DecideOutcome(StrEnum):
    APPLIED = "applied"  # this call's decision is recorded
    UNCHANGED = "unchanged"  # the same decision was recorded before: nothing changed
    REFUSED = "refused"  # the other decision was recorded before
    NOT_WAITING = "not_waiting"  # no such approval, or its delivery is not parked for it


@dataclass(frozen=True, slots=True)
class DecideResult:
    outcome: DecideOutcome
    record: ApprovalRecord | None  # the record as it stands after the call


def new_decision_token() -> str:
    return secrets.token_hex(8)


def decide(store: ApprovalDecisions, delivery_id: str, name: str, wanted: Decision) -> DecideResult:
    """Record ``wanted`` exactly once (see the module docstring).

    Raises:
        TransientError: the store failed and the record does not show the decision.
    """
    failure: TransientError | None = None
    try:
        if store.decide(delivery_id, name, wanted):
            return DecideResult(DecideOutcome.APPLIED, store.get(delivery_id, name))
    except TransientError as exc:
        failure = exc  # committed or not: the record tells
    record = store.get(delivery_id, name)
    decided = None if record is None else record.decided
    if decided is None:
        if failure is not None:
            raise failure
        return DecideResult(DecideOutcome.NOT_WAITING, record)
    if decided.token == wanted.token:
        return DecideResult(DecideOutcome.APPLIED, record)  # ours, its answer lost
    # Denied by a person or by the timeout: a deny meeting either one changes nothing.
    refusals = {ApprovalDecision.DENIED, ApprovalDecision.EXPIRED}
    same = decided.decision is wanted.decision or {decided.decision, wanted.decision} <= refusals
    if same:
        return DecideResult(DecideOutcome.UNCHANGED, record)
    return DecideResult(DecideOutcome.REFUSED, record)
