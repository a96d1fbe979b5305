"""The chaos run's model-call window: interrupted runs, and reruns attributed to them."""

from __future__ import annotations

from functions.core.ports.steps import StepRecord, StepStatus
from local.chaos.model_window import (
    interrupted_runs,
    model_figures,
    model_violations,
    unattributed_reruns,
    uncounted_calls,
)


def started(delivery_id: str, runs: int, started_at: int) -> StepRecord:
    return StepRecord(delivery_id, "model", StepStatus.STARTED, runs, started_at)


def test_a_kill_interrupts_every_run_its_process_started_and_not_an_older_one() -> None:
    left = [started("d1", 1, 1000), started("d2", 2, 1005), started("d3", 1, 999)]

    # The killed process started at 1000.7: d3's run is an earlier process's.
    assert interrupted_runs(left, process_started_at=1000.7) == {("d1", 1), ("d2", 2)}


def test_one_kill_interrupting_two_runs_allows_two_reruns() -> None:
    interrupted = {("d1", 1), ("d2", 1)}
    reruns = [("d1", 2), ("d2", 2)]

    assert model_violations(reruns, interrupted) == []
    figures = model_figures(
        {"d1": 2, "d2": 2, "d3": 1}, reruns=reruns, interrupted=interrupted, kills_in_window=1
    )
    assert figures == {
        "calls": 5,
        "deliveries_called": 3,
        "deliveries_called_more_than_once": 2,
        "reruns": 2,
        "kills_in_window": 1,
        "steps_interrupted": 2,
        "reruns_unattributed": 0,
    }


def test_a_rerun_of_a_run_no_kill_interrupted_is_a_violation() -> None:
    interrupted = {("d1", 1), ("d2", 1)}
    # d1's run 3 reruns run 2, which no kill interrupted (d1's run 1 was).
    reruns = [("d1", 2), ("d1", 3)]

    assert unattributed_reruns(reruns, interrupted) == [("d1", 3)]
    assert model_violations(reruns, interrupted) == [
        "d1: model step run 3 reran a run no kill interrupted"
    ]


def test_more_reruns_than_interrupted_runs_is_a_violation() -> None:
    violations = model_violations([("d1", 2), ("d1", 3)], {("d1", 1)})

    assert (
        violations[0] == "model step reran 2 times, more than the 1 runs worker kills interrupted"
    )
    assert len(violations) == 2


def test_calls_the_spend_records_do_not_count_are_reported() -> None:
    calls = {"d1": 2, "d2": 1, "d3": 1}
    # d1's rerun is counted, d2 counted a call killed before sending; d3 lost one.
    counted = {"d1": 2, "d2": 2, "d3": 0}
    assert uncounted_calls(calls, counted) == {"d3": 1}
    figures = model_figures(calls, reruns=[], interrupted=set(), kills_in_window=0, counted=counted)
    assert (figures["calls_counted"], figures["calls_uncounted"]) == (4, 1)
