"""Figure 13's measurement: a burst of deliveries sent at once through the local front door.

The local stack (the emulated API Gateway in front of the production receiver, the
emulated AWS, the relay, workers and the demo MCP server), then ``deliveries`` new
deliveries, every one of them sent at the same moment (the sender's concurrency is the
burst). Measured: the share of first attempts answered 2xx (the inbox takes the burst;
the worker works it off later), the deliveries accepted per second, and the seconds
until every one is completed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from bench.local_figures import _deliveries, _wait_done
from local.sender import Delivery, Sender, SenderConfig, Summary
from local.stack import LocalStack
from local.stack_options import StackOptions


@dataclass(frozen=True)
class BurstResult:
    deliveries: int
    first_attempts_2xx: float  # share of the deliveries whose first attempt got a 2xx
    accepted_per_second: float
    seconds_until_all_acknowledged: float
    seconds_until_all_completed: float
    answers: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# Deliveries per simulated sender (one HTTP client and its connection pool each). One
# client for the whole burst spent most of the bench's CPU in httpcore's pool, which
# looks at every connection for every request: quadratic in the burst, it delayed the
# sending itself past RelayLink's timeout. RelayLink sends from many machines anyway.
SENDER_DELIVERIES: Final = 25


def _send_burst(config: SenderConfig, burst: list[Delivery]) -> Summary:
    """Every delivery at once, from senders of :data:`SENDER_DELIVERIES` each."""

    async def run() -> Summary:
        started = time.monotonic()
        chunks = [
            burst[start : start + SENDER_DELIVERIES]
            for start in range(0, len(burst), SENDER_DELIVERIES)
        ]
        senders = [
            Sender(dataclasses.replace(config, concurrency=len(chunk), seed=(config.seed or 0) + n))
            for n, chunk in enumerate(chunks)
        ]
        try:
            parts = await asyncio.gather(
                *(sender.deliver_many(chunk) for sender, chunk in zip(senders, chunks, strict=True))
            )
        finally:
            await asyncio.gather(*(sender.aclose() for sender in senders))
        results = tuple(result for part in parts for result in part.results)
        return Summary(results, time.monotonic() - started)

    return asyncio.run(run())


def measure(*, deliveries: int) -> BurstResult:
    run_dir = Path(tempfile.mkdtemp(prefix="relaylink-burst-"))
    options = StackOptions(worker_concurrency=4, log_level="WARNING", run_dir=str(run_dir))
    with LocalStack(options) as stack:
        state = stack.state
        burst = _deliveries(stack, deliveries, random.Random(13))
        config = SenderConfig(
            url=state.webhook_url,
            secrets=tuple(state.signing_secrets),
            concurrency=deliveries,  # all at once
            duplicate_rate=0.0,
            time_scale=360.0,
            seed=13,
        )
        started = time.monotonic()
        sent = _send_burst(config, burst)
        acknowledged = time.monotonic() - started
        _wait_done(stack, burst, timeout=900.0)
        completed = time.monotonic() - started
    first_2xx = sum(
        1
        for result in sent.results
        if result.attempts and (result.attempts[0].status or 0) // 100 == 2
    )
    return BurstResult(
        deliveries=deliveries,
        first_attempts_2xx=first_2xx / deliveries,
        accepted_per_second=deliveries / acknowledged,
        seconds_until_all_acknowledged=acknowledged,
        seconds_until_all_completed=completed,
        answers=dict(sent.answers),
    )
