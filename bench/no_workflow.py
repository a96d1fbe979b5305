"""A workflow that does nothing: the worker carrying a delivery without the workflow's
effects (figure 8 measures the worker with it beside the default workflow, so that
docs/cost.md bills the pipeline and the workflow's own work on separate lines).

The worker loads it by ``WORKFLOW=bench.no_workflow:workflow``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from functions.core.models import WorkItem
    from functions.core.package import Package
    from functions.core.ports.workflow import Ledger

SPEC: Final = "bench.no_workflow:workflow"


class NoWorkflow:
    """Completes every delivery as soon as its package is fetched."""

    def run(self, work: WorkItem, package: Package, effects: Ledger) -> None:
        return None


workflow: Final = NoWorkflow()
