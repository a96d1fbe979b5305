"""A capacity model: receipts driven through receive, relay, work and reconcile, one
second at a time, with AWS's quotas as limits.

Deterministic and pure: a fluid model (counts per second, no randomness) of every queue
a receipt can wait in. Its limits and per-item costs are the named constants of
:mod:`infra.capacity_quotas`, each with its source; nothing here is tuned to make a run
pass: a test takes back each raised quota in turn and checks that the queue it names
grows. CDK-free.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from typing import Final

from functions.core import event_source_limits, settings_table, table_layout
from infra import capacity_quotas as q
from infra.config import StackConfig

RUN_SECONDS: Final = 2_700  # 45 minutes: three times the received age
RAMP_SECONDS: Final = 60  # from nothing to the rate
BURST_AT: Final = 1_200
# One second with this many more receipts than the rate: the API stage's burst bucket.
BURST_EXTRA: Final = q.API_ACCOUNT_BURST
# A queue grows when it ends higher than it was this long before the end.
TREND_SECONDS: Final = 300

SENDER: Final = "Receipts refused, waiting for RelayLink's retry"
STREAM: Final = "Stream backlog (relay)"
WORK: Final = "Work queue (SQS)"
LAG: Final = "Reconciler watermark lag"


@dataclass(frozen=True, slots=True)
class Limits:
    """The quotas a run is held to: AWS's defaults unless raised."""

    lambda_concurrency: int = q.LAMBDA_ACCOUNT_CONCURRENCY
    table_write_units: int = q.TABLE_WRITE_UNITS


RAISED: Final = Limits(q.RAISED_LAMBDA_CONCURRENCY, q.RAISED_TABLE_WRITE_UNITS)


@dataclass(frozen=True, slots=True)
class Queue:
    """One queue of a run: its size at the end of each second."""

    name: str
    sizes: tuple[float, ...]
    unit: str

    @property
    def peak(self) -> float:
        return max(self.sizes)

    @property
    def end(self) -> float:
        return self.sizes[-1]

    @property
    def grows(self) -> bool:
        """Still rising at the end: above its size :data:`TREND_SECONDS` before by more
        than one part in a thousand of its peak (and more than one item)."""
        return self.end - self.sizes[-TREND_SECONDS] > max(1.0, self.peak / 1000)


def arrivals(second: int, rate: float) -> float:
    """Receipts offered in ``second``: a ramp to ``rate``, then the rate, and one second
    of a burst."""
    ramp = min(1.0, (second + 1) / RAMP_SECONDS)
    return rate * ramp + (BURST_EXTRA if second == BURST_AT else 0)


def listing_keys(config: StackConfig) -> int:
    """Keys of the completed listing the worker's completions spread over."""
    return table_layout.listing_keys(table_layout.STATE_LABEL_COMPLETED, config.received_log_shards)


def stream_shards(write_units: float) -> int:
    """Stream shards: one per table partition, at least a new table's."""
    return max(q.INITIAL_PARTITIONS, math.ceil(write_units / q.PARTITION_WRITE_UNITS))


