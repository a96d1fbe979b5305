"""Amazon Bedrock Runtime's ``Converse`` and ``ApplyGuardrail`` on loopback, for the local
stack and tests.

moto has no working Bedrock Runtime, so this serves the wire API that boto3's
``bedrock-runtime`` client speaks (rest-json, botocore's service model):
``POST /model/{modelId}/converse`` and
``POST /guardrail/{guardrailIdentifier}/version/{guardrailVersion}/apply`` with a JSON
body, a JSON ``ConverseResponse`` / ``ApplyGuardrailResponse`` back, and errors the way
AWS sends them: the HTTP status of the error shape, an ``x-amzn-ErrorType`` header and
a ``{"message": ...}`` body. Point a client at it with ``endpoint_url``; any
credentials do (requests are not verified).

The answer is deterministic: ``Summary of <title>: <first words> [<digest>]``.
The title and the words come from the package JSON that
:mod:`functions.workflows.agent_prompt` fences into the last user message (any
JSON object line with string ``title``/``briefing`` fields); other input is
summarised as "the request" with the first words of its last user text. The
digest hashes model id, system prompt and messages. Tokens are counted as
characters divided by four, rounded up (the input's text blocks, and the tool
definitions and ``toolUse``/``toolResult`` blocks as JSON); an answer longer than ``maxTokens`` is
cut and ends with ``stopReason`` ``max_tokens``.

What a test can make it do:

* an unknown model id, or a request AWS would refuse (no messages, wrong roles,
  temperature outside [0, 1], bad ``requestMetadata``, input over the context
  window) -> ``ValidationException`` (400);
* ``fail_next(n, error)`` and a seeded ``failure_rate`` -> any error of the
  ``Converse`` operation (:class:`ConverseError`);
* ``refuse_next(n)`` or :data:`REFUSE_MARKER` anywhere in the input -> an empty
  answer with ``stopReason`` ``content_filtered``;
* ``latency_seconds`` added to every call;
* ``use_script(script)`` -> a :class:`~local.model_script.ModelScript` (a file's, see
  :func:`~local.model_script.load_model_script`): per delivery, the turns' text, tool
  uses (fresh ``toolUseId`` each call; asked only in a conversation that offers
  tools) and token usage, then the summary follows; ``script_tools(turns)`` is the
  same for tool turns alike for every delivery;
* ``watch_tool_uses(callback)`` -> told of each tool use it answers (the local stack's
  kill points find a tool's records by it).

``ApplyGuardrail`` knows the guardrails ``guardrail_ids`` names (by id or ARN; any
version number or ``DRAFT``): another is a ``ResourceNotFoundException``, a malformed
id, version or body a ``ValidationException``. It lets every text through
(``action`` ``NONE``) but one with :data:`GUARDRAIL_MARKER` in it, or any while
``intervene_next(n)`` lasts: those get ``GUARDRAIL_INTERVENED``, the blocked message as
output, a ``PROMPT_ATTACK`` content filter (``HIGH``, ``BLOCKED``) and, for the
marker, a custom word whose ``match`` quotes it (as a word filter quotes what it
matched). ``fail_guardrail_next(n, error)`` answers the next calls with an error.
Calls are counted (``guardrail_texts()``: the texts screened, in order).

Every ``Converse`` call is counted per delivery id (the ``requestMetadata`` key
:data:`DELIVERY_ID_METADATA_KEY`), failed ones too, so tests can see retries:
``GET /_emulator/calls`` returns ``{delivery_id: count}``.

Run it alone with ``python -m local.bedrock_emulator --port 8767 [--model-script FILE]``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import math
import random
import re
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler
from typing import Any, Final

from local.loopback_http import LoopbackHTTPServer
from local.model_script import ModelScript, ModelScriptError, ScriptedTurn, load_model_script

DELIVERY_ID_METADATA_KEY: Final = "delivery_id"
REFUSE_MARKER: Final = "[[bedrock-emulator:refuse]]"
GUARDRAIL_MARKER: Final = "[[bedrock-emulator:guardrail]]"
DEMO_GUARDRAIL_ID: Final = "relaylinkdemo"
KNOWN_GUARDRAIL_IDS: Final = frozenset({DEMO_GUARDRAIL_ID})
GUARDRAIL_BLOCKED_MESSAGE: Final = "Sorry, the model cannot answer this question."
# botocore's patterns for ApplyGuardrail's URI labels.
_GUARDRAIL_ID: Final = re.compile(
    r"(?P<id>[a-z0-9]+)|arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail/(?P<arn_id>[a-z0-9]+)"
)
_GUARDRAIL_VERSION: Final = re.compile(r"[1-9][0-9]{0,7}|DRAFT")
_GUARDRAIL_PATH: Final = re.compile(r"/guardrail/(?P<id>[^/]+)/version/(?P<version>[^/]+)/apply")
_CHARS_PER_TEXT_UNIT: Final = 1000
CALLS_PATH: Final = "/_emulator/calls"
DEFAULT_MODEL_ID: Final = "amazon.nova-micro-v1:0"
KNOWN_MODEL_IDS: Final = frozenset(
    {
        DEFAULT_MODEL_ID,
        "amazon.nova-lite-v1:0",
        "anthropic.claude-3-haiku-20240307-v1:0",
        "anthropic.claude-3-5-haiku-20241022-v1:0",
        "us.anthropic.claude-3-5-haiku-20241022-v1:0",
    }
)
DEFAULT_CONTEXT_TOKENS: Final = 200_000
SUMMARY_WORDS: Final = 30
_MAX_BODY: Final = 16 * 1024 * 1024
_MAX_METADATA_ENTRIES: Final = 16
# botocore does not check these patterns client-side; Bedrock does.
_METADATA_KEY: Final = re.compile(r"[a-zA-Z0-9\s:_@$#=/+,\-.]{1,256}")
_METADATA_VALUE: Final = re.compile(r"[a-zA-Z0-9\s:_@$#=/+,\-.]{0,256}")
_CONVERSE_PATH: Final = re.compile(r"/model/(?P<model>[^/]+)/converse")
# AWS appends a namespace to the type; botocore keeps what precedes the colon.
_ERROR_TYPE_SUFFIX: Final = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
_STOP_DEADLINE_SECONDS: Final = 10.0
# How often serve_forever looks for a stop request: a test stopping its own
# emulator should not wait the default half second.
_POLL_SECONDS: Final = 0.05
# Told (delivery id, tool name, toolUseId) of each tool use answered.
ToolUseWatcher = Callable[[str, str, str], None]


class ConverseError(StrEnum):
    """The errors botocore's model lists for ``Converse`` and ``ApplyGuardrail`` (all of
    its but ``ModelTimeout``, ``ModelNotReady``, ``ModelError``; ``ServiceQuotaExceeded``
    only); the value is the AWS code."""

    ACCESS_DENIED = "AccessDeniedException"
    THROTTLING = "ThrottlingException"
    RESOURCE_NOT_FOUND = "ResourceNotFoundException"
    MODEL_TIMEOUT = "ModelTimeoutException"
    INTERNAL_SERVER = "InternalServerException"
    SERVICE_UNAVAILABLE = "ServiceUnavailableException"
    VALIDATION = "ValidationException"
    MODEL_NOT_READY = "ModelNotReadyException"
    MODEL_ERROR = "ModelErrorException"
    SERVICE_QUOTA_EXCEEDED = "ServiceQuotaExceededException"

    @property
    def status(self) -> int:
        """The HTTP status botocore's model gives the error shape."""
        return _ERROR_STATUS[self]


