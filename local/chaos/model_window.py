"""The model-call window: which model step runs a worker kill interrupted, and whether
every rerun of the model step is one of those.

A run is a step record's ``runs`` number. The worker runs a batch concurrently, so
one kill can interrupt several runs (one per delivery it held inside the step). Run
``n`` of a delivery is a rerun when run ``n - 1`` was started and never recorded; the
invariant is that run ``n - 1`` was in flight at a kill. Then reruns can never
outnumber the interrupted runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from functions.core.ports.steps import StepRecord

Run = tuple[str, int]  # (delivery id, run number)


def interrupted_runs(started: Iterable[StepRecord], *, process_started_at: float) -> set[Run]:
    """The runs a killed worker had in flight, from the step records left started and
    unrecorded once it died (read before any successor runs): those it started itself.
    A run started before the process was (an earlier kill's, not yet rerun) is not."""
    born = int(process_started_at)  # step records keep whole seconds
    return {(r.delivery_id, r.runs) for r in started if r.started_at >= born}


def unattributed_reruns(reruns: Iterable[Run], interrupted: set[Run]) -> list[Run]:
    """Reruns whose previous run no kill interrupted."""
    return [(d, run) for d, run in reruns if (d, run - 1) not in interrupted]


def uncounted_calls(calls: Mapping[str, int], counted: Mapping[str, int]) -> dict[str, int]:
    """Per delivery, the emulator's calls its spend record does not count (should be none:
    a call is counted before it is sent)."""
    missing = {d: n - counted.get(d, 0) for d, n in calls.items()}
    return {d: n for d, n in missing.items() if n > 0}


def model_figures(
    calls: Mapping[str, int],
    *,
    reruns: Sequence[Run],
    interrupted: set[Run],
    kills_in_window: int,
    counted: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """The report's ``model`` figures: the emulator's calls per delivery id, the
    reruns the worker logged, the runs kills interrupted and the kills that did; with
    ``counted`` (each delivery's spend record), the calls counted and those not."""
    spend = {}
    if counted is not None:
        spend = {
            "calls_counted": sum(counted.values()),
            "calls_uncounted": sum(uncounted_calls(calls, counted).values()),
        }
    return {
        **spend,
        "calls": sum(calls.values()),
        "deliveries_called": len(calls),
        "deliveries_called_more_than_once": sum(1 for n in calls.values() if n > 1),
        "reruns": len(reruns),
        "kills_in_window": kills_in_window,
        "steps_interrupted": len(interrupted),
        "reruns_unattributed": len(unattributed_reruns(reruns, interrupted)),
    }


def model_violations(reruns: Sequence[Run], interrupted: set[Run]) -> list[str]:
    """More reruns than interrupted runs, and each rerun of a run no kill interrupted."""
    violations = []
    if len(reruns) > len(interrupted):
        violations.append(
            f"model step reran {len(reruns)} times, more than the "
            f"{len(interrupted)} runs worker kills interrupted"
        )
    violations += [
        f"{delivery_id}: model step run {run} reran a run no kill interrupted"
        for delivery_id, run in unattributed_reruns(reruns, interrupted)
    ]
    return violations
