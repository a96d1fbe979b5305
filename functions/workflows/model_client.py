"""The model client behind ``effects.model``: one Converse call, budgeted and counted.

:class:`ModelClient` is the shipped :class:`~functions.core.ports.model.ModelCaller`.
Per call (that is, per run of a model step not yet recorded):

0. **cap**: with ``delivery_token_cap``, a call whose estimate would take the
   delivery past it fails the delivery ``delivery_token_cap`` before anything else
   (:mod:`functions.core.token_cap`);
1. **reserve** the day's token budget for the prompt's estimate plus ``max_tokens``
   (:meth:`~functions.core.budget.TokenBudget.require`). A spent day raises
   :class:`~functions.core.errors.BudgetExhausted` (the delivery waits for the next
   UTC day or a higher limit); a call larger than the day's whole limit raises
   :class:`~functions.core.errors.BudgetTooSmall` (``budget_too_small``, at once);
2. **count** the call in the delivery's spend record before sending it
   (:mod:`functions.core.spend`), so a worker killed during the call has counted it;
3. **call** the model (the :class:`Model` port: Bedrock Runtime ``Converse`` with one
   HTTP attempt, :mod:`functions.workflows.adapters.bedrock_converse`);
4. **settle** by the answer's outcome (the outcome contract):

   ============================  ==================  ================  ==============
   the call                      raises              token budget      spend record
   ============================  ==================  ================  ==============
   answered                      (the reply)         settled at use    tokens added
   throttled, never connected    ``NotApplied``      settled at 0      not counted
   rejected for good             ``PermanentError``  settled at 0      not counted
   5xx, timeout, lost, garbled   ``TransientError``  kept at estimate  counted, unknown
   worker killed during it       (nothing)           kept at estimate  counted, unknown
   ============================  ==================  ================  ==============

   ``NotApplied`` and ``TransientError`` are retried by the worker's back-off; the
   step was not recorded, so the retry reserves and calls anew.

The answer's text is untrusted: the reply keeps it sanitized
(:func:`~functions.workflows.agent_prompt.sanitize_model_output`) and capped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from functions.core import metric_names
from functions.core.env_parsers import SettingsError, integer, number, optional
from functions.core.errors import BudgetTooSmall, NotApplied, PermanentError, TransientError
from functions.core.model_step import ModelCall, ModelReply, ToolUse
from functions.core.observability import logger
from functions.core.spend import new_call_id
from functions.core.token_cap import (
    MAX_DELIVERY_TOKEN_CAP,
    SETTING_DELIVERY_TOKEN_CAP,
    require_within_cap,
)
from functions.workflows.agent_prompt import AgentPrompt, sanitize_model_output
from functions.workflows.paid_calls import PaidCallBooks

if TYPE_CHECKING:
    from collections.abc import Callable

    from functions.core.budget import Reservation, TokenBudget
    from functions.core.clock import Clock
    from functions.core.ports.metrics import MetricsSink
    from functions.core.ports.spend import SpendStore

# The workflow settings (``WORKFLOW_SETTINGS``) the model client reads, for any workflow.
SETTING_MODEL_ID: Final = "model_id"
SETTING_MAX_TOKENS: Final = "max_tokens"
SETTING_TEMPERATURE: Final = "temperature"
SETTING_DAILY_TOKEN_BUDGET: Final = "daily_token_budget"  # noqa: S105 (a setting's name)
SETTING_BEDROCK_ENDPOINT_URL: Final = "bedrock_endpoint_url"
# The agent workflow's model; infra grants InvokeModel on it.
DEFAULT_MODEL_ID: Final = "amazon.nova-micro-v1:0"
DEFAULT_MAX_TOKENS: Final = 512
DEFAULT_TEMPERATURE: Final = 0.2
DEFAULT_DAILY_TOKEN_BUDGET: Final = 1_000_000
MAX_MAX_TOKENS: Final = 10_000
MAX_DAILY_TOKEN_BUDGET: Final = 10**12
# The answer kept and shown; Converse's answer is bounded by max_tokens anyway.
MAX_REPLY_CHARS: Final = 4000
# Stop reasons of an answer withheld by a content filter or a guardrail.
REFUSAL_STOP_REASONS: Final = frozenset({"content_filtered", "guardrail_intervened"})
# A generous estimate (English runs nearer four characters a token): the reservation
# should rather hold too much than let concurrent calls overspend; settling corrects it.
CHARS_PER_TOKEN_ESTIMATE: Final = 3


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """The model settings any workflow may set (the agent's names and defaults).

    Attributes:
        daily_token_budget: tokens all workers may spend per UTC day; 0 turns it off.
        bedrock_endpoint_url: another Bedrock Runtime endpoint (the local emulator).
        delivery_token_cap: the most tokens one delivery's paid calls may use
            (:mod:`functions.core.token_cap`); 0: no cap.
    """

    model_id: str = DEFAULT_MODEL_ID
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = DEFAULT_TEMPERATURE
    daily_token_budget: int = DEFAULT_DAILY_TOKEN_BUDGET
    bedrock_endpoint_url: str | None = None
    delivery_token_cap: int = 0

    @classmethod
    def from_mapping(cls, settings: Mapping[str, str]) -> ModelSettings:
        """Read the model settings; names the model does not read are left to the workflow.

        Raises:
            SettingsError: a value out of range (naming the setting).
        """
        model_id = optional(settings, SETTING_MODEL_ID) or DEFAULT_MODEL_ID
        if any(char.isspace() for char in model_id):
            raise SettingsError(f"{SETTING_MODEL_ID} must not contain spaces")
        return cls(
            model_id=model_id,
            max_tokens=integer(
                settings, SETTING_MAX_TOKENS, default=DEFAULT_MAX_TOKENS, low=1, high=MAX_MAX_TOKENS
            ),
            temperature=number(
                settings, SETTING_TEMPERATURE, default=DEFAULT_TEMPERATURE, low=0.0, high=1.0
            ),
            daily_token_budget=integer(
                settings,
                SETTING_DAILY_TOKEN_BUDGET,
                default=DEFAULT_DAILY_TOKEN_BUDGET,
                low=0,
                high=MAX_DAILY_TOKEN_BUDGET,
            ),
            bedrock_endpoint_url=optional(settings, SETTING_BEDROCK_ENDPOINT_URL),
            delivery_token_cap=integer(
                settings, SETTING_DELIVERY_TOKEN_CAP, default=0, low=0, high=MAX_DELIVERY_TOKEN_CAP
            ),
        )


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """What one Converse call returned (the text as the model wrote it: untrusted)."""

    text: str
    stop_reason: str
    input_tokens: int
    output_tokens: int
    tool_uses: tuple[ToolUse, ...] = ()


class Model(Protocol):
    """Port: one Converse call (Bedrock Runtime in production)."""

    def converse(
        self, prompt: AgentPrompt, *, max_tokens: int, temperature: float, delivery_id: str
    ) -> ModelAnswer:
        """Ask the model; tools only when ``prompt.tool_config`` offers them.

        Raises:
            NotApplied: the service refused the call before the model ran (throttled).
            TransientError: the call failed and may have run (5xx, timeout).
            PermanentError: ``model_rejected``: the request can never succeed.
        """
        ...


def reply_of(answer: ModelAnswer, *, max_chars: int = MAX_REPLY_CHARS) -> ModelReply:
    """The reply kept for ``answer``: its text sanitized and capped, a refusal marked."""
    text = sanitize_model_output(answer.text, max_chars)
    return ModelReply(
        text=text,
        stop_reason=answer.stop_reason,
        input_tokens=answer.input_tokens,
        output_tokens=answer.output_tokens,
        refused=answer.stop_reason in REFUSAL_STOP_REASONS or not (text or answer.tool_uses),
        tool_uses=answer.tool_uses,
    )


def token_estimate(prompt: AgentPrompt) -> int:
    """The prompt's tokens, estimated generously from its characters (and its later
    turns and tools, as JSON)."""
    chars = len(prompt.system) + len(prompt.user)
    if prompt.turns or prompt.tool_config:
        chars += len(json.dumps([prompt.turns, prompt.tool_config], ensure_ascii=False))
    return math.ceil(chars / CHARS_PER_TOKEN_ESTIMATE)


class ModelClient:
    """Budgeted, counted Converse calls: the :class:`ModelCaller` that ``effects.model`` uses.

    One instance serves every delivery of a warm worker (build it in the workflow's
    factory: ``functions.workflows.wiring.model_client``).
    """

    def __init__(
        self,
        *,
        model: Model,
        clock: Clock,
        metrics: MetricsSink,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = DEFAULT_TEMPERATURE,
        budget: TokenBudget | None = None,
        spend: SpendStore | None = None,
        max_reply_chars: int = MAX_REPLY_CHARS,
        new_call_id: Callable[[], str] = new_call_id,
        token_cap: int = 0,
    ) -> None:
        """``budget`` None: no token budget; ``spend`` None: no spend record (and so no
        ``token_cap``, the most tokens one delivery may use; 0: none)."""
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._model = model
        self._clock = clock
        self._metrics = metrics
        self._budget = budget
        self._spend = spend
        self._books = PaidCallBooks(budget=budget, spend=spend, subject="model")
        self._token_cap = token_cap
        self._max_reply_chars = max_reply_chars
        self._new_call_id = new_call_id

    def answer(self, prompt: AgentPrompt, call: ModelCall) -> ModelReply:
        """Reserve, count, call, settle (see the module's table for each outcome)."""
        estimate = token_estimate(prompt) + self.max_tokens
        require_within_cap(
            self._spend,
            delivery_id=call.delivery_id,
            tokens=estimate,
            cap=self._token_cap,
            call="model call",
        )
        reservation = None
        if self._budget is not None:
            reservation = self._reserve(call, estimate, self._budget)
        call_id = self._new_call_id()
        if self._spend is not None:
            try:
                self._spend.sent(call.delivery_id, call_id, expires_at=call.expires_at)
            except TransientError:
                # Nothing is sent uncounted. The count may have committed (its answer
                # lost): withdraw it, so the record never shows a call never sent.
                self._books.settle(reservation, 0)
                self._books.record(lambda spend: spend.not_run(call.delivery_id, call_id))
                raise
        self._metrics.count(metric_names.METRIC_MODEL_CALLS)
        try:
            answer = self._model.converse(
                prompt,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                delivery_id=call.delivery_id,
            )
        except (NotApplied, PermanentError):
            self._books.settle(reservation, 0)  # refused before the model ran: nothing used
            self._books.record(lambda spend: spend.not_run(call.delivery_id, call_id))
            raise
        except Exception:
            # Any other failure may have run the model: counted at its estimate for good.
            self._books.settle(reservation, None)
            raise
        self._books.settle(reservation, answer.input_tokens + answer.output_tokens)
        self._books.record(
            lambda spend: spend.answered(
                call.delivery_id,
                call_id,
                input_tokens=answer.input_tokens,
                output_tokens=answer.output_tokens,
            )
        )
        reply = reply_of(answer, max_chars=self._max_reply_chars)
        logger.info(
            "model answered",
            extra={
                "delivery_id": call.delivery_id,
                "step": call.step,
                "stop_reason": reply.stop_reason,
                "refused": reply.refused,
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
            },
        )
        return reply

    def _reserve(self, call: ModelCall, estimate: int, budget: TokenBudget) -> Reservation:
        try:
            return budget.require(estimate, self._clock.now())
        except BudgetTooSmall as exc:
            logger.error(
                "the model call needs more tokens than the whole daily token budget: raise"
                f" {SETTING_DAILY_TOKEN_BUDGET} (or the limit: budget set) or lower"
                f" {SETTING_MAX_TOKENS}, then requeue",
                extra={
                    "delivery_id": call.delivery_id,
                    "reservation_tokens": exc.tokens,
                    "daily_token_limit": exc.limit,
                    "setting": SETTING_DAILY_TOKEN_BUDGET,
                    "max_tokens": self.max_tokens,
                },
            )
            raise
