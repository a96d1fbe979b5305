"""The bill's targets from the last bench run's figures, with the default stack's
alarms as synthesized (a CDK synth: here, not among the unit tests)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import cost_doc
from bench.report import Figure


def test_a_small_teams_bill_meets_its_target_from_the_last_runs_figures() -> None:
    # docs/benchmarks.json: the figures of the last `make bench` (figure 9 is derived).
    data = json.loads(
        (Path(__file__).resolve().parents[2] / "docs" / "benchmarks.json").read_text("utf-8")
    )
    figures = [
        Figure.from_json(f) for f in data["figures"] if f["figure"] != cost_doc.TARGETS_FIGURE
    ]
    rows = {row.measure: row for row in cost_doc.targets_figure(figures).rows}
    small = rows["pipeline cost per 1 M deliveries at 1 M / month"]
    assert small.met is True and small.central <= 15
    assert rows["pipeline cost per 1 M deliveries at 100 M / month"].central <= 8
