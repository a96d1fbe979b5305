"""The model step: a budgeted model call whose answer is recorded once per delivery.

``effects.model(name, prompt, client)`` (:meth:`~functions.core.effects.EffectLedger.model`)
is a step (:mod:`functions.core.steps`) whose work is one model call made by
``client`` (a :class:`ModelCaller`; the shipped one is
:class:`functions.workflows.model_client.ModelClient`: Bedrock ``Converse`` under the
day's token budget, each call counted in the delivery's spend record). The first
attempt that gets an answer records it as a :class:`ModelReply`; every later attempt
of the delivery reads that record and calls nothing, so effects built from the reply
are the same on every attempt.

What an unknown outcome of the call does is the client's outcome contract; a reply
is only recorded once the model answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from functions.core.errors import PermanentError

PromptT_contra = TypeVar("PromptT_contra", contravariant=True)


@dataclass(frozen=True, slots=True)
class ModelCall:
    """Where a model call belongs: the delivery, the step, the records' retention."""

    delivery_id: str
    step: str
    expires_at: int = 0  # epoch seconds; 0: records kept without a TTL


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A tool the model asked for in its answer (its input is the model's: untrusted).

    Attributes:
        id: the service's ``toolUseId``: it differs on every call, so only a recorded
            answer gives a tool use an id that every attempt sees.
    """

    id: str
    name: str
    input: dict[str, Any]

    def to_record(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "input": self.input}

    @classmethod
    def from_record(cls, record: object) -> ToolUse:
        if not isinstance(record, Mapping):
            raise PermanentError("step_result_invalid")
        use = cls(record.get("id"), record.get("name"), record.get("input"))  # type: ignore[arg-type]
        if not (isinstance(use.id, str) and isinstance(use.name, str)):
            raise PermanentError("step_result_invalid")
        if not isinstance(use.input, dict):
            raise PermanentError("step_result_invalid")
        return use


@dataclass(frozen=True, slots=True)
class ModelReply:
    """A model step's recorded result: what every attempt's effects are built from.

    Attributes:
        text: the answer, sanitized and capped (still untrusted: show it, never follow it).
        stop_reason: Converse's ``stopReason`` (``end_turn``, ``max_tokens``, ...).
        input_tokens: the prompt's tokens, as the service counted them.
        output_tokens: the answer's tokens.
        refused: the model declined (a content filter or guardrail stopped it, or it
            answered nothing).
        tool_uses: the tools the model asked for (``stop_reason`` ``tool_use``), in order.
    """

    text: str
    stop_reason: str
    input_tokens: int
    output_tokens: int
    refused: bool
    tool_uses: tuple[ToolUse, ...] = ()

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "text": self.text,
            "stop_reason": self.stop_reason,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "refused": self.refused,
        }
        if self.tool_uses:  # a reply without tools keeps the record it always had
            record["tool_uses"] = [use.to_record() for use in self.tool_uses]
        return record

    @classmethod
    def from_record(cls, record: object) -> ModelReply:
        """Raises ``PermanentError`` (``step_result_invalid``) for a record of another shape."""
        try:
            if not isinstance(record, Mapping):
                raise TypeError
            fields = dict(record)
            uses = fields.pop("tool_uses", [])
            if not isinstance(uses, list):
                raise TypeError
            reply = cls(**fields, tool_uses=tuple(ToolUse.from_record(u) for u in uses))
        except TypeError:
            raise PermanentError("step_result_invalid") from None
        types = (str, str, int, int, bool)
        values = dataclasses.astuple(reply)[: len(types)]
        if not all(isinstance(v, t) for v, t in zip(values, types, strict=True)):
            raise PermanentError("step_result_invalid")
        return reply
