"""The workflow port: what processing a fetched package means for this receiver."""

from __future__ import annotations

from typing import Protocol

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
