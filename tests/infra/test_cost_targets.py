"""The bill's targets from the last bench run's figures, with the default stack's
alarms as synthesized (a CDK synth: here, not among the unit tests)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import cost_doc
from bench.report import Figure, Target


def test_the_bills_targets_are_judged_from_the_last_runs_figures() -> None:
    # docs/benchmarks.json: the figures of the last `make bench` (figure 9 is derived).
    data = json.loads(
        (Path(__file__).resolve().parents[2] / "docs" / "benchmarks.json").read_text("utf-8")
    )
    figures = [
        Figure.from_json(f) for f in data["figures"] if f["figure"] != cost_doc.TARGETS_FIGURE
    ]
    rows = {row.measure: row for row in cost_doc.targets_figure(figures).rows}
    # Whether a target is met is `make bench`'s to say (figure 9, the closing note);
    # here: each is judged against its own, unchanged, bound.
    for measure, bound in (
        ("pipeline cost per 1 M deliveries at 1 M / month", 15),
        ("pipeline cost per 1 M deliveries at 100 M / month", 8),
        ("default install cost per 1 M deliveries at 100 M / month", 8),
        ("default install cost per 1 M deliveries at 1 M / month", 12),
    ):
        row = rows[measure]
        assert row.target == Target("<=", bound), measure
        assert row.met is (row.central <= bound), measure
