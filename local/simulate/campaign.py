"""Many seeds: run them (on several processes when asked), then shrink what failed.

Seeds run in order and are reported in order, whatever the number of processes: each
seed is a pure function of (workflow, seed, deliveries), so the summary's content does
not depend on how the work was split (only its seconds do).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from local.simulate.report import Summary, Violation
from local.simulate.run import SeedResult, run_seed
from local.simulate.shrink import invariant_of, shrink

CHUNK: Final = 25


def _run(task: tuple[str, int, int]) -> SeedResult:
    workflow, seed, deliveries = task
    return run_seed(workflow, seed, deliveries=deliveries)


def _results(tasks: Sequence[tuple[str, int, int]], processes: int) -> Iterator[SeedResult]:
    if processes <= 1:
        yield from map(_run, tasks)
        return
    # Spawned, not forked: a test run's parent holds threads (servers of other tests)
    # whose locks a fork would copy held.
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        yield from pool.imap(_run, tasks, chunksize=CHUNK)


def simulate(
    workflows: Sequence[str],
    *,
    seeds: int,
    first_seed: int = 0,
    deliveries: int = 4,
    processes: int = 1,
    shrink_limit: int = 3,
    progress: Callable[[str], None] | None = None,
) -> Summary:
    """Run ``seeds`` seeds of each workflow; shrink the first ``shrink_limit`` failing
    seeds of each (the others are listed with their seed, which replays them)."""
    say = progress or (lambda _line: None)
    summary = Summary(tuple(workflows), first_seed)
    started = time.monotonic()
    failing: list[SeedResult] = []
    for workflow in workflows:
        tasks = [(workflow, seed, deliveries) for seed in range(first_seed, first_seed + seeds)]
        for result in _results(tasks, processes):
            summary.seeds += 1
            summary.faults.update(result.counts)
            if result.violations:
                summary.violating_seeds += 1
                summary.by_invariant.update({invariant_of(v) for v in result.violations})
                failing.append(result)
        say(f"{workflow}: {seeds} seeds, {sum(r.workflow == workflow for r in failing)} violating")
    summary.run_seconds = time.monotonic() - started
    shrunk: dict[str, int] = {}
    for result in failing:
        first, *others = result.violations
        if shrunk.get(result.workflow, 0) < shrink_limit:
            shrunk[result.workflow] = shrunk.get(result.workflow, 0) + 1
            say(f"shrinking {result.workflow} seed {result.seed} ({len(result.faults)} faults)")
            faults = shrink(
                result.workflow, result.seed, result.faults, first, deliveries=deliveries
            )
            summary.violations.append(
                Violation(result.workflow, result.seed, first, tuple(others), tuple(faults), True)
            )
        else:
            summary.violations.append(
                Violation(result.workflow, result.seed, first, tuple(others), result.faults, False)
            )
    summary.seconds = time.monotonic() - started
    return summary
