"""The agent's tools: what a team's package offers the model, and how each one settles.

``-c agent_tools=my_tools.tools:TOOLS`` (the workflow setting ``tools``) names an
attribute of the team's code, shipped with the worker like any workflow code
(``workflow_source``): a sequence of :class:`Tool`, or a function that returns one.
Each tool is a Python function with a description and a JSON input schema (what the
model sees) and an **outcome mode** (:class:`ToolMode`) that says how an attempt
that ended during the tool is settled, as for every effect
(:class:`~functions.core.effects.EffectMode`):

* ``read_only``: it changes nothing; its answer is a recorded step, so a retry gives
  the model the same answer without calling it again;
* ``repeatable``, ``keyed``, ``checked``, ``none``: it acts. It runs through the effect
  ledger keyed ``<delivery_id>:tool:<tool-use id>`` (the key it is called with), so an
  action is applied at most once per tool use; ``none`` (the ``operator`` mode) leaves
  an unknown outcome in doubt for a person.

A tool returns a JSON value (the model reads it, as untrusted data) or raises
:class:`ToolError` (the model is told the tool failed, with the message). An acting
tool raises :class:`~functions.core.errors.NotApplied` when it certainly did nothing
(the delivery is retried later) or :class:`~functions.core.errors.Rejected` when the
far side refused for good (the model is told it was refused); anything else is an
unknown outcome, settled by the mode.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from functions.core.effects import EffectMode
from functions.core.errors import ProcessingError
from functions.core.workflow import import_attribute
from functions.workflows.tool_settings import ToolSettings

# Bedrock's rule for a tool's name.
_TOOL_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class ToolMode(StrEnum):
    """How a tool's unknown outcome is settled (see the module's docstring)."""

    READ_ONLY = "read_only"
    REPEATABLE = "repeatable"
    KEYED = "keyed"
    CHECKED = "checked"
    NONE = "none"  # in doubt: the delivery fails, a person resolves the effect

    @property
    def effect_mode(self) -> EffectMode | None:
        """The ledger's mode of an acting tool; None for a read-only one."""
        return _EFFECT_MODES.get(self)


_EFFECT_MODES: Final = {
    ToolMode.REPEATABLE: EffectMode.REPEATABLE,
    ToolMode.KEYED: EffectMode.KEYED,
    ToolMode.CHECKED: EffectMode.CHECKED,
    ToolMode.NONE: EffectMode.OPERATOR,
}


class ToolError(Exception):
    """The tool could not do what the model asked: the model is told, with ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolRaised(ProcessingError):
    """A tool raised an exception that says nothing of its outcome (a bug, an unmapped
    client error): retried as any error of unknown nature (at most ``worker_max_attempts``
    attempts), naming the tool and the exception's type (never its message, which could
    carry a secret) in the step's record and the worker's log."""

    code = "tool_raised"

    def __init__(self, tool: str, exception: str) -> None:
        super().__init__()
        self.tool = tool
        self.exception = exception
        self.culprit = f"tool {tool} raised {exception}"


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool the model may call.

    Attributes:
        name: ``[a-zA-Z0-9_-]``, at most 64 characters (Bedrock's rule).
        description: what it does and when to use it (the model reads this).
        input_schema: the JSON schema of its input object.
        mode: how an unknown outcome is settled.
        run: called with the model's input and the idempotency key
            ``<delivery_id>:tool:<tool-use id>``; returns a JSON value.
        reconcile: the ``checked`` mode's lookup: was the action with this key applied?
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    mode: ToolMode
    run: Callable[[dict[str, Any], str], object]
    reconcile: Callable[[str], bool] | None = field(default=None)

    def __post_init__(self) -> None:
        if not _TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {_TOOL_NAME.pattern}")
        if not self.description.strip():
            raise ValueError(f"tool {self.name!r} needs a description")
        if self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: its input schema must be of type object")
        if (self.reconcile is not None) != (self.mode is ToolMode.CHECKED):
            raise ValueError(f"tool {self.name!r}: reconcile goes with mode checked, and only")

    def spec(self) -> dict[str, Any]:
        """The tool as Converse's ``toolConfig`` lists it."""
        return {
            "toolSpec": {
                "name": self.name,
                "description": self.description,
                "inputSchema": {"json": dict(self.input_schema)},
            }
        }


def tool_config(tools: Sequence[Tool]) -> dict[str, Any] | None:
    """Converse's ``toolConfig`` for ``tools``; None when there are none."""
    return {"tools": [tool.spec() for tool in tools]} if tools else None


def load_tools(spec: str, settings: ToolSettings | None = None) -> tuple[Tool, ...]:
    """Import ``module:attribute``: a sequence of :class:`Tool`, or a function returning
    one, called with ``settings`` (the tools' own, ``tool_settings``) when it takes a
    parameter.

    Raises:
        ValueError: the spec is malformed, its module cannot be imported or raises, it
            lacks the attribute, the function raises, or it holds something other than
            tools with distinct names; one line naming the spec and the exception's type
            (its message could carry a secret): fail at cold start, and at synth.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"tools setting must be 'module:attribute', got {spec!r}")
    target = import_attribute(module_name, attribute, what=f"tools {spec}")
    if callable(target):
        takes_settings = _parameters(target) > 0
        try:
            target = target(settings or ToolSettings()) if takes_settings else target()
        except Exception as exc:  # the team's function: named by type, never its message
            raise ValueError(f"tools {spec}: the function raised {type(exc).__name__}") from exc
    if not isinstance(target, Sequence) or not all(isinstance(t, Tool) for t in target):
        raise ValueError(f"tools {spec} must be a sequence of Tool")
    tools = tuple(target)
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"tools {spec}: two tools share a name")
    if unknown := sorted(set(settings.by_tool if settings else {}) - set(names)):
        raise ValueError(f"tool_settings names no tool of {spec}: {', '.join(unknown)}")
    return tools


def _parameters(target: Callable[..., object]) -> int:
    try:
        return len(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return 0
