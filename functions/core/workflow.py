"""The workflow port: what processing a fetched package means for this receiver.

The worker loads one workflow at cold start from the ``WORKFLOW`` setting, written
``"package.module:attribute"``. The attribute is either an object with a ``run``
method (a :class:`Workflow`) or a factory that takes a :class:`WorkflowContext`
and returns one. The default (:mod:`functions.workflows.default`) archives
the package and sends one notification; replace it with your own agent run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from functions.core.clock import Clock

if TYPE_CHECKING:
    from functions.core.effects import EffectLedger
    from functions.core.models import WorkItem
    from functions.core.package import Package


class Workflow(Protocol):
    """Processes one delivery's package; returns when its completion point is reached.

    Every external effect goes through ``effects.run`` so that a retry of the same
    delivery never repeats it. Raise a :class:`~functions.core.errors.TransientError`
    to be retried later, a :class:`~functions.core.errors.PermanentError` to give up.
    Anything else raised counts as transient (retried, then dead-lettered).
    """

    def run(self, work: WorkItem, package: Package, effects: EffectLedger) -> None: ...


@dataclass(frozen=True, slots=True)
class WorkflowContext:
    """What the worker's settings offer a workflow factory."""

    notify_url: str | None
    archive_bucket: str | None
    allow_insecure_loopback: bool
    timeout_seconds: float
    clock: Clock


def load_workflow(spec: str, context: WorkflowContext) -> Workflow:
    """Import ``module:attribute`` and return the workflow it names.

    Raises:
        ValueError: The spec is malformed or names nothing usable (fail at cold start).
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"workflow setting must be 'module:attribute', got {spec!r}")
    try:
        target: object = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"workflow {spec!r} cannot be imported") from exc
    if not hasattr(target, "run") and callable(target):
        target = target(context)
    if not callable(getattr(target, "run", None)):
        raise ValueError(f"workflow {spec!r} has no run method")
    workflow: Workflow = target  # type: ignore[assignment]
    return workflow
