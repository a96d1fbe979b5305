"""The durable tool loop: model turns and tool calls that a retry never repeats.

Per delivery, turn by turn:

1. the model turn is a model step (``effects.model``): step ``model`` for the first
   turn, ``model.<n>`` for the n-th after it. Its reply, tool uses and their ids
   included, is recorded, so a retry sees the same tool-use ids (the service draws
   new ones on every call: a loop that did not record the turn would key its actions
   on ids no retry can find again);
2. each tool use, in order, is settled once for good and recorded as the step
   ``tool.<digest of its id>``, whose result is what the model is told:

   * a read-only tool: its answer;
   * an acting tool: run inside that step through the effect ledger as the effect
     ``tool.<digest>``, keyed ``<delivery_id>:tool:<tool-use id>``, with the tool's
     outcome mode; an action applied by an attempt that died before its result was
     recorded is not applied again, and the model is told it was applied;
   * an unknown tool name, a :class:`~functions.workflows.tools.ToolError` or a
     refusal (``Rejected``): an error result the model reads;
   * an acting tool, unless the setting ``tools_without_approval`` exempts it by name
     (read-only tools never wait; ``approval=tools:NAME,...`` names some explicitly,
     as before): before it runs, the proposed call (tool, input, tool-use id) is recorded as the
     approval ``tool.<digest>`` and the delivery parks ``awaiting_approval``
     (:mod:`functions.core.approval`); approved, the resumed run reuses every
     recorded turn and result, reaches this tool use again and runs it through the
     ledger as above, but only if the call it makes now (tool, arguments, package)
     is the one approved: another one is asked for anew; denied or expired, the
     delivery ends ``failed``
     (``approval_denied`` / ``approval_expired``) and the model is not asked again;

3. the results go back to the model in the next turn, each fenced as untrusted data
   (:func:`~functions.workflows.agent_prompt.fenced_tool_result`: one escaped JSON line
   between lines carrying the prompt's nonce; the system prompt says so); a turn
   without tool uses is the final reply.

Caps end a runaway loop: more than ``max_turns`` model turns, or more than
``max_tool_calls`` tool uses per delivery, fail the delivery (``max_turns_reached`` /
``max_tool_calls_reached``, a permanent error whose log line names the setting).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn, Protocol

from functions.core import tracing
from functions.core.approval import require_approval
from functions.core.errors import PermanentError, ProcessingError, Rejected
from functions.core.observability import logger
from functions.workflows.agent_prompt import (
    fence_safe_json,
    fenced_tool_result,
    tool_results_rule,
)
from functions.workflows.tools import Tool, ToolError, ToolRaised, tool_config

if TYPE_CHECKING:
    from functions.core.clock import Clock
    from functions.core.model_step import ModelReply, ToolUse
    from functions.core.ports.approvals import ApprovalStore
    from functions.core.ports.model import ModelCaller
    from functions.core.ports.workflow import Ledger
    from functions.workflows.agent_prompt import AgentPrompt

SETTING_MAX_TURNS: Final = "max_turns"
SETTING_MAX_TOOL_CALLS: Final = "max_tool_calls"
# The acting tools that run without a person's yes (NAME,NAME); every other one waits.
SETTING_EXEMPT: Final = "tools_without_approval"
DEFAULT_MAX_TURNS: Final = 8
DEFAULT_MAX_TOOL_CALLS: Final = 20
_DIGEST_CHARS: Final = 16  # a step or effect name is [a-z0-9_.-]; a tool-use id is not


@dataclass(frozen=True, slots=True)
class ToolCaps:
    """Per delivery: the most model turns, and the most tool uses, before it fails."""

    max_turns: int = DEFAULT_MAX_TURNS
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS


@dataclass(frozen=True, slots=True)
class ToolApproval:
    """The acting tools whose calls wait for a person, and where the wait is recorded.

    Attributes:
        tools: the acting tools whose calls wait: every one not in ``exempt``.
        exempt: the acting tools a deployer let run unasked, by name.
        package_digest: the package the run's calls are made from; a call is approved
            for it only (:meth:`about` binds a run's).
    """

    store: ApprovalStore | None
    clock: Clock
    tools: frozenset[str]
    timeout_seconds: int
    exempt: frozenset[str] = frozenset()
    package_digest: str | None = None

    def __post_init__(self) -> None:
        if self.tools and self.store is None:
            raise ValueError("tools that wait for a person need an approval store")

    def about(self, package_digest: str) -> ToolApproval:
        return dataclasses.replace(self, package_digest=package_digest)

    @classmethod
    def of(
        cls,
        gated: frozenset[str],
        tools: Sequence[Tool],
        *,
        store: ApprovalStore | None,
        clock: Clock,
        timeout_seconds: int,
        exempt: frozenset[str] = frozenset(),
    ) -> ToolApproval:
        """The gate of ``tools``: every acting one waits but those ``exempt`` names;
        ``gated`` (the names ``approval=tools:NAME,...`` lists) must wait.

        Raises:
            ValueError: a name is no acting tool of ``tools`` (a typo would let the
                action run unapproved, or exempt nothing), a name is both gated and
                exempt, or a tool waits and there is no store: fail at cold start.
        """
        acting = check_gate_names(gated, tools, exempt=exempt)
        waiting = frozenset(acting - exempt)
        if waiting and store is None:
            raise ValueError(
                f"acting tools wait for a person ({','.join(sorted(waiting))}): that needs"
                f" an approval store, or name them in {SETTING_EXEMPT}"
            )
        return cls(store, clock, waiting, timeout_seconds, exempt)


def check_gate_names(
    gated: frozenset[str], tools: Sequence[Tool], *, exempt: frozenset[str] = frozenset()
) -> frozenset[str]:
    """The names of the acting tools, once ``gated`` and ``exempt`` are found among them.

    Raises:
        ValueError: a name is no acting tool of ``tools`` (unknown, or read-only: a typo
            would let the action run unapproved, or exempt nothing), or a name is both
            gated and exempt.
    """
    acting = {tool.name for tool in tools if tool.mode.effect_mode is not None}
    read_only = {tool.name for tool in tools} - acting
    for setting, names in (("approval: tools:", gated), (f"{SETTING_EXEMPT}=", exempt)):
        if unknown := sorted(names - acting):
            read = sorted(set(unknown) & read_only)
            why = f" ({','.join(read)}: read-only)" if read else ""
            raise ValueError(
                f"{setting}{','.join(unknown)} names no acting tool of the tools setting"
                f"{why} (acting: {sorted(acting) or 'none'})"
            )
    if both := sorted(gated & exempt):
        raise ValueError(
            f"approval: tools:{','.join(both)} is exempted by {SETTING_EXEMPT} too:"
            " name it in one of them"
        )
    return frozenset(acting)


class ResultScreen(Protocol):
    """Screens one tool result before the model reads it (the guardrail's gate)."""

    def __call__(self, name: str, tool: str, text: str) -> object:
        """``name``: the tool use's record name; ``text``: the result's fenced line."""
        ...


def tool_key(delivery_id: str, tool_use_id: str) -> str:
    """The idempotency key of one tool use's action."""
    return f"{delivery_id}:tool:{tool_use_id}"


def tool_record_name(tool_use_id: str) -> str:
    """The step (and, for an acting tool, effect) name of one tool use."""
    return "tool." + hashlib.sha256(tool_use_id.encode()).hexdigest()[:_DIGEST_CHARS]


def turn_step(turn: int, first: str) -> str:
    """The model step of turn ``turn`` (0: the first), named after the first's."""
    return first if turn == 0 else f"{first}.{turn}"


def converse_with_tools(
    effects: Ledger,
    client: ModelCaller[AgentPrompt],
    prompt: AgentPrompt,
    tools: Sequence[Tool],
    *,
    caps: ToolCaps,
    first_step: str = "model",
    approval: ToolApproval | None = None,
    screen: ResultScreen | None = None,
) -> ModelReply:
    """Run the loop (see the module's docstring) and return the final reply.

    ``approval`` says which acting tools wait (:meth:`ToolApproval.of`); without it
    no acting tool may be offered. ``screen`` (screening on) is given each tool
    result's line, exactly as the model will read it between its fence lines, before
    the turn that carries it; it raises to hold the result back.

    Raises:
        ValueError: acting tools offered without an ``approval``.
        PermanentError: ``max_turns_reached`` or ``max_tool_calls_reached``.
        AwaitingApproval: a tool use waits for its decision (park it).
        ApprovalRefused: it was denied, or its time ran out.
        Whatever a model step or an acting tool's effect raises (``NotApplied``,
        ``UncertainEffect``, ``TransientError``, ...): the delivery is retried or
        fails as for any step or effect.
    """
    if approval is None and any(tool.mode.effect_mode is not None for tool in tools):
        # Fail closed: an acting tool runs unasked only when exempted by name.
        raise ValueError("acting tools need a ToolApproval (ToolApproval.of exempts by name)")
    by_name = {tool.name: tool for tool in tools}
    offered = dataclasses.replace(
        prompt,
        system=f"{prompt.system}\n\n{tool_results_rule(prompt.nonce)}",
        tool_config=tool_config(tools),
    )
    turns: list[dict[str, Any]] = []
    used = 0
    for turn in range(caps.max_turns):
        reply = effects.model(
            turn_step(turn, first_step), dataclasses.replace(offered, turns=tuple(turns)), client
        )
        if not reply.tool_uses:
            return reply
        results = []
        for use in reply.tool_uses:
            used += 1
            if used > caps.max_tool_calls:
                _cap_reached(effects, "max_tool_calls_reached", SETTING_MAX_TOOL_CALLS, caps)
            settle = functools.partial(_settle, effects, by_name, use, approval)
            # The name only when it is one offered: the model's own text stays out of spans.
            offered_name = use.name if use.name in by_name else "unknown"
            with tracing.span(
                tracing.SPAN_TOOL, attributes={"tool": offered_name, "tool_use_id": use.id}
            ) as tool_span:
                outcome = effects.step(tool_record_name(use.id), settle, label=f"tool {use.name}")
                tool_span.set("status", str(outcome.get("status")))
            if screen is not None:
                screen(tool_record_name(use.id), use.name, fence_safe_json(outcome["content"]))
            results.append(_result_block(use, outcome, prompt.nonce))
        turns += [_assistant_turn(reply), {"role": "user", "content": results}]
    _cap_reached(effects, "max_turns_reached", SETTING_MAX_TURNS, caps)


def _settle(
    effects: Ledger,
    tools: Mapping[str, Tool],
    use: ToolUse,
    approval: ToolApproval | None,
) -> dict[str, Any]:
    """One tool use's outcome, as recorded: ``{"status": "success"|"error", "content"}``."""
    tool = tools.get(use.name)
    if tool is None:
        return _error(f"there is no tool named {use.name!r}")
    key = tool_key(effects.delivery_id, use.id)
    mode = tool.mode.effect_mode
    if mode is None:
        try:
            return _success(tool.run(use.input, key))
        except ToolError as exc:
            return _error(exc.message)
        except ProcessingError:
            raise
        except Exception as exc:  # the team's code: named, then retried
            raise _raised(effects, tool, exc) from exc
    if approval is not None and approval.store is not None and tool.name in approval.tools:
        # The proposal comes from the recorded turn, so the run resumed after the
        # decision runs exactly the call the person approved, with the same key.
        require_approval(
            approval.store,
            delivery_id=effects.delivery_id,
            name=tool_record_name(use.id),
            proposal={"tool": tool.name, "input": use.input, "tool_use_id": use.id, "key": key},
            package_digest=approval.package_digest,
            now=approval.clock.now(),
            timeout_seconds=approval.timeout_seconds,
            expires_at=effects.expires_at,
        )
    answers: list[object] = []
    failures: list[str] = []

    def act(idempotency_key: str) -> None:
        try:
            answers.append(tool.run(use.input, idempotency_key))
        except ToolError as exc:
            # It did nothing: cleared like any refusal, never left in doubt.
            failures.append(exc.message)
            raise Rejected("tool_error") from exc
        except ProcessingError:
            raise  # NotApplied, Rejected, ...: the outcomes the ledger settles
        except Exception as exc:  # the team's code: an unknown outcome, named
            raise _raised(effects, tool, exc) from exc

    try:
        applied = effects.run(
            tool_record_name(use.id), act, key=key, mode=mode, reconcile=tool.reconcile
        )
    except Rejected as exc:
        return _error(failures[0] if failures else f"refused ({exc.code})")
    logger.info(
        "tool applied" if applied else "tool already applied by an earlier attempt",
        extra={"delivery_id": effects.delivery_id, "tool": tool.name, "key": key},
    )
    if answers:
        return _success(answers[0])
    return _success({"applied": True, "note": "applied by an earlier attempt"})


def _raised(effects: Ledger, tool: Tool, exc: Exception) -> ToolRaised:
    """The delivery's error for a tool that raised, logged with the tool and the type."""
    raised = ToolRaised(tool.name, type(exc).__name__)
    logger.error(
        f"{raised.culprit}: retried as an error of unknown nature",
        extra={
            "delivery_id": effects.delivery_id,
            "tool": tool.name,
            "exception": raised.exception,
            "error_code": raised.code,
        },
    )
    return raised


def _success(value: object) -> dict[str, Any]:
    content = value if isinstance(value, dict) else {"result": value}
    return {"status": "success", "content": content}


def _error(message: str) -> dict[str, Any]:
    return {"status": "error", "content": {"error": message}}


def _result_block(use: ToolUse, outcome: Any, nonce: str) -> dict[str, Any]:
    return {
        "toolResult": {
            "toolUseId": use.id,
            "content": [{"text": fenced_tool_result(outcome["content"], nonce)}],
            "status": outcome["status"],
        }
    }


def _assistant_turn(reply: ModelReply) -> dict[str, Any]:
    """The recorded turn as the conversation carries it (the text as recorded)."""
    content: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    content += [
        {"toolUse": {"toolUseId": use.id, "name": use.name, "input": use.input}}
        for use in reply.tool_uses
    ]
    return {"role": "assistant", "content": content}


def _cap_reached(effects: Ledger, code: str, setting: str, caps: ToolCaps) -> NoReturn:
    logger.error(
        f"the tool loop reached its cap: raise {setting} if this delivery needs more",
        extra={
            "delivery_id": effects.delivery_id,
            "setting": setting,
            SETTING_MAX_TURNS: caps.max_turns,
            SETTING_MAX_TOOL_CALLS: caps.max_tool_calls,
        },
    )
    raise PermanentError(code)
