"""The agent workflow: a model summarises the package, and the summary goes out once.

Per delivery, after the worker fetched the package over MCP:

1. ``archive``: the package document to S3, repeatable (:mod:`functions.workflows.archive`).
2. step ``model``: one Bedrock ``Converse`` call on the fenced prompt
   (:mod:`functions.workflows.agent_prompt`), no tools. The ledger records its result
   (:class:`ModelSummary`: the sanitized text, the stop reason, the tokens used and
   whether the model declined), and every later attempt reuses that record instead of
   calling the model again.
3. the alert, built from the *recorded* result only: published to the SNS topic
   (effect ``alert``) and, when ``alert_url`` is set, POSTed there (effect
   ``alert.http``). Both carry one idempotency key, ``<delivery_id>:alert``. The two
   channels are separate effects so that one that went out is never repeated because
   the other failed.

The delivery completes once ``run`` returns, that is after the alert's done record.

**Approval.** With ``approval=alert`` the alert waits for a person: between 2 and 3
the proposal (the alert as it will go out) is recorded and the delivery parks
``awaiting_approval`` (:mod:`functions.core.approval`); once approved, the resumed run
reuses the archive and the recorded model step and sends the alert; denied or expired
(``approval_timeout_minutes``), it sends nothing and ends ``failed``.

**Token budget.** Inside the step, before the call, the day's budget is reserved for
the prompt's estimate plus ``max_tokens`` (:meth:`TokenBudget.require`); after the
call the reservation is settled with the tokens the answer reports, once. A call the
service refused before the model ran (throttled, rejected) is settled at zero. A
reservation whose worker died before settling it stays counted at its estimate, and
so does one whose call failed in a way that may have run the model (a 5xx, a timeout,
a connection lost: :meth:`TokenBudget.keep`): the budget errs towards spending less.
A spent budget raises :class:`~functions.core.errors.BudgetExhausted` and the worker
lets the delivery wait for the next UTC day or a higher limit. A call larger than
the day's whole limit (``daily_token_budget``, or the limit an operator set) raises
:class:`~functions.core.errors.BudgetTooSmall` (``budget_too_small``): the delivery
fails at once, and the log line says the call's reservation, the limit and the setting.

**Errors.** The model adapter raises :class:`~functions.core.errors.NotApplied` when
the call certainly did not run (throttled), a ``TransientError`` when it may have
(5xx, timeout), a ``PermanentError`` (``model_rejected``) when it never will (bad
model id, no access, prompt too long). A declined or empty answer is no error: the
step records it as refused and the alert says the model declined.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from functions.core import metric_names, setting_defaults
from functions.core.approval import APPROVAL_ALERT, ApprovalPolicy, require_approval
from functions.core.effects import EffectMode, idempotency_key
from functions.core.errors import BudgetTooSmall, NotApplied, PermanentError, TransientError
from functions.core.observability import logger
from functions.core.settings_env import SettingsError, flag, integer, number, optional
from functions.workflows.agent_prompt import AgentPrompt, build_prompt, sanitize_model_output
from functions.workflows.alert_text import alert_block, alert_line
from functions.workflows.archive import Archive, archive_package

if TYPE_CHECKING:
    from functions.core.approval import ApprovalStore
    from functions.core.budget import Reservation, TokenBudget
    from functions.core.clock import Clock
    from functions.core.effects import EffectLedger
    from functions.core.models import WorkItem
    from functions.core.package import Package
    from functions.core.process import MetricsSink

MODEL_STEP: Final = "model"
ALERT_EFFECT: Final = "alert"  # the SNS publish
ALERT_HTTP_EFFECT: Final = "alert.http"  # the POST to alert_url
# The answer kept and shown; Converse's answer is bounded by max_tokens anyway.
MAX_SUMMARY_CHARS: Final = 4000
MAX_TITLE_CHARS: Final = 300
MAX_PACKAGE_ID_CHARS: Final = 512  # what the receiver admits
MAX_STOP_REASON_CHARS: Final = 64
SNS_SUBJECT_CHARS: Final = 100  # SNS refuses longer subjects
# Stop reasons of an answer withheld by a content filter or a guardrail.
REFUSAL_STOP_REASONS: Final = frozenset({"content_filtered", "guardrail_intervened"})
# A generous estimate (English runs nearer four characters a token): the reservation
# should rather hold too much than let concurrent calls overspend; settling corrects it.
CHARS_PER_TOKEN_ESTIMATE: Final = 3

# The workflow settings (``WORKFLOW_SETTINGS``) this workflow reads.
SETTING_MODEL_ID: Final = "model_id"
SETTING_MAX_TOKENS: Final = "max_tokens"
SETTING_TEMPERATURE: Final = "temperature"
SETTING_SYSTEM_PROMPT: Final = "system_prompt"
SETTING_DAILY_TOKEN_BUDGET: Final = "daily_token_budget"  # noqa: S105 (a setting's name)
SETTING_ALERT_URL: Final = "alert_url"
SETTING_ALERT_URL_SECRET_ARN: Final = "alert_url_secret_arn"  # noqa: S105 (a setting's name)
SETTING_ALERT_SIGNING_SECRET_ARN: Final = "alert_signing_secret_arn"  # noqa: S105 (a name)
SETTING_BEDROCK_ENDPOINT_URL: Final = "bedrock_endpoint_url"
# "true": the alert_url endpoint drops a second POST with the same Idempotency-Key, so
# an alert whose outcome is unknown is posted again with its key (mode keyed).
SETTING_ALERT_URL_DEDUPLICATES: Final = "alert_url_deduplicates"
# What waits for a person (``alert``; see ApprovalPolicy), and for how long at most.
SETTING_APPROVAL: Final = "approval"
SETTING_APPROVAL_TIMEOUT_MINUTES: Final = "approval_timeout_minutes"
DEFAULT_APPROVAL_TIMEOUT_MINUTES: Final = 1440.0
# Fractions are allowed (the local stack's tests wait seconds); a year at most, and
# never past the delivery's expiry (the gate caps the deadline there).
MIN_APPROVAL_TIMEOUT_MINUTES: Final = 0.05
MAX_APPROVAL_TIMEOUT_MINUTES: Final = 525_600.0
NO_APPROVAL: Final = ApprovalPolicy()
DEFAULT_MODEL_ID: Final = setting_defaults.DEFAULT_AGENT_MODEL_ID
DEFAULT_MAX_TOKENS: Final = 512
DEFAULT_TEMPERATURE: Final = 0.2
DEFAULT_DAILY_TOKEN_BUDGET: Final = 1_000_000
MAX_MAX_TOKENS: Final = 10_000
MAX_DAILY_TOKEN_BUDGET: Final = 10**12


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """The agent workflow's knobs, checked at cold start.

    Attributes:
        daily_token_budget: tokens all workers may spend per UTC day; 0 turns it off.
        system_prompt: the operator's extra instructions, appended to the fencing
            system prompt (trusted: it comes from the deployment, not a package).
        alert_url: where alerts are POSTed, for a URL that carries no credential.
        alert_url_secret_arn: the Secrets Manager secret whose value is that URL (for
            one that carries its credential, as chat webhooks do); not with alert_url.
        alert_signing_secret_arn: the secret (``whsec_...``) the POST is signed with
            (Standard Webhooks), or None for no signature.
        bedrock_endpoint_url: another Bedrock Runtime endpoint (the local emulator).
        alert_url_deduplicates: the ``alert_url`` endpoint drops a repeated
            ``Idempotency-Key``: an alert POST of unknown outcome is retried with its
            key instead of being left in doubt for an operator.
    """

    model_id: str = DEFAULT_MODEL_ID
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = DEFAULT_TEMPERATURE
    system_prompt: str | None = None
    daily_token_budget: int = DEFAULT_DAILY_TOKEN_BUDGET
    alert_url: str | None = None
    alert_url_secret_arn: str | None = None
    alert_signing_secret_arn: str | None = None
    bedrock_endpoint_url: str | None = None
    alert_url_deduplicates: bool = False
    approval: ApprovalPolicy = NO_APPROVAL
    approval_timeout_minutes: float = DEFAULT_APPROVAL_TIMEOUT_MINUTES

    @property
    def approval_timeout_seconds(self) -> int:
        return max(1, math.ceil(self.approval_timeout_minutes * 60))

    @property
    def has_alert_url(self) -> bool:
        """Whether alerts are POSTed (to a URL given plainly or in a secret)."""
        return self.alert_url is not None or self.alert_url_secret_arn is not None

    @classmethod
    def from_mapping(cls, settings: Mapping[str, str]) -> AgentSettings:
        """Read the workflow settings; a name this workflow does not know is an error.

        Raises:
            SettingsError: an unknown name, or a value out of range (naming the setting).
        """
        known = {field.name for field in dataclasses.fields(cls)}
        if unknown := sorted(set(settings) - known):
            raise SettingsError(f"workflow settings not known to the agent workflow: {unknown}")
        model_id = optional(settings, SETTING_MODEL_ID) or DEFAULT_MODEL_ID
        if any(char.isspace() for char in model_id):
            raise SettingsError(f"{SETTING_MODEL_ID} must not contain spaces")
        alert_url = optional(settings, SETTING_ALERT_URL)
        url_secret = optional(settings, SETTING_ALERT_URL_SECRET_ARN)
        signing_secret = optional(settings, SETTING_ALERT_SIGNING_SECRET_ARN)
        if alert_url is not None and url_secret is not None:
            raise SettingsError(
                f"{SETTING_ALERT_URL} and {SETTING_ALERT_URL_SECRET_ARN}: one or the other"
            )
        if signing_secret is not None and alert_url is None and url_secret is None:
            raise SettingsError(
                f"{SETTING_ALERT_SIGNING_SECRET_ARN} signs the alert POST: it needs "
                f"{SETTING_ALERT_URL} or {SETTING_ALERT_URL_SECRET_ARN}"
            )
        return cls(
            model_id=model_id,
            max_tokens=integer(
                settings, SETTING_MAX_TOKENS, default=DEFAULT_MAX_TOKENS, low=1, high=MAX_MAX_TOKENS
            ),
            temperature=number(
                settings, SETTING_TEMPERATURE, default=DEFAULT_TEMPERATURE, low=0.0, high=1.0
            ),
            system_prompt=optional(settings, SETTING_SYSTEM_PROMPT),
            daily_token_budget=integer(
                settings,
                SETTING_DAILY_TOKEN_BUDGET,
                default=DEFAULT_DAILY_TOKEN_BUDGET,
                low=0,
                high=MAX_DAILY_TOKEN_BUDGET,
            ),
            alert_url=alert_url,
            alert_url_secret_arn=url_secret,
            alert_signing_secret_arn=signing_secret,
            bedrock_endpoint_url=optional(settings, SETTING_BEDROCK_ENDPOINT_URL),
            alert_url_deduplicates=flag(settings, SETTING_ALERT_URL_DEDUPLICATES),
            approval=_approval_policy(settings),
            approval_timeout_minutes=number(
                settings,
                SETTING_APPROVAL_TIMEOUT_MINUTES,
                default=DEFAULT_APPROVAL_TIMEOUT_MINUTES,
                low=MIN_APPROVAL_TIMEOUT_MINUTES,
                high=MAX_APPROVAL_TIMEOUT_MINUTES,
            ),
        )


def _approval_policy(settings: Mapping[str, str]) -> ApprovalPolicy:
    try:
        policy = ApprovalPolicy.parse(optional(settings, SETTING_APPROVAL))
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    if policy.tools:
        # This workflow calls no tools: a tool named here would never wait for anyone.
        raise SettingsError(f"{SETTING_APPROVAL}: the agent workflow has no tools to approve")
    return policy


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """What one Converse call returned (the text as the model wrote it: untrusted)."""

    text: str
    stop_reason: str
    input_tokens: int
    output_tokens: int


class Model(Protocol):
    """Port: one Converse call (Bedrock Runtime in production)."""

    def converse(
        self, prompt: AgentPrompt, *, max_tokens: int, temperature: float, delivery_id: str
    ) -> ModelAnswer:
        """Ask the model; no tools are offered.

        Raises:
            NotApplied: the service refused the call before the model ran (throttled).
            TransientError: the call failed and may have run (5xx, timeout).
            PermanentError: ``model_rejected``: the request can never succeed.
        """
        ...


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """The model step's recorded result: what every attempt's alert is built from.

    Attributes:
        text: the answer, sanitized and capped (still untrusted: shown, never followed).
        refused: the model declined (a content filter or guardrail stopped it, or it
            answered nothing); the alert then says so instead of showing ``text``.
    """

    text: str
    stop_reason: str
    input_tokens: int
    output_tokens: int
    refused: bool

    @classmethod
    def of(cls, answer: ModelAnswer) -> ModelSummary:
        text = sanitize_model_output(answer.text, MAX_SUMMARY_CHARS)
        return cls(
            text=text,
            stop_reason=answer.stop_reason,
            input_tokens=answer.input_tokens,
            output_tokens=answer.output_tokens,
            refused=answer.stop_reason in REFUSAL_STOP_REASONS or not text,
        )

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: object) -> ModelSummary:
        """Raises ``PermanentError`` (``step_result_invalid``) for a record of another shape."""
        try:
            if not isinstance(record, Mapping):
                raise TypeError
            summary = cls(**record)
        except TypeError:
            raise PermanentError("step_result_invalid") from None
        types = (str, str, int, int, bool)
        values = dataclasses.astuple(summary)
        if not all(isinstance(v, t) for v, t in zip(values, types, strict=True)):
            raise PermanentError("step_result_invalid")
        return summary


@dataclass(frozen=True, slots=True)
class Alert:
    """The alert of one delivery, the same on every channel and every attempt.

    Fields hold what was recorded or received; what the alert shows of the outside
    texts (title, ``package_id``, summary, stop reason) goes through
    :mod:`functions.workflows.alert_text`: invisible characters removed, the title on
    one line, mentions, URLs and Markdown links made inert.
    """

    delivery_id: str
    event: str
    package_id: str
    title: str
    summary: ModelSummary
    archive_key: str

    @property
    def shown_title(self) -> str:
        """The title as the alert shows it: one line, defanged, capped."""
        return alert_line(self.title, MAX_TITLE_CHARS)

    @property
    def shown_package_id(self) -> str:
        # The receiver refuses invisible characters; a record from before it did is cleaned.
        return alert_line(self.package_id, MAX_PACKAGE_ID_CHARS)

    @property
    def shown_stop_reason(self) -> str:
        return alert_line(self.summary.stop_reason, MAX_STOP_REASON_CHARS)

    @property
    def body(self) -> str:
        """The summary (defanged), or the note that the model declined."""
        if self.summary.refused:
            return (
                "The model declined to summarise this package"
                f" (stop reason: {self.shown_stop_reason}). Read it in the archive."
            )
        text = alert_block(self.summary.text)
        if self.summary.stop_reason == "max_tokens":
            return text + "\n(The summary was cut at the token limit.)"
        return text

    def subject(self) -> str:
        """A one-line ASCII subject (SNS allows nothing else), at most 100 characters."""
        line = f"Package {self.shown_package_id}: {self.shown_title}"
        return "".join(char if " " <= char <= "~" else "?" for char in line)[:SNS_SUBJECT_CHARS]

    def text(self) -> str:
        """The message for people (an e-mail subscription, a chat hook)."""
        return (
            f"{self.shown_title}\n"
            f"Package {self.shown_package_id}, delivery {self.delivery_id}\n"
            f"Archived as {self.archive_key}\n\n{self.body}"
        )

    def payload(self) -> dict[str, object]:
        """The message for programs (the JSON the HTTP channel posts)."""
        return {
            "delivery_id": self.delivery_id,
            "event": self.event,
            "package_id": self.shown_package_id,
            "title": self.shown_title,
            "summary": self.body,
            "model_declined": self.summary.refused,
            "stop_reason": self.shown_stop_reason,
            "archive_key": self.archive_key,
        }


class AlertChannel(Protocol):
    """Port: one way an alert reaches people (SNS, an HTTP endpoint)."""

    @property
    def mode(self) -> EffectMode:
        """How the ledger settles an unknown outcome: ``keyed`` only when the far side
        drops a repeated idempotency key, else ``operator``."""
        ...

    def send(self, alert: Alert, *, idempotency_key: str) -> None:
        """Deliver ``alert`` once.

        Raises:
            NotApplied: it certainly did not go out (throttled, or never reached the
                service); the ledger then clears the intent and the worker retries.
            Rejected: refused for good; the ledger clears the intent, the delivery fails.
            TransientError: the outcome is unknown (a 5xx, a timeout after sending, a
                connection lost mid-request); a retry settles it by the channel's mode.
        """
        ...


class AgentWorkflow:
    """Archive, summarise once (a recorded step), alert once per channel."""

    def __init__(
        self,
        *,
        settings: AgentSettings,
        archive: Archive,
        model: Model,
        topic: AlertChannel | None,
        webhook: AlertChannel | None,
        budget: TokenBudget | None,
        clock: Clock,
        metrics: MetricsSink,
        approvals: ApprovalStore | None = None,
    ) -> None:
        """``topic`` and ``webhook`` may not both be None; ``budget`` None is no budget;
        ``approvals`` is needed when ``settings.approval`` names the alert."""
        channels = [(ALERT_EFFECT, topic), (ALERT_HTTP_EFFECT, webhook)]
        self._channels = [(name, channel) for name, channel in channels if channel is not None]
        if not self._channels:
            raise ValueError("the agent workflow needs an alert topic or an alert_url")
        self._settings = settings
        self._archive = archive
        self._model = model
        self._budget = budget
        self._clock = clock
        self._metrics = metrics
        self._approvals = approvals
        if settings.approval.alert and approvals is None:
            raise ValueError("an approval of the alert needs an approval store")

    def run(self, work: WorkItem, package: Package, effects: EffectLedger) -> None:
        key = archive_package(self._archive, work, package, effects)
        recorded = effects.step(MODEL_STEP, lambda: self._summarise(work, package).to_record())
        alert = Alert(
            delivery_id=work.delivery_id,
            event=work.event,
            package_id=package.package_id,
            title=package.title,
            summary=ModelSummary.from_record(recorded),
            archive_key=key,
        )
        if self._settings.approval.alert and self._approvals is not None:
            # Built from recorded results only, so the run resumed after the decision
            # sends exactly what the person approved. Parks the delivery until then.
            require_approval(
                self._approvals,
                delivery_id=work.delivery_id,
                name=APPROVAL_ALERT,
                proposal={**alert.payload(), "channels": [n for n, _ in self._channels]},
                now=self._clock.now(),
                timeout_seconds=self._settings.approval_timeout_seconds,
                expires_at=effects.expires_at,
            )
        # One key for the alert on every channel: a subscriber of both sees one alert.
        alert_key = idempotency_key(work.delivery_id, ALERT_EFFECT)
        for name, channel in self._channels:
            send = functools.partial(_send, channel, alert)
            effects.run(name, send, key=alert_key, mode=channel.mode)

    def channels(self) -> list[AlertChannel]:
        """The alert channels, in the order each alert goes out (the topic first)."""
        return [channel for _, channel in self._channels]

    def prompt(self, package: Package) -> AgentPrompt:
        """The fenced prompt, with the operator's extra instructions after the rules."""
        prompt = build_prompt(package)
        extra = self._settings.system_prompt
        if not extra:
            return prompt
        system = f"{prompt.system}\n\nThe operator adds these instructions:\n{extra}"
        return dataclasses.replace(prompt, system=system)

    def _summarise(self, work: WorkItem, package: Package) -> ModelSummary:
        """The model step's body: reserve, call, settle (runs again only if unrecorded)."""
        prompt = self.prompt(package)
        reservation = None
        if self._budget is not None:
            reservation = self._reserve(work, prompt, self._budget)
        self._metrics.count(metric_names.METRIC_MODEL_CALLS)
        try:
            answer = self._model.converse(
                prompt,
                max_tokens=self._settings.max_tokens,
                temperature=self._settings.temperature,
                delivery_id=work.delivery_id,
            )
        except (NotApplied, PermanentError):
            self._settle(reservation, 0)  # refused before the model ran: nothing used
            raise
        except Exception:
            # Any other failure may have run the model: counted at its estimate for good.
            self._settle(reservation, None)
            raise
        self._settle(reservation, answer.input_tokens + answer.output_tokens)
        summary = ModelSummary.of(answer)
        logger.info(
            "model answered",
            extra={
                "delivery_id": work.delivery_id,
                "stop_reason": summary.stop_reason,
                "refused": summary.refused,
                "input_tokens": summary.input_tokens,
                "output_tokens": summary.output_tokens,
            },
        )
        return summary

    def _reserve(self, work: WorkItem, prompt: AgentPrompt, budget: TokenBudget) -> Reservation:
        estimate = token_estimate(prompt) + self._settings.max_tokens
        try:
            return budget.require(estimate, self._clock.now())
        except BudgetTooSmall as exc:
            logger.error(
                "the model call needs more tokens than the whole daily token budget: raise"
                f" {SETTING_DAILY_TOKEN_BUDGET} (or the limit: budget set) or lower"
                f" {SETTING_MAX_TOKENS}, then requeue",
                extra={
                    "delivery_id": work.delivery_id,
                    "reservation_tokens": exc.tokens,
                    "daily_token_limit": exc.limit,
                    "setting": SETTING_DAILY_TOKEN_BUDGET,
                    "max_tokens": self._settings.max_tokens,
                },
            )
            raise

    def _settle(self, reservation: Reservation | None, used: int | None) -> None:
        """Settle at ``used`` tokens; None: the outcome is unknown, keep the estimate."""
        if reservation is None or self._budget is None:
            return
        try:
            if used is None:
                self._budget.keep(reservation)
            else:
                self._budget.settle(reservation, used)
        except TransientError:
            # The answer is paid for either way: a failed settlement must not fail the
            # step (which would call the model again). The reservation stays counted
            # at its estimate.
            logger.warning("token budget not settled; the reservation stays at its estimate")


def _send(channel: AlertChannel, alert: Alert, key: str) -> None:
    channel.send(alert, idempotency_key=key)


def token_estimate(prompt: AgentPrompt) -> int:
    """The prompt's tokens, estimated generously from its characters."""
    return math.ceil((len(prompt.system) + len(prompt.user)) / CHARS_PER_TOKEN_ESTIMATE)
