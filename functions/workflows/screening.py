"""Screening: the briefing goes through a Bedrock guardrail before any model reads it.

With the settings ``guardrail_id`` and ``guardrail_version``, the agent workflow asks
Bedrock's ``ApplyGuardrail`` (source ``INPUT``) about exactly the third-party text the
model will receive, before the model receives it: the package's line of the prompt
(title, briefing, attachments' names and media types, as the fence carries them:
:func:`~functions.workflows.agent_prompt.package_json`) before the first model step,
and each tool result's line (:func:`~functions.workflows.agent_prompt.fence_safe_json`
of what the fence carries) before the turn that carries it. Each verdict is a
recorded step, ``screen`` for the package and ``screen.tool.<digest>`` for a tool
result (:mod:`functions.core.steps`): every later attempt of the delivery reads it
instead of asking again. The call only reads, so its outcome
contract is the read-only one: an unknown outcome (a 5xx, a timeout, a worker killed
during the call) is simply asked again.

A briefing the guardrail blocks (``GUARDRAIL_INTERVENED``) is never processed
unseen: the delivery waits for a person (the approval ``screening``; for a tool result
``screening.tool.<digest>``, before the model reads it;
:mod:`functions.core.approval`), whether or not the ``approval`` setting names
anything. The proposal the person sees names the guardrail, its reason and what its
policies found (their kinds, never the matched text, never the briefing); the package
itself is in the archive. Approved, the delivery is processed as any other; denied or
expired, it ends ``failed`` (``approval_denied`` / ``approval_expired``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from functions.core.approval import require_approval
from functions.core.env_parsers import SettingsError, optional
from functions.core.errors import PermanentError
from functions.workflows.agent_prompt import package_json
from functions.workflows.alert_text import alert_line

if TYPE_CHECKING:
    from functions.core.clock import Clock
    from functions.core.package import Package
    from functions.core.ports.approvals import ApprovalStore
    from functions.core.ports.workflow import Ledger

SETTING_GUARDRAIL_ID: Final = "guardrail_id"
SETTING_GUARDRAIL_VERSION: Final = "guardrail_version"
SCREEN_STEP: Final = "screen"
APPROVAL_SCREENING: Final = "screening"  # the approval a blocked briefing waits for
# ApplyGuardrail's own patterns (botocore's bedrock-runtime model): an id or its ARN;
# a published version or the working draft.
GUARDRAIL_ID_PATTERN: Final = re.compile(
    r"[a-z0-9]+|arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail/[a-z0-9]+"
)
GUARDRAIL_VERSION_PATTERN: Final = re.compile(r"[1-9][0-9]{0,7}|DRAFT")
# What the record and the proposal keep of the guardrail's answer.
MAX_FINDINGS: Final = 20
MAX_FINDING_CHARS: Final = 200
MAX_REASON_CHARS: Final = 500


@dataclass(frozen=True, slots=True)
class GuardrailRef:
    """One guardrail version: the id (or ARN) and ``version`` ApplyGuardrail takes."""

    id: str
    version: str

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> GuardrailRef | None:
        """The guardrail the settings name, or None when they name none.

        Raises:
            SettingsError: one setting without the other, or a value ApplyGuardrail
                would refuse (naming the setting).
        """
        guardrail_id = optional(settings, SETTING_GUARDRAIL_ID)
        version = optional(settings, SETTING_GUARDRAIL_VERSION)
        if guardrail_id is None and version is None:
            return None
        if guardrail_id is None or version is None:
            raise SettingsError(
                f"{SETTING_GUARDRAIL_ID} and {SETTING_GUARDRAIL_VERSION}: both or neither"
            )
        if not GUARDRAIL_ID_PATTERN.fullmatch(guardrail_id):
            raise SettingsError(
                f"{SETTING_GUARDRAIL_ID}: a guardrail id ([a-z0-9]) or its ARN"
                " (arn:aws:bedrock:<region>:<account>:guardrail/<id>)"
            )
        if not GUARDRAIL_VERSION_PATTERN.fullmatch(version):
            raise SettingsError(f"{SETTING_GUARDRAIL_VERSION}: a version number or DRAFT")
        return cls(guardrail_id, version)

    @property
    def shown(self) -> str:
        return f"{self.id} version {self.version}"


@dataclass(frozen=True, slots=True)
class Screening:
    """The guardrail's verdict on one briefing, as the step ``screen`` records it.

    Attributes:
        intervened: ``GUARDRAIL_INTERVENED``: the briefing waits for a person.
        reason: the guardrail's ``actionReason`` (one line, capped), or empty.
        findings: what its policies found, one line each (``content filter
            PROMPT_ATTACK (HIGH): BLOCKED``): kinds and names, never matched text.
        guardrail: the guardrail and version that screened it.
    """

    intervened: bool
    reason: str
    findings: tuple[str, ...]
    guardrail: str

    def to_record(self) -> dict[str, Any]:
        return {
            "intervened": self.intervened,
            "reason": self.reason,
            "findings": list(self.findings),
            "guardrail": self.guardrail,
        }

    @classmethod
    def from_record(cls, record: object) -> Screening:
        """Raises ``PermanentError`` (``step_result_invalid``) for a record of another shape."""
        if not isinstance(record, Mapping):
            raise PermanentError("step_result_invalid")
        intervened, reason = record.get("intervened"), record.get("reason")
        findings, guardrail = record.get("findings"), record.get("guardrail")
        if not (
            isinstance(intervened, bool)
            and isinstance(reason, str)
            and isinstance(guardrail, str)
            and isinstance(findings, list)
            and all(isinstance(f, str) for f in findings)
        ):
            raise PermanentError("step_result_invalid")
        return cls(intervened, reason, tuple(findings), guardrail)

    def summary(self) -> str:
        """The reason and the findings on one line (what a person deciding reads)."""
        reason = self.reason.rstrip(" .;")
        parts = [reason] if reason else []
        parts += list(self.findings) or ["no finding named"]
        return "; ".join(parts)


class Guardrail(Protocol):
    """Port: one ApplyGuardrail call on a text (Bedrock Runtime in production)."""

    def screen(self, text: str) -> Screening:
        """Ask the guardrail about ``text`` as model input.

        Raises:
            NotApplied: throttled, or never connected; the worker retries.
            PermanentError: ``guardrail_rejected``: no such guardrail or version, no
                access, a request it refuses; the delivery fails.
            TransientError: the outcome is unknown; asking again is safe.
        """
        ...


class PaidGuardrail(Protocol):
    """Port: a guardrail call paid for by a delivery (budgeted and counted:
    :class:`~functions.workflows.metered_guardrail.MeteredGuardrail`)."""

    def screen(self, text: str, *, delivery_id: str, expires_at: int) -> Screening:
        """As :meth:`Guardrail.screen`, charged to ``delivery_id``."""
        ...


def screened_text(package: Package) -> str:
    """What the guardrail reads of a package: its line of the prompt, exactly as the model
    receives it (capped and escaped as the fence carries it)."""
    return package_json(package)


def screen_briefing(effects: Ledger, guardrail: PaidGuardrail, package: Package) -> Screening:
    """The recorded verdict on ``package`` (the guardrail is asked while none is recorded)."""
    return screen_text(effects, guardrail, SCREEN_STEP, screened_text(package))


def screen_text(effects: Ledger, guardrail: PaidGuardrail, step: str, text: str) -> Screening:
    """The recorded verdict of step ``step`` on ``text`` (asked while none is recorded;
    each call counted in the delivery's spend and the day's budget)."""

    def ask() -> dict[str, Any]:
        screening = guardrail.screen(
            text, delivery_id=effects.delivery_id, expires_at=effects.expires_at
        )
        return screening.to_record()

    return Screening.from_record(effects.step(step, ask))


def finding_line(text: str) -> str:
    """One finding or reason as kept: one line, defanged, capped."""
    return alert_line(text, MAX_FINDING_CHARS)


def held_proposal(
    screening: Screening, *, delivery_id: str, package_id: str, archive_key: str
) -> dict[str, Any]:
    """What the approval ``screening`` shows: the guardrail's verdict, never the briefing
    (the person reads the package in the archive)."""
    return {
        "delivery_id": delivery_id,
        "package_id": alert_line(package_id, 512),
        "title": f"Briefing held: guardrail {screening.guardrail} intervened",
        "summary": screening.summary(),
        "guardrail": screening.guardrail,
        "reason": screening.reason,
        "findings": list(screening.findings),
        "archive_key": archive_key,
    }


@dataclass(frozen=True, slots=True)
class BriefingScreen:
    """The guardrail (its calls paid for), and the gate where a text it blocked waits
    for a person."""

    guardrail: PaidGuardrail
    approvals: ApprovalStore
    clock: Clock
    timeout_seconds: int

    def clear(
        self, delivery_id: str, package: Package, *, archive_key: str, effects: Ledger
    ) -> Screening:
        """The recorded verdict, once the briefing may go on: let through, or approved.

        Raises:
            AwaitingApproval: blocked and undecided: the delivery parks.
            ApprovalRefused: blocked and denied, or its time ran out.
            Whatever :meth:`Guardrail.screen` raises while no verdict is recorded.
        """
        screening = screen_briefing(effects, self.guardrail, package)
        if screening.intervened:
            proposal = held_proposal(
                screening,
                delivery_id=delivery_id,
                package_id=package.package_id,
                archive_key=archive_key,
            )
            self._hold(delivery_id, APPROVAL_SCREENING, proposal, package.digest(), effects)
        return screening

    def clear_tool_result(
        self,
        delivery_id: str,
        name: str,
        tool: str,
        text: str,
        *,
        package_id: str,
        package_digest: str,
        archive_key: str,
        effects: Ledger,
    ) -> Screening:
        """The recorded verdict on one tool result (``text``: its line as the model will
        read it; ``name``: the tool use's record name), once it may reach the model.

        Raises:
            AwaitingApproval, ApprovalRefused: as :meth:`clear`, for the approval
                ``screening.<name>``.
        """
        screening = screen_text(effects, self.guardrail, f"{SCREEN_STEP}.{name}", text)
        if screening.intervened:
            proposal = held_proposal(
                screening, delivery_id=delivery_id, package_id=package_id, archive_key=archive_key
            )
            proposal["title"] = (
                f"Tool result held: {alert_line(tool, 64)}: guardrail {screening.guardrail}"
                " intervened"
            )
            proposal["tool_use"] = name
            self._hold(
                delivery_id, f"{APPROVAL_SCREENING}.{name}", proposal, package_digest, effects
            )
        return screening

    def _hold(
        self,
        delivery_id: str,
        name: str,
        proposal: dict[str, Any],
        package_digest: str,
        effects: Ledger,
    ) -> None:
        require_approval(
            self.approvals,
            delivery_id=delivery_id,
            name=name,
            proposal=proposal,
            package_digest=package_digest,
            now=self.clock.now(),
            timeout_seconds=self.timeout_seconds,
            expires_at=effects.expires_at,
        )
