"""A model script: what the local Bedrock emulator answers, turn by turn, per delivery.

The file is one JSON object (docs/workflows.md, "Build your own agent here"):

```json
{
  "deliveries": [
    {"match": {"title_contains": "outage"},
     "turns": [
       {"tool_use": [{"name": "lookup_customer", "input": {"customer": "acme"}}]},
       {"text": "Nothing to do.", "usage": {"input_tokens": 600, "output_tokens": 5}}
     ]}
  ],
  "turns": [{"text": "Routine."}]
}
```

A request is matched to the first entry of ``deliveries`` whose ``match`` fits the
package the prompt fences (``package_id`` equal, or ``title_contains`` a substring of
its title); a request no entry matches gets the top-level ``turns`` (none: the
emulator's usual summary). Turn ``n`` answers a conversation that holds ``n`` assistant
turns already; past the last turn, the usual summary. A turn has ``text``, ``tool_use``
(each ``{"name", "input"}``; asked only when the request offers tools) or both, and
``usage`` to report other token counts than the emulator's estimate.

:func:`load_model_script` reads and checks a file; :meth:`ModelScript.tool_turns` is
the script of ``BedrockEmulator.script_tools``: the same turns for every delivery.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

_TOP_KEYS: Final = ("deliveries", "turns")
_ENTRY_KEYS: Final = ("match", "turns")
_MATCH_KEYS: Final = ("package_id", "title_contains")
_TURN_KEYS: Final = ("text", "tool_use", "usage")
_TOOL_USE_KEYS: Final = ("name", "input")
_USAGE_KEYS: Final = ("input_tokens", "output_tokens")
_MAX_BYTES: Final = 4 * 1024 * 1024


class ModelScriptError(ValueError):
    """A script that cannot be served; ``str()`` is one line naming the file, the entry
    and what is wrong."""


@dataclass(frozen=True, slots=True)
class ScriptedToolUse:
    """One tool the model asks for, with its input."""

    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One answer of the model: text, tool uses, or both; token counts when given."""

    text: str = ""
    tool_uses: tuple[ScriptedToolUse, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class DeliveryMatch:
    """Which packages an entry answers: by package id, or by a part of the title."""

    package_id: str | None = None
    title_contains: str | None = None

    def fits(self, package: Mapping[str, Any]) -> bool:
        if self.package_id is not None:
            return package.get("package_id") == self.package_id
        title = package.get("title")
        return isinstance(title, str) and str(self.title_contains) in title


@dataclass(frozen=True, slots=True)
class ScriptEntry:
    match: DeliveryMatch
    turns: tuple[ScriptedTurn, ...]


@dataclass(frozen=True, slots=True)
class ModelScript:
    """Per delivery, the model's answers in turn (see the module docstring)."""

    entries: tuple[ScriptEntry, ...] = ()
    turns: tuple[ScriptedTurn, ...] = ()

    @classmethod
    def tool_turns(cls, turns: Sequence[Sequence[tuple[str, Mapping[str, Any]]]]) -> ModelScript:
        """Every delivery's turn ``n`` asks for the ``(name, input)`` tools of ``turns[n]``."""
        return cls(
            turns=tuple(
                ScriptedTurn(tool_uses=tuple(ScriptedToolUse(name, dict(i)) for name, i in turn))
                for turn in turns
            )
        )

    @classmethod
    def parse(cls, document: object, *, source: str = "model script") -> ModelScript:
        """A script from a parsed JSON document.

        Raises:
            ModelScriptError: what is wrong, naming ``source`` and the entry.
        """
        return _Parser(source).script(document)

    def turn(self, package: Mapping[str, Any] | None, index: int) -> ScriptedTurn | None:
        """The answer to turn ``index`` of the conversation about ``package`` (None: the
        emulator's own)."""
        turns = self.turns
        if package is not None:
            for entry in self.entries:
                if entry.match.fits(package):
                    turns = entry.turns
                    break
        return turns[index] if 0 <= index < len(turns) else None


def load_model_script(path: str | Path) -> ModelScript:
    """Read and check a script file.

    Raises:
        ModelScriptError: the file cannot be read, is not JSON, or is not a script.
    """
    source = str(path)
    try:
        with open(path, "rb") as file:
            data = file.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise ModelScriptError(f"{source}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > _MAX_BYTES:
        raise ModelScriptError(f"{source}: larger than {_MAX_BYTES // (1024 * 1024)} MiB")
    try:
        document = json.loads(data)
    except UnicodeDecodeError:
        raise ModelScriptError(f"{source}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ModelScriptError(
            f"{source}: not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    return ModelScript.parse(document, source=source)


class _Parser:
    """Checks a document field by field; every error names where it is."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> ModelScriptError:
        place = f"{self.source}: {where}" if where else self.source
        return ModelScriptError(f"{place}: {problem}")

    def mapping(self, value: object, where: str, known: Sequence[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be an object with {', '.join(known)}")
        for key in value:
            if key not in known:
                near = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else f" (known: {', '.join(known)})"
                raise self.fail(where, f"unknown key {key!r}{hint}")
        return value

    def script(self, document: object) -> ModelScript:
        top = self.mapping(document, "", _TOP_KEYS)
        if not top:
            raise self.fail("", "has neither deliveries nor turns: nothing to answer")
        entries = self.items(top.get("deliveries", []), "deliveries")
        return ModelScript(
            entries=tuple(self.entry(e, f"deliveries[{i}]") for i, e in enumerate(entries)),
            turns=self.turns(top.get("turns", []), "turns"),
        )

    def items(self, value: object, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, "must be a list")
        return value

    def entry(self, value: object, where: str) -> ScriptEntry:
        entry = self.mapping(value, where, _ENTRY_KEYS)
        if "match" not in entry or "turns" not in entry:
            raise self.fail(where, "needs both match and turns")
        match = self.mapping(entry["match"], f"{where}.match", _MATCH_KEYS)
        if len(match) != 1:
            raise self.fail(f"{where}.match", "must name exactly one of package_id, title_contains")
        ((key, wanted),) = match.items()
        if not isinstance(wanted, str) or not wanted:
            raise self.fail(f"{where}.match.{key}", "must be a non-empty string")
        return ScriptEntry(
            match=DeliveryMatch(**{key: wanted}),
            turns=self.turns(entry["turns"], f"{where}.turns"),
        )

    def turns(self, value: object, where: str) -> tuple[ScriptedTurn, ...]:
        return tuple(self.turn(t, f"{where}[{i}]") for i, t in enumerate(self.items(value, where)))

    def turn(self, value: object, where: str) -> ScriptedTurn:
        turn = self.mapping(value, where, _TURN_KEYS)
        text = turn.get("text", "")
        if not isinstance(text, str):
            raise self.fail(f"{where}.text", "must be a string")
        uses = tuple(
            self.tool_use(u, f"{where}.tool_use[{i}]")
            for i, u in enumerate(self.items(turn.get("tool_use", []), f"{where}.tool_use"))
        )
        if not text.strip() and not uses:
            raise self.fail(where, "needs a non-blank text or at least one tool_use")
        usage = self.mapping(turn.get("usage", {}), f"{where}.usage", _USAGE_KEYS)
        counts = {key: self.count(usage.get(key), f"{where}.usage.{key}") for key in _USAGE_KEYS}
        return ScriptedTurn(text=text, tool_uses=uses, **counts)

    def tool_use(self, value: object, where: str) -> ScriptedToolUse:
        use = self.mapping(value, where, _TOOL_USE_KEYS)
        name = use.get("name")
        if not isinstance(name, str) or not name.strip():
            raise self.fail(f"{where}.name", "must be a non-empty string (the tool's name)")
        tool_input = use.get("input", {})
        if not isinstance(tool_input, dict):
            raise self.fail(f"{where}.input", "must be an object (the tool's input)")
        return ScriptedToolUse(name=name, input=tool_input)

    def count(self, value: object, where: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(where, "must be a whole number >= 0")
        return value
