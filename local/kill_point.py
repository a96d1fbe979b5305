"""Kill points: SIGKILL the local worker once, at a named point of your own workflow.

``relaylink-receiver local --kill-worker WHEN:KIND:NAME`` (and ``chaos``), where
``WHEN`` is ``before`` or ``after`` and ``KIND:NAME`` names one record of the ledger:

| point | the worker dies ... |
| --- | --- |
| ``before:step:NAME`` | as step ``NAME`` starts, before its work ran |
| ``after:step:NAME`` | once step ``NAME``'s work returned, before its result is recorded |
| ``before:effect:NAME`` | before effect ``NAME``'s intent is recorded: nothing was done |
| ``after:effect:NAME`` | once effect ``NAME`` was applied, before its done record |
| ``before:tool:NAME`` | after any approval, before acting tool ``NAME`` runs (its intent) |
| ``after:tool:NAME`` | once tool ``NAME`` returned, before its record (done or result) |

It reuses the demo's mechanism: the AWS emulator *holds* the DynamoDB write that
would record that point (:meth:`~local.aws_emulator.faults.FaultInjector.hold_next`);
the supervisor sees the hold taken, SIGKILLs the worker and restarts it, and the held
write, its caller dead, is dropped. The first matching write, of any delivery, is the
one: the kill happens once, then every other hold is cleared. A tool's records are
named after its tool-use id (``tool.<digest>``), which only the model's answer
gives: ``tool`` points need the local Bedrock emulator (the agent workflow, or
``--model-script``), which tells the supervisor each tool use it answers.
An effect in mode ``repeatable`` keeps no record: no point of it can be held.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypeVar

from functions.core import table_layout
from functions.core.adapters.dynamodb_steps import SK_STEP_PREFIX
from functions.workflows.tool_loop import tool_record_name

# What tells the adapters' writes apart (functions/core/adapters/dynamodb_steps.py and
# dynamodb_effects.py): a step's start from its result, an effect's intent from its done.
_STEP_START: Final = "SET #status = :started"
_STEP_RESULT: Final = "recorded_at = :now"
_EFFECT_DONE: Final = "done_at = :now"
# Held this long at most: a kill point whose worker is not killed (the stack stopping)
# lets the write through rather than hang the worker.
HOLD_SECONDS: Final = 60.0
WATCH_SECONDS: Final = 0.05
E = TypeVar("E", bound=StrEnum)


class When(StrEnum):
    BEFORE = "before"
    AFTER = "after"


class Kind(StrEnum):
    STEP = "step"
    EFFECT = "effect"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class WriteHold:
    """One DynamoDB write to hold: its operation, and texts its JSON body contains."""

    operation: str
    containing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class KillPoint:
    """Where the worker dies: ``before|after`` ``step|effect|tool`` ``NAME``."""

    when: When
    kind: Kind
    name: str

    @classmethod
    def parse(cls, text: str) -> KillPoint:
        """``before:tool:open_ticket`` -> the point.

        Raises:
            ValueError: one line saying what is wrong, with the nearest word.
        """
        parts = text.split(":", 2)
        if len(parts) != 3 or not parts[2].strip():
            raise ValueError(
                f"{text!r} is not WHEN:KIND:NAME (e.g. after:tool:open_ticket,"
                " before:step:model, after:effect:alert)"
            )
        when, kind, name = parts
        return cls(_word(When, when, "WHEN"), _word(Kind, kind, "KIND"), name.strip())

    def __str__(self) -> str:
        return f"{self.when}:{self.kind}:{self.name}"

    def holds(self, record: str | None = None) -> tuple[WriteHold, ...]:
        """The writes that record this point for the record named ``record`` (by default
        ``name``; a tool point's records are its tool uses', see :meth:`for_tool_use`)."""
        record = record or self.name
        step = f'"{SK_STEP_PREFIX}{record}"'
        effect = f'"{table_layout.SK_EFFECT_PREFIX}{record}"'
        before = self.when is When.BEFORE
        if self.kind is Kind.STEP:
            return (WriteHold("UpdateItem", (step, _STEP_START if before else _STEP_RESULT)),)
        if before:
            return (WriteHold("PutItem", (effect,)),)
        done = WriteHold("UpdateItem", (effect, _EFFECT_DONE))
        if self.kind is Kind.EFFECT:
            return (done,)
        # An acting tool's done record comes before its step's result; a read-only
        # tool has only the result.
        return (done, WriteHold("UpdateItem", (step, _STEP_RESULT)))

    def for_tool_use(self, tool: str, tool_use_id: str) -> tuple[WriteHold, ...]:
        """The writes to hold for one tool use the model asked for (none if not this
        point's tool)."""
        if self.kind is not Kind.TOOL or tool != self.name:
            return ()
        return self.holds(tool_record_name(tool_use_id))


def _word(enum: type[E], word: str, part: str) -> E:
    try:
        return enum(word)
    except ValueError:
        known = [member.value for member in enum]
        near = difflib.get_close_matches(word, known, n=1)
        hint = f"did you mean {near[0]!r}?" if near else f"one of {', '.join(known)}"
        raise ValueError(f"{part} {word!r} is unknown: {hint}") from None


class KillPointWatch:
    """Arms a kill point's holds and SIGKILLs the worker once one is taken.

    Args:
        point: the kill point.
        hold: arms one hold (the AWS emulator's ``hold_next``).
        clear: forgets the holds no request has taken (``clear_holds``).
        held: how many holds requests have taken so far (``counts()["held"]``).
        kill: SIGKILLs the worker (the supervisor restarts it); returns its pid.
        announce: told one line when the kill is done.
    """

    def __init__(
        self,
        point: KillPoint,
        *,
        hold: Callable[[str, Sequence[str], float], None],
        clear: Callable[[], None],
        held: Callable[[], int],
        kill: Callable[[], int],
        announce: Callable[[str], None],
    ) -> None:
        self.point = point
        self._hold, self._clear, self._held, self._kill = hold, clear, held, kill
        self._announce = announce
        self._lock = threading.Lock()
        self._fired = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.killed_pid = 0

    @property
    def fired(self) -> bool:
        return self._fired.is_set()

    def start(self) -> None:
        """Arm the point (a step or effect point at once; a tool point per tool use)."""
        if self.point.kind is not Kind.TOOL:
            self._arm(self.point.holds())
        self._thread = threading.Thread(target=self._watch, name="kill-point", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def tool_used(self, delivery_id: str, tool: str, tool_use_id: str) -> None:
        """A tool use the model was told to ask for: arm its holds if it is ours."""
        self._arm(self.point.for_tool_use(tool, tool_use_id))

    def _arm(self, holds: Sequence[WriteHold]) -> None:
        with self._lock:
            if self._fired.is_set():
                return
            for write in holds:
                self._hold(write.operation, write.containing, HOLD_SECONDS)

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_SECONDS):
            try:
                taken = self._held()
            except OSError:
                continue  # the emulator restarting or stopping: ask again
            if taken:
                with self._lock:
                    self._fired.set()
                    self.killed_pid = self._kill()
                    self._clear()
                self._announce(f"kill point {self.point}: SIGKILLed worker pid {self.killed_pid}")
                return
