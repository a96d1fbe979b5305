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
import contextlib
import dataclasses
import random
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from bench import lean_client
from bench.local_figures import CpuMeter, _deliveries, _wait_done
from functions.core.models import State
from local import stack_probes
from local.sender import Delivery, Sender, SenderConfig, Summary
from local.stack import LocalStack
from local.stack_options import StackOptions

# Receiver processes behind the local front door: one per core. In AWS the burst gets as
# many Lambda environments as it needs; here every process shares the same two cores.
FRONT_DOOR_CONTAINERS: Final = 2


@dataclass(frozen=True)
class BurstResult:
    deliveries: int
    first_attempts_2xx: float  # share of the deliveries whose first attempt got a 2xx
    accepted_per_second: float
    seconds_until_all_acknowledged: float
    seconds_until_all_completed: float
    answers: dict[str, int]
    first_attempt_seconds_p50: float
    first_attempt_seconds_max: float
    # While the first attempts were out: CPU ms per delivery of the burst, by process;
    # the emulator's ms answering, per delivery, by operation; deliveries the worker
    # side completed meanwhile.
    first_attempts_cpu_ms: dict[str, float] = field(default_factory=dict)
    first_attempts_emulator_ms: dict[str, float] = field(default_factory=dict)
    completed_during_first_attempts: int = 0
    # Meanwhile, the emulator's one-at-a-time lock: the share of the time it was held by
    # the receipts' TransactWriteItems and by everything else (the worker side's calls),
    # and how long a receipt's TransactWriteItems waited for it on average (ms).
    emulator_lock_held_share: dict[str, float] = field(default_factory=dict)
    receipt_lock_wait_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# Deliveries per simulated sender (one HTTP client and its connection pool each), for the
# retries. One client for many deliveries spent most of the bench's CPU in httpcore's
# pool, which looks at every connection for every request: quadratic in the burst.
SENDER_DELIVERIES: Final = 25
# The share of a burst's first attempts answered 2xx with the worker side running, on
# 2 cores that also run the emulator, the worker side and the sender.
TARGET_SHARE_WORKER_RUNNING: Final = 90.0
# The receipt's one call; nothing else the burst's stack makes is a transaction.
RECEIPT_OPERATION: Final = "TransactWriteItems"


def _send_burst(config: SenderConfig, burst: list[Delivery]) -> Summary:
    """Every delivery at once on RelayLink's schedule, from senders of
    :data:`SENDER_DELIVERIES` each."""

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


def measure(*, deliveries: int, worker_side_paused: bool = True) -> BurstResult:
    """The first attempt of every delivery at once; the ones not answered 2xx then go on
    RelayLink's retry schedule (time-scaled) until each is acknowledged.

    With ``worker_side_paused`` the worker side (relay, workers) is stopped while the
    first attempts are out, and continued at once after: in AWS a burst's receipts never
    share a CPU or a table server with the processing, here they share two cores and
    one emulator process. The seconds until every one is completed include the pause."""
    run_dir = Path(tempfile.mkdtemp(prefix="relaylink-burst-"))
    options = StackOptions(
        worker_concurrency=4,
        front_door_containers=FRONT_DOOR_CONTAINERS,
        log_level="WARNING",
        run_dir=str(run_dir),
    )
    with LocalStack(options) as stack:
        state = stack.state
        burst = _deliveries(stack, deliveries, random.Random(13))
        secrets = tuple(state.signing_secrets)
        now = int(time.time())
        requests = [lean_client.request_bytes(state.webhook_url, d, secrets, now) for d in burst]
        config = SenderConfig(
            url=state.webhook_url,
            secrets=secrets,
            concurrency=deliveries,
            duplicate_rate=0.0,
            time_scale=360.0,
            seed=13,
        )
        started = time.monotonic()
        meter = CpuMeter(stack).start()
        with stack.paused("worker") if worker_side_paused else contextlib.nullcontext():
            # Each on its own connection, as a burst from many senders: about 0.4 ms of
            # CPU an attempt against some 3.8 ms through httpx, CPU the sender would
            # otherwise take from the stack it measures.
            first = lean_client.all_at_once(state.webhook_url, requests, config.timeout_seconds)
            cpu = meter.stop(deliveries)
            states = stack_probes.delivery_states(state, [d.delivery_id for d in burst])
        unanswered = [d for d, a in zip(burst, first, strict=True) if (a.status or 0) // 100 != 2]
        retried = _send_burst(config, unanswered) if unanswered else None
        acknowledged = time.monotonic() - started
        _wait_done(stack, burst, timeout=900.0)
        completed = time.monotonic() - started
    answers: Counter[str] = Counter(str(a.status) if a.status else "no answer" for a in first)
    if retried is not None:
        answers.update({f"retry {k}": n for k, n in retried.answers.items()})
    seconds = sorted(a.seconds for a in first)
    return BurstResult(
        deliveries=deliveries,
        first_attempts_2xx=(deliveries - len(unanswered)) / deliveries,
        accepted_per_second=deliveries / acknowledged,
        seconds_until_all_acknowledged=acknowledged,
        seconds_until_all_completed=completed,
        answers=dict(answers),
        first_attempt_seconds_p50=seconds[len(seconds) // 2],
        first_attempt_seconds_max=seconds[-1],
        first_attempts_cpu_ms={k: round(1000 * v, 3) for k, v in cpu.items()},
        first_attempts_emulator_ms={
            k: round(1000 * v, 3) for k, v in meter.answer_cpu_per_delivery.items()
        },
        completed_during_first_attempts=sum(
            1 for v in states.values() if v == State.COMPLETED.value
        ),
        emulator_lock_held_share=_lock_held_share(meter),
        receipt_lock_wait_ms=_receipt_lock_wait_ms(meter, deliveries),
    )


def _lock_held_share(meter: CpuMeter) -> dict[str, float]:
    receipts = meter.lock_held.get(RECEIPT_OPERATION, 0.0)
    rest = sum(meter.lock_held.values()) - receipts
    elapsed = meter.elapsed or 1.0
    return {"receipts": round(receipts / elapsed, 4), "everything else": round(rest / elapsed, 4)}


def _receipt_lock_wait_ms(meter: CpuMeter, deliveries: int) -> float:
    calls = meter.calls_per_delivery.get(RECEIPT_OPERATION, 0.0) * deliveries
    return round(1000 * meter.lock_waited.get(RECEIPT_OPERATION, 0.0) / calls, 1) if calls else 0.0
