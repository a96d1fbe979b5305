"""The simulator's contract in ``make test``: 400 seeds of each shipped workflow break
no invariant (``make simulate`` runs the acceptance's 2,000 of each, and the mutation
check; docs/simulation.md says which run has how many seeds).

Each seed is one fault schedule against the real core (docs/simulation.md); a failure
lists each violating seed with its first violation. Nothing is shrunk here (a long seed
takes minutes to shrink): ``relaylink-receiver simulate --workflow W --seeds 1
--first-seed SEED`` replays one and prints its shrunk schedule.
"""

from __future__ import annotations

import pytest

from local.simulate.campaign import simulate
from local.simulate.run import WORKFLOWS

pytestmark = pytest.mark.simulation
SEEDS = 400  # about a minute of the parallel phase; make simulate runs 2,000
PROCESSES = 2


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_simulated_seeds_break_no_invariant(workflow: str) -> None:
    summary = simulate([workflow], seeds=SEEDS, processes=PROCESSES, shrink_limit=0)

    assert summary.seeds == SEEDS
    assert summary.violating_seeds == 0, summary.text()
