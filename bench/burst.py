"""Figure 13's measurement: a burst of deliveries sent at once through the local front door.

The local stack (the emulated API Gateway in front of the production receiver, the
emulated AWS, the relay, workers and the demo MCP server), then ``deliveries`` new
deliveries, every one of them sent at the same moment (the sender's concurrency is the
burst). Measured: the share of first attempts answered 2xx (the inbox takes the burst;
the worker works it off later), the deliveries accepted per second, and the seconds
until every one is completed.
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.local_figures import _deliveries, _wait_done
from local.sender import SenderConfig, send_all
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
        sent = send_all(config, burst)
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
