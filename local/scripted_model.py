"""A scripted model for a team's own pytest suite: its tool loop, without Bedrock.

Example (a team's test)::

    from local.scripted_model import ScriptedModel, run_tool_loop

    def test_the_agent_looks_up_then_opens_a_ticket():
        with ScriptedModel("model-script.json") as model:
            run = run_tool_loop(TOOLS, package, model)
        assert [call.tool for call in run.tool_calls] == ["lookup_customer", "open_ticket"]

:class:`ScriptedModel` serves a model script (:mod:`local.model_script`) from the local
Bedrock emulator on loopback, in this process: :attr:`ScriptedModel.url` is the
``bedrock_endpoint_url`` for any code that builds its own ``bedrock-runtime`` client.
:func:`run_tool_loop` runs the shipped durable tool loop
(:func:`functions.workflows.tool_loop.converse_with_tools`) with the shipped model
client over HTTP to it, once, on a ledger in memory: every turn, every tool call
(with the idempotency key it would carry deployed) and the tokens the model reported.
Approvals, retries and kills are the local stack's (``relaylink-receiver local
--model-script FILE --kill-worker ...``): here every acting tool runs unasked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import boto3

from functions.core.model_step import ModelCall, ModelReply
from functions.core.package import Package
from functions.core.ports.effects import EffectMode
from functions.core.ports.model import ModelCaller
from functions.workflows.adapters.bedrock_converse import BedrockConverse
from functions.workflows.agent import NO_TOOLS_RULE, TOOLS_RULE
from functions.workflows.agent_prompt import build_prompt
from functions.workflows.model_client import DEFAULT_MODEL_ID, ModelClient
from functions.workflows.tool_loop import ToolApproval, ToolCaps, converse_with_tools
from functions.workflows.tools import Tool
from functions.workflows.wiring import BEDROCK_CONFIG
from local import bedrock_emulator
from local.model_script import ModelScript, load_model_script
from local.testkit.clock import FakeClock

PromptT = TypeVar("PromptT")
DELIVERY_ID: Final = "dlv_scripted"
DEFAULT_CAPS: Final = ToolCaps()


class ScriptedModel:
    """The Bedrock emulator on loopback, answering from a model script.

    Args:
        script: a script file's path, or a :class:`~local.model_script.ModelScript`.

    Raises:
        ModelScriptError: the file is not a valid script (one line naming the entry).
    """

    def __init__(self, script: ModelScript | str | Path) -> None:
        self.script = script if isinstance(script, ModelScript) else load_model_script(script)
        self.emulator = bedrock_emulator.BedrockEmulator()
        self.emulator.use_script(self.script)
        self._running: bedrock_emulator.RunningEmulator | None = None

    def __enter__(self) -> ScriptedModel:
        self._running = bedrock_emulator.start_in_thread(emulator=self.emulator)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._running is not None:
            self._running.stop()
            self._running = None

    @property
    def url(self) -> str:
        """The ``bedrock_endpoint_url`` to point a ``bedrock-runtime`` client at."""
        if self._running is None:
            raise RuntimeError("use the scripted model inside `with ScriptedModel(...)`")
        return self._running.url

    @property
    def settings(self) -> dict[str, str]:
        """The workflow settings that point the shipped model client here."""
        return {"bedrock_endpoint_url": self.url, "model_id": DEFAULT_MODEL_ID}

    def client(self, *, max_tokens: int = 256) -> ModelClient:
        """The shipped model client on this model: no token budget, no spend record."""
        # Any region and credentials do: the emulator verifies none, and a team's test
        # environment may have no AWS configuration at all.
        bedrock = boto3.client(
            "bedrock-runtime",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="scripted",
            aws_secret_access_key="scripted",  # noqa: S106 - not a secret: never checked
            config=BEDROCK_CONFIG,
        )
        model = BedrockConverse(client=bedrock, model_id=DEFAULT_MODEL_ID)
        return ModelClient(
            model=model, clock=FakeClock(), metrics=_Uncounted(), max_tokens=max_tokens
        )

    def calls(self) -> dict[str, int]:
        """``Converse`` calls so far per delivery id."""
        return self.emulator.calls()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool the loop ran: its name, the model's input, and the idempotency key."""

    tool: str
    input: dict[str, Any]
    key: str


