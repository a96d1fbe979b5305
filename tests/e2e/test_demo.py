"""``make demo`` keeps working: the scenario runs and every invariant holds."""

from __future__ import annotations

import io

from local.demo import run_demo


def test_demo_scenario_ends_with_every_invariant_holding() -> None:
    out = io.StringIO()

    status = run_demo(out)

    text = out.getvalue()
    assert status == 0, text
    assert "every invariant holds" in text
    rows = [line for line in text.splitlines() if line.endswith("  ok") or "FAILED" in line]
    assert len(rows) == 8, text
    assert "receiver killed mid-flight" in text