_ERROR_STATUS: Final[Mapping[ConverseError, int]] = {
    ConverseError.ACCESS_DENIED: 403,
    ConverseError.THROTTLING: 429,
    ConverseError.RESOURCE_NOT_FOUND: 404,
    ConverseError.MODEL_TIMEOUT: 408,
    ConverseError.INTERNAL_SERVER: 500,
    ConverseError.SERVICE_UNAVAILABLE: 503,
    ConverseError.VALIDATION: 400,
    ConverseError.MODEL_NOT_READY: 429,
    ConverseError.MODEL_ERROR: 424,
    ConverseError.SERVICE_QUOTA_EXCEEDED: 400,
}

_ERROR_MESSAGE: Final[Mapping[ConverseError, str]] = {
    ConverseError.ACCESS_DENIED: "You don't have access to the model with the specified model ID.",
    ConverseError.THROTTLING: "Too many requests, please wait before trying again.",
    ConverseError.RESOURCE_NOT_FOUND: "The requested resource could not be found.",
    ConverseError.MODEL_TIMEOUT: "Model has timed out in processing the request.",
    ConverseError.INTERNAL_SERVER: "The server encountered an internal error.",
    ConverseError.SERVICE_UNAVAILABLE: "Bedrock is unable to process your request.",
    ConverseError.VALIDATION: "The request is not valid.",
    ConverseError.MODEL_NOT_READY: "Model is not ready for inference. Wait and try again.",
    ConverseError.MODEL_ERROR: "The model encountered an error processing the request.",
    ConverseError.SERVICE_QUOTA_EXCEEDED: "Your request exceeds the service quota.",
}


