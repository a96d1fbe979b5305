"""Figure 11's measure on a small run: the default workflow stays at 9 write units per
delivery, and which write costs what (the bench's own meter and pipeline)."""

from __future__ import annotations

from bench import pipeline_calls
from bench.figures import WRITE_UNITS_TARGET
from functions.core.setting_defaults import DEFAULT_WORKFLOW


def test_the_default_workflow_writes_nine_units_per_delivery() -> None:
    units = pipeline_calls.measure(deliveries=2, workflow=DEFAULT_WORKFLOW).write_units
    assert WRITE_UNITS_TARGET.met(units.total)
    assert (units.total, units.table_wru, units.index_wru) == (9, 6, 3)
    rows = {row["write"]: row["table_wru"] + row["index_wru"] for row in units.breakdown()}
    # The completion moves the index entry (open -> completed: a delete and a put) and
    # marks the repeatable archive done: no effect record is written.
    assert rows["worker: Update inbox (processing -> completed)"] == 3
    assert not [write for write in rows if "effect#" in write]