@dataclass
class ToolLoopRun:
    """What one run of the loop did."""

    reply: ModelReply
    tool_calls: list[ToolCall] = field(default_factory=list)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


def run_tool_loop(
    tools: Sequence[Tool],
    package: Package,
    model: ScriptedModel,
    *,
    delivery_id: str = DELIVERY_ID,
    caps: ToolCaps = DEFAULT_CAPS,
) -> ToolLoopRun:
    """Run the agent's tool loop on ``package`` once, every acting tool unasked.

    Raises:
        What the loop raises: ``PermanentError`` (``max_turns_reached``, ...), a tool's
        own exception, a ``TransientError`` when the emulator refuses a request (a tool
        the script names that ``tools`` does not offer is a ``ValidationException``).
    """
    run = ToolLoopRun(reply=ModelReply("", "", 0, 0, refused=False))
    by_name = {tool.name: tool for tool in tools}

    def traced(tool: Tool) -> Tool:
        def call(tool_input: dict[str, Any], key: str) -> object:
            run.tool_calls.append(ToolCall(tool.name, dict(tool_input), key))
            return by_name[tool.name].run(tool_input, key)

        return dataclasses.replace(tool, run=call)

    offered = [traced(tool) for tool in tools]
    acting = frozenset(tool.name for tool in tools if tool.mode.effect_mode is not None)
    approval = ToolApproval.of(
        frozenset(), offered, store=None, clock=FakeClock(), timeout_seconds=1, exempt=acting
    )
    prompt = build_prompt(package)
    prompt = dataclasses.replace(prompt, system=prompt.system.replace(NO_TOOLS_RULE, TOOLS_RULE))
    ledger = _OnceLedger(delivery_id)
    run.reply = converse_with_tools(
        ledger,
        model.client(),
        prompt,
        offered,
        caps=caps,
        approval=approval.about(package.digest()),
    )
    for reply in ledger.replies:
        run.model_calls += 1
        run.input_tokens += reply.input_tokens
        run.output_tokens += reply.output_tokens
    return run


class _Uncounted:
    """No metrics: a test run has no CloudWatch to count in."""

    def count(self, name: str, value: int = 1) -> None:
        return


@dataclass
class _OnceLedger:
    """One attempt's ledger in memory: each step and effect runs once, by name."""

    delivery_id: str
    expires_at: int = 0
    replies: list[ModelReply] = field(default_factory=list)
    _results: dict[str, Any] = field(default_factory=dict)

    def run(
        self,
        name: str,
        fn: Callable[[str], object],
        *,
        key: str | None = None,
        mode: EffectMode | None = None,
        reconcile: Callable[[str], bool] | None = None,
        repeatable: bool = False,
    ) -> bool:
        if f"effect:{name}" in self._results:
            return False
        fn(key or f"{self.delivery_id}:{name}")
        self._results[f"effect:{name}"] = True
        return True

    def step(self, name: str, fn: Callable[[], object], *, label: str = "") -> Any:
        if name not in self._results:
            self._results[name] = fn()
        return self._results[name]

    def model(self, name: str, prompt: PromptT, client: ModelCaller[PromptT]) -> ModelReply:
        def ask() -> object:
            reply = client.answer(prompt, ModelCall(self.delivery_id, name))
            self.replies.append(reply)
            return reply.to_record()

        return ModelReply.from_record(self.step(name, ask))


__all__ = ["ScriptedModel", "ToolCall", "ToolLoopRun", "run_tool_loop"]