@dataclass(frozen=True, slots=True)
class Reply:
    """One HTTP answer: status, JSON payload and the extra headers it needs."""

    status: int
    payload: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def error(cls, error: ConverseError, message: str | None = None) -> Reply:
        """An error as AWS sends it (status, ``x-amzn-ErrorType``, ``{"message"}``)."""
        return cls(
            status=error.status,
            payload={"message": message or _ERROR_MESSAGE[error]},
            headers={"x-amzn-ErrorType": error.value + _ERROR_TYPE_SUFFIX},
        )


class _Invalid(Exception):
    """A request Bedrock would refuse with ``ValidationException``."""


class BedrockEmulator:
    """The emulator's behaviour and counters, without HTTP; thread-safe.

    Args:
        model_ids: the model ids that exist; any other is a ``ValidationException``.
        latency_seconds: added to every ``Converse`` call.
        failure_rate: the share of calls answered with ``failure_error``, drawn
            from an RNG seeded with ``seed`` (a run is reproducible).
        failure_error: the error those calls get.
        seed: the failure RNG's seed.
        context_tokens: input beyond this many tokens is a ``ValidationException``.
        guardrail_ids: the guardrails that exist (``ApplyGuardrail``).
    """

    def __init__(
        self,
        *,
        model_ids: Iterable[str] = KNOWN_MODEL_IDS,
        latency_seconds: float = 0.0,
        failure_rate: float = 0.0,
        failure_error: ConverseError = ConverseError.THROTTLING,
        seed: int = 0,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        guardrail_ids: Iterable[str] = KNOWN_GUARDRAIL_IDS,
    ) -> None:
        self._lock = threading.Lock()
        self._model_ids = frozenset(model_ids)
        self._context_tokens = context_tokens
        self._latency_seconds = 0.0
        self._failure_rate = 0.0
        self._failure_error = failure_error
        self._rng = random.Random(seed)  # noqa: S311 - fault injection, not security
        self._fail_next: list[ConverseError] = []
        self._refuse_next = 0
        self._script = ModelScript()
        self._tool_use_watchers: list[ToolUseWatcher] = []
        self._calls: Counter[str] = Counter()
        self._requests: dict[str, Mapping[str, Any]] = {}
        self._total = 0
        self._guardrail_ids = frozenset(guardrail_ids)
        self._intervene_next = 0
        self._fail_guardrail_next: list[ConverseError] = []
        self._guardrail_texts: list[str] = []
        self.set_latency(latency_seconds)
        self.set_failure_rate(failure_rate, error=failure_error)

    # -- knobs ---------------------------------------------------------------------

    def set_latency(self, seconds: float) -> None:
        """Add ``seconds`` to every later ``Converse`` call (0 for none)."""
        if seconds < 0:
            raise ValueError("latency must be >= 0")
        with self._lock:
            self._latency_seconds = seconds

    def set_failure_rate(
        self,
        rate: float,
        *,
        error: ConverseError = ConverseError.THROTTLING,
        seed: int | None = None,
    ) -> None:
        """Answer the share ``rate`` of later calls with ``error`` (reseeded if ``seed``)."""
        if not 0.0 <= rate <= 1.0:
            raise ValueError("failure rate must be within [0, 1]")
        with self._lock:
            self._failure_rate, self._failure_error = rate, error
            if seed is not None:
                self._rng.seed(seed)

    def fail_next(self, count: int, error: ConverseError = ConverseError.THROTTLING) -> None:
        """Answer the next ``count`` calls with ``error`` (replaces any pending ones)."""
        with self._lock:
            self._fail_next = [error] * count

    def refuse_next(self, count: int) -> None:
        """Answer the next ``count`` calls that get no injected error with an empty,
        content-filtered answer (an invalid request still gets ``ValidationException``)."""
        with self._lock:
            self._refuse_next = count

    def use_script(self, script: ModelScript) -> None:
        """Answer from ``script`` (an empty one turns it off).

        A request whose conversation holds ``n`` assistant turns gets turn ``n`` of the
        entry matching its package: its text, and, when the request offers tools
        (``toolConfig``), one ``toolUse`` block per tool use with a fresh random
        ``toolUseId`` (as Bedrock draws one per call) and ``stopReason`` ``tool_use``;
        its ``usage`` replaces the estimate. Past the entry's turns, the usual summary.
        A tool the request does not offer is a ``ValidationException``.
        """
        with self._lock:
            self._script = script

    def script_tools(self, turns: Sequence[Sequence[tuple[str, Mapping[str, Any]]]]) -> None:
        """Every conversation that offers tools asks, in its turn ``n``, for the
        ``(name, input)`` tools of ``turns[n]``, then gets the summary (see
        :meth:`use_script`). An empty list turns it off."""
        self.use_script(ModelScript.tool_turns(turns))

    def watch_tool_uses(self, watcher: ToolUseWatcher) -> None:
        """Call ``watcher(delivery_id, tool name, toolUseId)`` for each tool use answered,
        before the answer leaves."""
        with self._lock:
            self._tool_use_watchers.append(watcher)

    def intervene_next(self, count: int) -> None:
        """Let the guardrail intervene on the next ``count`` ``ApplyGuardrail`` calls that
        get no injected error, whatever their text."""
        with self._lock:
            self._intervene_next = count

    def fail_guardrail_next(
        self, count: int, error: ConverseError = ConverseError.THROTTLING
    ) -> None:
        """Answer the next ``count`` ``ApplyGuardrail`` calls with ``error``."""
        with self._lock:
            self._fail_guardrail_next = [error] * count

    def reset(self) -> None:
        """Zero the counters and clear every fault (latency, rate, pending failures)."""
        with self._lock:
            self._intervene_next = 0
            self._fail_guardrail_next = []
            self._guardrail_texts = []
            self._script = ModelScript()
            self._latency_seconds = 0.0
            self._failure_rate = 0.0
            self._fail_next = []
            self._refuse_next = 0
            self._calls.clear()
            self._requests.clear()
            self._total = 0

    # -- counters ------------------------------------------------------------------

    def calls(self) -> dict[str, int]:
        """``Converse`` calls so far per delivery id (failed calls included)."""
        with self._lock:
            return dict(self._calls)

    @property
    def total_calls(self) -> int:
        """Every ``Converse`` call so far, with or without a delivery id."""
        with self._lock:
            return self._total

    def guardrail_texts(self) -> list[str]:
        """The text of every ``ApplyGuardrail`` call so far, in order (failed ones too)."""
        with self._lock:
            return list(self._guardrail_texts)

    def last_request(self, delivery_id: str) -> Mapping[str, Any] | None:
        """The last parsed request body sent for ``delivery_id`` (``modelId`` added)."""
        with self._lock:
            return self._requests.get(delivery_id)

    # -- the operation ---------------------------------------------------------------

    def converse(self, model_id: str, body: bytes) -> Reply:
        """Answer one ``Converse`` request: ``model_id`` from the path, ``body`` as sent."""
        started = time.monotonic()
        return self._converse(model_id, _parse_body(body), started)

    def apply_guardrail(self, identifier: str, version: str, body: bytes) -> Reply:
        """Answer one ``ApplyGuardrail`` request: the path's labels (decoded), ``body``."""
        request = _parse_body(body)
        texts = _guardrail_texts(request)
        with self._lock:
            self._guardrail_texts.append("\n".join(texts or []))
            injected = self._fail_guardrail_next.pop(0) if self._fail_guardrail_next else None
            forced = injected is None and self._intervene_next > 0
            if forced:
                self._intervene_next -= 1
            latency = self._latency_seconds
        if latency:
            time.sleep(latency)
        if injected is not None:
            return Reply.error(injected)
        match = _GUARDRAIL_ID.fullmatch(identifier)
        if match is None or not _GUARDRAIL_VERSION.fullmatch(version):
            return Reply.error(ConverseError.VALIDATION, "The guardrail identifier is invalid.")
        if request is None or texts is None or request.get("source") not in {"INPUT", "OUTPUT"}:
            return Reply.error(ConverseError.VALIDATION, "The request is not valid.")
        if (match["id"] or match["arn_id"]) not in self._guardrail_ids:
            return Reply.error(
                ConverseError.RESOURCE_NOT_FOUND,
                "The guardrail was not found.",
            )
        return Reply(status=200, payload=guardrail_answer(texts, intervene=forced))

    def _converse(self, model_id: str, request: Mapping[str, Any] | None, started: float) -> Reply:
        injected, refuse, latency = self._record(model_id, request)
        if latency:
            time.sleep(latency)
        if injected is not None:
            return Reply.error(injected)
        if request is None:
            return Reply.error(ConverseError.VALIDATION, "The request body is not a JSON object.")
        try:
            return self._answer(model_id, request, refuse=refuse, started=started)
        except _Invalid as exc:
            return Reply.error(ConverseError.VALIDATION, str(exc))

    def _record(
        self, model_id: str, request: Mapping[str, Any] | None
    ) -> tuple[ConverseError | None, bool, float]:
        metadata = request.get("requestMetadata") if request is not None else None
        delivery_id = (
            metadata.get(DELIVERY_ID_METADATA_KEY) if isinstance(metadata, Mapping) else None
        )
        with self._lock:
            self._total += 1
            if isinstance(delivery_id, str):
                self._calls[delivery_id] += 1
                self._requests[delivery_id] = {**(request or {}), "modelId": model_id}
            injected: ConverseError | None = None
            if self._fail_next:
                injected = self._fail_next.pop(0)
            elif self._failure_rate and self._rng.random() < self._failure_rate:
                injected = self._failure_error
            refuse = injected is None and self._refuse_next > 0
            if refuse:
                self._refuse_next -= 1
            return injected, refuse, self._latency_seconds

    def _answer(
        self, model_id: str, request: Mapping[str, Any], *, refuse: bool, started: float
    ) -> Reply:
        if model_id not in self._model_ids:
            raise _Invalid("The provided model identifier is invalid.")
        system = _system_texts(request.get("system"))
        messages = _message_texts(request.get("messages"))
        max_tokens, _temperature = _inference_config(request.get("inferenceConfig"))
        _check_metadata(request.get("requestMetadata"))
        input_text = "".join(system) + "".join(text for _, texts in messages for text in texts)
        # Bedrock bills the tools' definitions and the tool blocks as input too.
        input_tokens = token_count(input_text + _tool_material(request))
        if input_tokens > self._context_tokens:
            raise _Invalid("Input is too long for requested model.")
        scripted = self._scripted_turn(messages)
        uses = self._tool_uses(request, scripted)
        if refuse or REFUSE_MARKER in input_text:
            content: list[dict[str, Any]] = []
            stop_reason, output_tokens = "content_filtered", 0
        elif uses:
            text = [{"text": scripted.text}] if scripted is not None and scripted.text else []
            content, stop_reason = [*text, *uses], "tool_use"
            output_tokens = token_count(json.dumps(content))
        else:
            has_text = scripted is not None and scripted.text.strip()
            answer = scripted.text if scripted is not None and has_text else ""
            answer = answer or summary(model_id, system, messages)
            stop_reason = "end_turn"
            if max_tokens is not None and token_count(answer) > max_tokens:
                answer, stop_reason = answer[: max_tokens * 4], "max_tokens"
            content, output_tokens = [{"text": answer}], token_count(answer)
        if scripted is not None:
            input_tokens = _given(scripted.input_tokens, input_tokens)
            output_tokens = _given(scripted.output_tokens, output_tokens)
        if uses:
            self._announce(request, uses)
        return Reply(
            status=200,
            payload={
                "output": {"message": {"role": "assistant", "content": content}},
                "stopReason": stop_reason,
                "usage": {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "totalTokens": input_tokens + output_tokens,
                },
                "metrics": {"latencyMs": int((time.monotonic() - started) * 1000)},
            },
        )

    def _scripted_turn(self, messages: Sequence[tuple[str, Sequence[str]]]) -> ScriptedTurn | None:
        """The script's answer to this conversation (None: the emulator's own)."""
        with self._lock:
            script = self._script
        user_texts = [text for role, texts in messages if role == "user" for text in texts]
        package = next(filter(None, map(_package_in, user_texts)), None)
        return script.turn(package, len(messages) // 2)

    def _announce(self, request: Mapping[str, Any], uses: Sequence[Mapping[str, Any]]) -> None:
        metadata = request.get("requestMetadata")
        delivery_id = (
            metadata.get(DELIVERY_ID_METADATA_KEY) if isinstance(metadata, Mapping) else None
        )
        with self._lock:
            watchers = list(self._tool_use_watchers)
        for use in uses:
            for watcher in watchers:
                watcher(str(delivery_id or ""), use["toolUse"]["name"], use["toolUse"]["toolUseId"])

    def _tool_uses(
        self, request: Mapping[str, Any], scripted: ScriptedTurn | None
    ) -> list[dict[str, Any]]:
        """The scripted tool uses of this turn, when the request offers tools."""
        config = request.get("toolConfig")
        if not isinstance(config, Mapping) or scripted is None or not scripted.tool_uses:
            return []
        offered = {
            tool.get("toolSpec", {}).get("name")
            for tool in config.get("tools", [])
            if isinstance(tool, Mapping)
        }
        uses = []
        for scripted_use in scripted.tool_uses:
            name, tool_input = scripted_use.name, dict(scripted_use.input)
            if name not in offered:
                raise _Invalid(f"The model asked for a tool the request does not offer: {name}.")
            tool_use_id = f"tooluse_{uuid.uuid4().hex[:22]}"
            uses.append({"toolUse": {"toolUseId": tool_use_id, "name": name, "input": tool_input}})
        return uses


def guardrail_answer(texts: Sequence[str], *, intervene: bool = False) -> dict[str, Any]:
    """The ``ApplyGuardrail`` answer on ``texts`` (see the module docstring)."""
    chars = sum(len(text) for text in texts)
    units = sum(math.ceil(len(text) / _CHARS_PER_TEXT_UNIT) for text in texts)
    usage = {
        "topicPolicyUnits": units,
        "contentPolicyUnits": units,
        "wordPolicyUnits": units,
        "sensitiveInformationPolicyUnits": units,
        "sensitiveInformationPolicyFreeUnits": 0,
        "contextualGroundingPolicyUnits": 0,
    }
    coverage = {"textCharacters": {"guarded": chars, "total": chars}}
    marked = any(GUARDRAIL_MARKER in text for text in texts)
    if not (intervene or marked):
        return {
            "usage": usage,
            "action": "NONE",
            "outputs": [],
            "assessments": [{}],
            "guardrailCoverage": coverage,
        }
    assessment: dict[str, Any] = {
        "contentPolicy": {
            "filters": [
                {
                    "type": "PROMPT_ATTACK",
                    "confidence": "HIGH",
                    "filterStrength": "HIGH",
                    "action": "BLOCKED",
                    "detected": True,
                }
            ]
        }
    }
    if marked:
        word = {"match": GUARDRAIL_MARKER, "action": "BLOCKED", "detected": True}
        assessment["wordPolicy"] = {"customWords": [word], "managedWordLists": []}
    return {
        "usage": usage,
        "action": "GUARDRAIL_INTERVENED",
        "actionReason": "Guardrail blocked.",
        "outputs": [{"text": GUARDRAIL_BLOCKED_MESSAGE}],
        "assessments": [assessment],
        "guardrailCoverage": coverage,
    }


def _guardrail_texts(request: Mapping[str, Any] | None) -> list[str] | None:
    """The text of each ``text`` block of an ``ApplyGuardrail`` body; None when the body
    is not one (no content, a block of no known kind, a text that is not a string)."""
    content = None if request is None else request.get("content")
    if not isinstance(content, list) or not content:
        return None
    texts = []
    for block in content:
        if not isinstance(block, dict) or not ({"text", "image"} & set(block)):
            return None
        if "text" in block:
            text = block["text"].get("text") if isinstance(block["text"], dict) else None
            if not isinstance(text, str):
                return None
            texts.append(text)
    return texts


def _tool_material(request: Mapping[str, Any]) -> str:
    """The request's tool definitions and tool blocks (``toolUse``, ``toolResult``) as JSON
    text, counted as input beside the text blocks."""
    parts = [json.dumps(request["toolConfig"])] if "toolConfig" in request else []
    for message in request.get("messages") or []:
        for block in message.get("content") or [] if isinstance(message, dict) else []:
            if isinstance(block, dict):
                parts += [json.dumps(block[k]) for k in ("toolUse", "toolResult") if k in block]
    return "".join(parts)


def _given(scripted: int | None, estimate: int) -> int:
    return estimate if scripted is None else scripted


def token_count(text: str) -> int:
    """The emulator's token estimate: characters divided by four, rounded up."""
    return math.ceil(len(text) / 4)


def summary(
    model_id: str, system: Sequence[str], messages: Sequence[tuple[str, Sequence[str]]]
) -> str:
    """The deterministic answer to a request (see the module docstring)."""
    canonical = json.dumps([model_id, list(system), [list(m) for m in messages]], sort_keys=True)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    user_texts = [text for role, texts in messages if role == "user" for text in texts]
    subject, source = "the request", (user_texts[-1] if user_texts else "")
    for text in reversed(user_texts):
        package = _package_in(text)
        if package is not None:
            subject, source = " ".join(package["title"].split()), package.get("briefing", "")
            break
    words = source.split()
    excerpt = " ".join(words[:SUMMARY_WORDS]) + (" ..." if len(words) > SUMMARY_WORDS else "")
    return f"Summary of {subject}: {excerpt} [{digest}]"


def _package_in(text: str) -> dict[str, Any] | None:
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("title"), str):
            if not isinstance(value.get("briefing", ""), str):
                continue
            return value
    return None


