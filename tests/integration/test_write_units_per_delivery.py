"""Figure 11's measure on a small run: the default workflow writes 7 units per delivery
(the target: at most 8), and which write costs what (the bench's own meter and
pipeline)."""

from __future__ import annotations

from bench import pipeline_calls
from bench.figures import WRITE_UNITS_TARGET
from functions.core import settings_table


def test_the_default_workflow_writes_seven_units_per_delivery() -> None:
    units = pipeline_calls.measure(
        deliveries=2, workflow=settings_table.WORKFLOW.default
    ).write_units
    assert WRITE_UNITS_TARGET.met(units.total)
    assert (units.total, units.table_wru, units.index_wru) == (7, 6, 1)
    rows = {row["write"]: row["table_wru"] + row["index_wru"] for row in units.breakdown()}
    # The receipt lists nothing in the index: its two items, doubled in the transaction.
    assert rows["receiver: Transact Put inbox (new, pending)"] == 2
    # The completion puts the item's only index entry (completed; no open entry to
    # delete); the archive workflow has no effect: no effect record is written. It
    # also records the package (the item still under 1 KB with the measured package).
    assert rows["worker: Update inbox (processing -> completed)"] == 2
    # No write of the package record before the run: the claim is the only other
    # update of the inbox item.
    assert rows["worker: Update inbox (pending -> processing)"] == 1
    assert "worker: Update inbox (processing -> processing)" not in rows
    assert not [write for write in rows if write.startswith("worker: Transact")]
    assert not [write for write in rows if "effect#" in write]
