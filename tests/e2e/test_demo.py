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
    assert len(rows) == 12, text
    assert "receiver killed mid-flight" in text
    # The forged request is narrated as never stored, not as a Python None.
    assert "answers 401; (not stored); effects 0; ok" in text
    assert "None" not in text
    # The agent table: delivery, model calls, alerts, final state, check.
    agent = {
        label: cells.split()
        for line in rows
        for label, cells in [_split_label(line)]
        if label.startswith(("agent", "killed", "budget"))
    }
    assert agent == {
        "agent, normal": ["1", "1", "completed", "ok"],
        "killed mid-model-call": ["2", "1", "completed", "ok"],
        "killed after the model answer": ["1", "1", "completed", "ok"],
        "budget spent, then raised": ["1", "1", "completed", "ok"],
    }, text
    assert "model steps left: mid-call started, answered recorded" in text
    assert "last error budget_exhausted; model calls 0" in text


def _split_label(line: str) -> tuple[str, str]:
    """A table row's first column (labels have single spaces) and the rest."""
    label, _, rest = line.partition("  ")
    return label, rest
