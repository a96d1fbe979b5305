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
    assert len(rows) == 14, text
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
    # The tools' table: delivery, model calls, tickets, alerts, final state, check.
    tools = {
        label: cells.split()
        for line in rows
        for label, cells in [_split_label(line)]
        if label.startswith("ticket")
    }
    assert tools == {
        "ticket approved": ["3", "1", "1", "completed", "ok"],
        "ticket, killed before its record": ["3", "1", "1", "completed", "ok"],
    }, text
    # Both parked on the ticket call before anything acted; the listing shows the call,
    # each approval came from the CLI, and the kill landed between ticket and record.
    assert text.count("-> awaiting_approval; model calls 2; tickets 0") == 2, text
    listed = [line for line in text.splitlines() if ": tool open_ticket " in line]
    assert len(listed) == 1 and listed[0].endswith('{"customer":"acme","priority":"high"}')
    approvals = [
        line for line in text.splitlines() if "$ relaylink-receiver approvals approve" in line
    ]
    assert len(approvals) == 2 and all(line.endswith("(exit 0)") for line in approvals)
    assert text.count("its work item is sent: a worker resumes it") == 2
    assert "tickets 1; the tool's effect record: intent" in text
    # The resumed attempt asked the ticket system instead of posting again.
    lookups = [line for line in text.splitlines() if "-> tickets opened 1 (POSTs 1)" in line]
    assert [line.rpartition("asked the ticket system ")[2] for line in lookups] == [
        "0 time(s)",
        "1 time(s)",
    ], text


def _split_label(line: str) -> tuple[str, str]:
    """A table row's first column (labels have single spaces) and the rest."""
    label, _, rest = line.partition("  ")
    return label, rest