def _parse_body(body: bytes) -> Mapping[str, Any] | None:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _system_texts(value: object) -> list[str]:
    return [] if value is None else _block_texts(value, "system")


def _block_texts(blocks: object, where: str) -> list[str]:
    """The text of each text block; blocks of other kinds are accepted and ignored."""
    if not isinstance(blocks, list) or not blocks:
        raise _Invalid(f"{where} must be a non-empty list of content blocks.")
    texts = []
    for block in blocks:
        if not isinstance(block, dict):
            raise _Invalid(f"{where} must be a non-empty list of content blocks.")
        text = block.get("text")
        if text is not None:
            if not isinstance(text, str) or not text.strip():
                raise _Invalid("A text content block must not be blank.")
            texts.append(text)
    return texts


def _message_texts(value: object) -> list[tuple[str, list[str]]]:
    if not isinstance(value, list) or not value:
        raise _Invalid("A conversation must start with a user message.")
    messages: list[tuple[str, list[str]]] = []
    for index, message in enumerate(value):
        if not isinstance(message, dict) or message.get("role") not in {"user", "assistant"}:
            raise _Invalid("Each message needs the role user or assistant.")
        expected = "user" if index % 2 == 0 else "assistant"
        if message["role"] != expected:
            if index == 0:
                raise _Invalid("A conversation must start with a user message.")
            raise _Invalid("A conversation must alternate between user and assistant roles.")
        messages.append((message["role"], _block_texts(message.get("content"), "content")))
    return messages