@dataclass
class _Run:
    config: StackConfig
    limits: Limits
    worker_seconds: float
    sender: float = 0.0  # refused receipts RelayLink sends again
    tokens: float = 0.0  # the API stage's burst bucket
    receiver_envs: float = 0.0
    scaling: float = float(q.SCALING_ENVIRONMENTS)  # environments it may add at once
    write_units: float = 0.0  # the table's writes in the second before
    stream: float = 0.0  # outbox records not yet relayed
    work: float = 0.0  # messages in the work queue
    worker_batches: float = float(q.SQS_START_BATCHES)
    received: list[float] = field(default_factory=list)
    # (second received, receipts not yet read by the reconciler) once past the received age
    unread: collections.deque[list[float]] = field(default_factory=collections.deque)

    def __post_init__(self) -> None:
        self.tokens = float(self.config.api_burst_limit)

    @property
    def relay_envs(self) -> int:
        # Every stream shard is read by its own batches: the relay holds that many
        # environments whether or not a shard carries outbox records.
        return stream_shards(self.write_units) * self.config.relay_parallelization_factor

    def admit(self, offered: float) -> float:
        """The API stage: a token bucket of ``api_burst_limit`` refilled at
        ``api_rate_limit`` (each at most the account's quota)."""
        rate, burst = self.config.api_rate_limit, self.config.api_burst_limit
        admitted = min(offered, self.tokens + rate)
        self.tokens = min(burst, self.tokens + rate - admitted)
        return admitted

    def receive(self, admitted: float) -> float:
        """The receiver: the account's concurrency less what the event sources hold,
        grown no faster than the scaling rate, 10 requests per environment at most."""
        others = self.relay_envs + self.worker_batches + 1  # (+1: the reconciler)
        room = max(0.0, self.limits.lambda_concurrency - others)
        wanted = max(admitted / q.REQUESTS_PER_ENVIRONMENT, admitted * q.RECEIVER_SECONDS)
        grow = min(max(0.0, wanted - self.receiver_envs), self.scaling)
        self.receiver_envs = min(room, self.receiver_envs + grow)
        refill = q.SCALING_ENVIRONMENTS / q.SCALING_SECONDS
        self.scaling = min(float(q.SCALING_ENVIRONMENTS), self.scaling - grow + refill)
        log_keys = self.config.received_log_shards
        return min(
            admitted,
            self.receiver_envs * q.REQUESTS_PER_ENVIRONMENT,
            self.receiver_envs / q.RECEIVER_SECONDS,
            log_keys * q.PARTITION_WRITE_UNITS / q.LOG_WRITE_UNITS * q.SHARD_SKEW,
        )

    def worker_rate(self) -> float:
        """Messages the worker's event source can finish this second."""
        cap = min(self.config.worker_max_concurrency, q.SQS_MAX_CONCURRENCY)
        batches = min(self.worker_batches, cap)
        listing = listing_keys(self.config) * q.PARTITION_WRITE_UNITS / q.LISTING_WRITE_UNITS
        return min(self.work, batches / self.worker_seconds, listing * q.SHARD_SKEW)

    def step(self, second: int, rate: float) -> None:
        offered = arrivals(second, rate) + self.sender
        served = self.receive(self.admit(offered))
        processed = self.worker_rate()
        # Receipts and the worker's writes share the table's write throughput.
        process_units = q.DELIVERY_WRITE_UNITS - q.RECEIPT_WRITE_UNITS
        demand = served * q.RECEIPT_WRITE_UNITS + processed * process_units
        share = min(1.0, self.limits.table_write_units / demand) if demand else 1.0
        served, processed = served * share, processed * share
        self.write_units = demand * share
        self.sender = offered - served
        self.received.append(served)
        # The relay: the stream's outbox records to the work queue.
        self.stream += served
        relayed = min(
            self.stream,
            self.relay_envs * event_source_limits.RELAY_BATCH_SIZE / q.RELAY_BATCH_SECONDS,
        )
        self.stream -= relayed
        self.work += relayed - processed
        if self.work > 0:  # (the event source adds batches while messages wait)
            cap = min(self.config.worker_max_concurrency, q.SQS_MAX_CONCURRENCY)
            grown = self.worker_batches + q.SQS_BATCHES_PER_MINUTE / 60
            self.worker_batches = min(float(cap), grown)
        self.reconcile(second)

    def reconcile(self, second: int) -> None:
        """Receipts older than the received age wait for a run to read them; a run reads
        ``reconcile_parallelism`` shards at once for its time, once a period."""
        age = _received_age()
        if second >= age:
            self.unread.append([float(second - age), self.received[second - age]])
        period = self.config.reconcile_every_minutes * 60
        if second % period >= min(period, q.RECONCILER_RUN_SECONDS):
            return
        slices = min(self.config.reconcile_parallelism, self.config.received_log_shards)
        budget = float(slices * q.RECONCILER_READS_PER_SLICE)
        while budget > 0 and self.unread:
            oldest = self.unread[0]
            taken = min(budget, oldest[1])
            oldest[1] -= taken
            budget -= taken
            if oldest[1] <= 0:
                self.unread.popleft()

    def lag(self, second: int) -> float:
        """Seconds from the oldest receipt not yet read to now (at least the received
        age: a run looks only at receipts that old)."""
        age = _received_age()
        if not self.unread:
            return float(min(second, age))
        return second - self.unread[0][0]


def _received_age() -> int:
    return settings_table.received_age_seconds(
        pending_age_seconds=settings_table.RECONCILE_PENDING_AGE_SECONDS.default,
        lease=settings_table.WORKER_LEASE_SECONDS.default,
    )


def run(
    config: StackConfig,
    limits: Limits,
    *,
    rate: float = 10_000,
    worker_seconds: float = q.WORKER_SECONDS_PER_MESSAGE,
) -> list[Queue]:
    """Every queue of a run at ``rate`` receipts per second, second by second."""
    state = _Run(config, limits, worker_seconds)
    sizes: dict[str, list[float]] = collections.defaultdict(list)
    for second in range(RUN_SECONDS):
        state.step(second, rate)
        sizes[SENDER].append(state.sender)
        sizes[STREAM].append(state.stream)
        sizes[WORK].append(state.work)
        sizes[LAG].append(state.lag(second))
    units = {SENDER: "receipts", STREAM: "records", WORK: "messages", LAG: "seconds"}
    return [Queue(name, tuple(sizes[name]), units[name]) for name in units]
