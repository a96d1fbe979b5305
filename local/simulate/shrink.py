"""Shrinking a failing seed's fault list: delta debugging (Zeller's ddmin).

A seed that breaks an invariant is replayed with subsets of its faults (each replay is
deterministic: :class:`~local.simulate.schedule.Schedule` injects exactly the given
faults at their sites and calls); a subset that still breaks the same invariant
replaces the list. What is left is a schedule whose every fault matters (or the run
budget ran out first), which is what a person reads to understand the violation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final

from local.simulate.faults import Fault
from local.simulate.run import run_seed

DEFAULT_RUNS: Final = 120


def invariant_of(violation: str) -> str:
    """The invariant a violation line names (its first word)."""
    return violation.split(":", 1)[0]


def ddmin(
    faults: Sequence[Fault], fails: Callable[[Sequence[Fault]], bool], *, runs: int
) -> list[Fault]:
    """A smaller list for which ``fails`` still holds, in at most ``runs`` tests."""
    items = list(faults)
    if runs > 0 and fails([]):
        return []
    runs -= 1
    chunks = 2
    while len(items) >= 2 and runs > 0:
        size = math.ceil(len(items) / chunks)
        parts = [items[start : start + size] for start in range(0, len(items), size)]
        reduced = False
        for part in parts:
            runs -= 1
            if fails(part):
                items, chunks, reduced = part, 2, True
                break
            if runs <= 0:
                break
        if not reduced and runs > 0 and len(parts) > 2:
            for part in parts:
                complement = [f for f in items if f not in part]
                runs -= 1
                if fails(complement):
                    items, chunks, reduced = complement, max(chunks - 1, 2), True
                    break
                if runs <= 0:
                    break
        if not reduced:
            if chunks >= len(items):
                break
            chunks = min(len(items), chunks * 2)
    return items


def shrink(
    workflow: str,
    seed: int,
    faults: Sequence[Fault],
    violation: str,
    *,
    deliveries: int,
    runs: int = DEFAULT_RUNS,
) -> list[Fault]:
    """The fewest faults found that still break ``violation``'s invariant."""
    invariant = invariant_of(violation)

    def fails(subset: Sequence[Fault]) -> bool:
        result = run_seed(workflow, seed, deliveries=deliveries, replay=subset)
        return any(invariant_of(v) == invariant for v in result.violations)

    return ddmin(faults, fails, runs=runs)