def _inference_config(value: object) -> tuple[int | None, float | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise _Invalid("inferenceConfig must be an object.")
    max_tokens, temperature = value.get("maxTokens"), value.get("temperature")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise _Invalid("maxTokens must be a positive integer.")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 1
    ):
        raise _Invalid("temperature must be within [0, 1].")
    return max_tokens, temperature


def _check_metadata(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or not 1 <= len(value) <= _MAX_METADATA_ENTRIES:
        raise _Invalid("requestMetadata must have between 1 and 16 entries.")
    for key, item in value.items():
        if not isinstance(item, str) or not _METADATA_KEY.fullmatch(key):
            raise _Invalid("requestMetadata has a key or value that is not allowed.")
        if not _METADATA_VALUE.fullmatch(item):
            raise _Invalid("requestMetadata has a key or value that is not allowed.")


def _handler(emulator: BedrockEmulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as botocore's pool expects; every answer has a Content-Length.
        protocol_version = "HTTP/1.1"
        # Headers and body leave in two writes; with Nagle on, a keep-alive client's
        # delayed ACK would hold the body back 40 ms.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: tests run many requests

        def _send(self, reply: Reply) -> None:
            data = json.dumps(reply.payload).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                # The caller went away while the answer was held (a killed worker):
                # what a real endpoint sees too, and nothing to report.
                self.close_connection = True

        def _unknown(self) -> Reply:
            return Reply(
                status=404,
                payload={"message": "Unknown operation."},
                headers={"x-amzn-ErrorType": "UnknownOperationException"},
            )

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                self.close_connection = True  # the body stays unread
                self._send(Reply.error(ConverseError.VALIDATION, "The request is too large."))
                return
            body = self.rfile.read(length)
            path = urllib.parse.urlsplit(self.path).path
            # Labels are matched encoded: an ARN's "/" arrives as %2F.
            if match := _CONVERSE_PATH.fullmatch(path):
                model_id = urllib.parse.unquote(match["model"])
                self._send(emulator.converse(model_id, body))
            elif match := _GUARDRAIL_PATH.fullmatch(path):
                labels = (urllib.parse.unquote(match["id"]), urllib.parse.unquote(match["version"]))
                self._send(emulator.apply_guardrail(*labels, body))
            else:
                self._send(self._unknown())

        def do_GET(self) -> None:
            if urllib.parse.urlsplit(self.path).path.rstrip("/") == CALLS_PATH:
                self._send(Reply(status=200, payload=emulator.calls()))
                return
            self._send(self._unknown())

    return Handler


@dataclass
class RunningEmulator:
    """The emulator serving on loopback in a background thread."""

    url: str
    emulator: BedrockEmulator
    _server: LoopbackHTTPServer = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    @property
    def calls_url(self) -> str:
        """``GET`` it for ``{delivery_id: count}``."""
        return self.url + CALLS_PATH

    def calls(self) -> dict[str, int]:
        """``Converse`` calls so far per delivery id (failed calls included)."""
        return self.emulator.calls()

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(_STOP_DEADLINE_SECONDS)
        if self._thread.is_alive():
            raise RuntimeError("Bedrock emulator did not stop in time")

    def __enter__(self) -> RunningEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_in_thread(
    *, host: str = "127.0.0.1", port: int = 0, emulator: BedrockEmulator | None = None
) -> RunningEmulator:
    """Serve ``emulator`` (a default one if None) on ``host:port`` (0: a free port).

    Returns once the socket listens; ``url`` is the ``endpoint_url`` for boto3.
    """
    emulator = emulator or BedrockEmulator()
    server = _server(host, port, emulator)
    serve = functools.partial(server.serve_forever, poll_interval=_POLL_SECONDS)
    thread = threading.Thread(target=serve, name="bedrock-emulator", daemon=True)
    thread.start()
    return RunningEmulator(
        url=_url(host, server), emulator=emulator, _server=server, _thread=thread
    )


def _server(host: str, port: int, emulator: BedrockEmulator) -> LoopbackHTTPServer:
    return LoopbackHTTPServer((host, port), _handler(emulator))


def _url(host: str, server: LoopbackHTTPServer) -> str:
    url_host = f"[{host}]" if ":" in host else host
    return f"http://{url_host}:{server.server_address[1]}"


def main(argv: Sequence[str] | None = None) -> int:
    """Serve in the foreground until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m local.bedrock_emulator", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per call")
    parser.add_argument("--failure-rate", type=float, default=0.0)
    parser.add_argument(
        "--failure-error",
        choices=[error.value for error in ConverseError],
        default=ConverseError.THROTTLING.value,
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--model", action="append", default=[], help="a model id that exists (repeatable)"
    )
    parser.add_argument(
        "--model-script", metavar="FILE", help="answer from this model script (docs/workflows.md)"
    )
    args = parser.parse_args(argv)
    if args.latency < 0 or not 0.0 <= args.failure_rate <= 1.0:
        parser.error("--latency must be >= 0 and --failure-rate within [0, 1]")
    try:
        script = load_model_script(args.model_script) if args.model_script else ModelScript()
    except ModelScriptError as exc:
        parser.error(str(exc))
    emulator = BedrockEmulator(
        model_ids=KNOWN_MODEL_IDS | set(args.model),
        latency_seconds=args.latency,
        failure_rate=args.failure_rate,
        failure_error=ConverseError(args.failure_error),
        seed=args.seed,
    )
    emulator.use_script(script)
    server = _server(args.host, args.port, emulator)
    print(f"bedrock emulator on {_url(args.host, server)}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
