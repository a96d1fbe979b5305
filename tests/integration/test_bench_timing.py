"""The bench's own arithmetic of time: overlapping MCP fetches, warm p99 ratios."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bench.local_figures import WarmRun
from bench.worker_mcp import McpTimer


class _SlowSource:
    async def get_package(self, mcp_url: str, package_id: str) -> Any:
        await asyncio.sleep(0.05)
        return package_id

    def unreachable(self, mcp_url: str) -> bool:
        return False


@contextlib.asynccontextmanager
async def _factory(deadline: Any) -> AsyncIterator[_SlowSource]:
    yield _SlowSource()


def test_overlapping_fetches_count_once_in_the_mcp_wall_time() -> None:
    timer = McpTimer(_factory)

    async def batch() -> None:
        async with timer(None) as source:  # type: ignore[arg-type]
            await asyncio.gather(*(source.get_package("u", str(i)) for i in range(10)))

    asyncio.run(batch())
    assert timer.fetches == 10
    # Ten 50 ms fetches side by side: about 50 ms of wall time, not the 500 ms summed.
    assert 0.045 <= timer.seconds < 0.25


def test_the_warm_ratio_is_of_the_two_p99s() -> None:
    ours = [10.0] * 99 + [20.0]
    baseline = [300.0] * 99 + [400.0]
    run = WarmRun(
        ours_warm_up_ms=[500.0], baseline_warm_up_ms=[900.0], ours_ms=ours, baseline_ms=baseline
    )
    assert run.p99_ratio == pytest.approx((300 + 0.01 * 100) / (10 + 0.01 * 10))
    assert run.to_json()["baseline"]["warm_up_ms"]["maximum"] == 900.0
