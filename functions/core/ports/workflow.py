"""The workflow port: what processing a fetched package means for this receiver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from functions.core.model_step import ModelReply
from functions.core.models import WorkItem
from functions.core.package import Package
from functions.core.ports.effects import EffectMode
from functions.core.ports.model import ModelCaller

PromptT = TypeVar("PromptT")


class Ledger(Protocol):
    """What a workflow may do with one delivery's effects and steps; the effect ledger
    (:class:`functions.core.effects.EffectLedger`) is the one the worker hands it."""

    @property
    def delivery_id(self) -> str: ...

    @property
    def expires_at(self) -> int:
        """When the delivery's records expire (0: not known)."""
        ...

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
        """Apply effect ``name`` unless this delivery already applied it."""
        ...

    def step(self, name: str, fn: Callable[[], object], *, label: str = "") -> Any:
        """The recorded result of step ``name``, calling ``fn`` only when there is none
        (``label``: its readable name, kept beside it)."""
        ...

    def model(self, name: str, prompt: PromptT, client: ModelCaller[PromptT]) -> ModelReply:
        """The recorded reply of model step ``name``, asking ``client`` only when there is none."""
        ...


class Workflow(Protocol):
    """Processes one delivery's package; returns when its completion point is reached.

    Every external effect goes through ``effects.run`` so that a retry of the same
    delivery never repeats it. Raise a :class:`~functions.core.errors.TransientError`
    to be retried later, a :class:`~functions.core.errors.PermanentError` to give up.
    Anything else raised counts as transient (retried, then dead-lettered).
    """

    def run(self, work: WorkItem, package: Package, effects: Ledger) -> None: ...


def has_effects(workflow: object) -> bool:
    """Whether ``workflow`` may act outside the stack (every workflow may, unless it
    declares ``has_effects = False``). One that may not has its package recorded by its
    delivery's completion, not by a write of its own before it runs
    (:mod:`functions.core.process`)."""
    return bool(getattr(workflow, "has_effects", True))
