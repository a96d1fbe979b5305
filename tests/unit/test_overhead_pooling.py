"""Figure 2 pools runs of several processes: every block's ratio and every call count
once, and each process's own figure stays visible."""

from __future__ import annotations

import pytest

from bench import overhead
from bench.stats import summarize


def _run(blocks: list[float], handler: list[float], bare: list[float]) -> overhead.OverheadResult:
    return overhead.OverheadResult(
        ratios={overhead.SAME_CONFIG: summarize(blocks)},
        handler_us=summarize(handler),
        bare_us={overhead.SAME_CONFIG: summarize(bare)},
        blocks=len(blocks),
        per_block=2,
        handler_calls=len(handler),
        bare_calls={overhead.SAME_CONFIG: len(bare)},
        process_ratios={overhead.SAME_CONFIG: [summarize(blocks).median]},
        block_ratios={overhead.SAME_CONFIG: blocks},
        handler_samples=handler,
        bare_samples={overhead.SAME_CONFIG: bare},
    )


def test_pooled_runs_give_the_median_of_all_blocks_and_keep_each_process_figure() -> None:
    low = _run([1.20, 1.21, 1.22], [1000.0, 1010.0], [830.0, 835.0])
    high = _run([1.30, 1.31, 1.40], [1100.0, 1120.0], [840.0, 845.0])
    pooled = overhead.pooled([low, high, low])

    ratio = pooled.ratios[overhead.SAME_CONFIG]
    assert ratio.n == 9
    assert ratio.median == pytest.approx(1.22)  # not the median of the three process figures
    assert pooled.process_ratios[overhead.SAME_CONFIG] == [1.21, 1.31, 1.21]
    assert pooled.processes == 3
    assert pooled.blocks == 9
    assert pooled.handler_us.n == 6 and pooled.handler_calls == 6
    assert pooled.bare_us[overhead.SAME_CONFIG].maximum == 845.0
    assert pooled.to_json()["process_ratios"] == {overhead.SAME_CONFIG: [1.21, 1.31, 1.21]}
