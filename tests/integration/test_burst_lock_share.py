"""Figure 13's reading of the emulator's lock: shares of the first attempts' time held
by the receipts and by everything else, and a receipt's mean wait for it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from bench import burst
from bench.local_figures import CpuMeter


def _meter(**fields: object) -> CpuMeter:
    return cast("CpuMeter", SimpleNamespace(**fields))


def test_the_lock_is_split_between_the_receipts_and_everything_else_over_the_elapsed_time() -> None:
    meter = _meter(
        elapsed=10.0,
        lock_held={"TransactWriteItems": 2.0, "UpdateItem": 3.0, "ReceiveMessage": 0.5},
        lock_waited={"TransactWriteItems": 40.0, "UpdateItem": 9.0},
        calls_per_delivery={"TransactWriteItems": 0.5, "UpdateItem": 0.075},
    )

    assert burst._lock_held_share(meter) == {"receipts": 0.2, "everything else": 0.35}
    # The receipts' own waits over the receipts' own calls: 40 s over 200 calls (0.5 of
    # a call for each of 400 deliveries).
    assert burst._receipt_lock_wait_ms(meter, 400) == 200.0


def test_a_run_without_receipts_reports_no_wait_rather_than_dividing_by_zero() -> None:
    meter = _meter(elapsed=0.0, lock_held={}, lock_waited={}, calls_per_delivery={})

    assert burst._lock_held_share(meter) == {"receipts": 0.0, "everything else": 0.0}
    assert burst._receipt_lock_wait_ms(meter, 400) == 0.0
