"""The capacity plan: each component's limit in receipts per second, from AWS's published
quotas and the stack's settings, at the defaults and at the largest settings.

The one source of these numbers: docs/capacity.md is rendered from here (a docs test
checks it is current) and ``make bench`` prints the same table. CDK-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from functions.core import event_source_limits, settings_table, table_layout
from functions.core.reconcile import RECEIVED_WINDOW_SECONDS, SAFETY_MARGIN_SECONDS
from infra.config import StackConfig

# --- AWS's published quotas (defaults per account and region unless said) -------------
# API Gateway HTTP API: 10,000 requests/s across the account's APIs, burst 5,000
# (API Gateway quotas, "Throttle quota per account, per Region across HTTP APIs").
# The settings table bounds api_rate_limit and api_burst_limit by them.
API_ACCOUNT_RATE: Final = settings_table.API_RATE_LIMIT.high
API_ACCOUNT_BURST: Final = settings_table.API_BURST_LIMIT.high
# Lambda: 1,000 concurrent executions shared by the account's functions (adjustable).
LAMBDA_ACCOUNT_CONCURRENCY: Final = 1_000
# DynamoDB: 1,000 WCU/s per partition (a partition key can take no more), 40,000 WRU/s
# per on-demand table (adjustable), 4,000 WRU/s instantly on a new on-demand table.
PARTITION_WRITE_UNITS: Final = 1_000
TABLE_WRITE_UNITS: Final = 40_000
NEW_TABLE_WRITE_UNITS: Final = settings_table.TABLE_WARM_WRITE_UNITS.low
# Lambda's stream event source: 1 to 10 batches of one shard in flight at once.
MAX_PARALLELIZATION_FACTOR: Final = settings_table.RELAY_PARALLELIZATION_FACTOR.high

# --- What the raised quotas are assumed to be at the largest settings -------------------
RAISED_LAMBDA_CONCURRENCY: Final = 10_000
RAISED_TABLE_WRITE_UNITS: Final = 80_000

# --- Measured or assumed per-request costs ----------------------------------------------
# Write units: a receipt's transaction puts two items under 1 KB, 2 WRU each
# (transactional); a processed delivery writes 3 more (claim, completion, its index
# entry). Measured: docs/benchmarks.md, figure 11.
RECEIPT_WRITE_UNITS: Final = 4
DELIVERY_WRITE_UNITS: Final = 7
# crc32 of random ids spreads receipts evenly, not exactly: the hottest shard of the
# received log takes about a tenth more than its share.
SHARD_SKEW: Final = 0.9
# Assumed in-region latencies (docs/cost.md prices the same): a receiver invocation
# (its TransactWriteItems and the handler, with Lambda's own overhead), a relay batch
# of 10 records (one SendMessageBatch), a worker batch of 10 messages side by side at a
# 300 ms MCP answer, and the reconciler's BatchGetItem of 100 small items.
RECEIVER_SECONDS: Final = 0.030
RELAY_BATCH_SECONDS: Final = 0.025
WORKER_BATCH_SECONDS: Final = 1.2
RECONCILER_READS_PER_SECOND: Final = 100 / 0.020
# The reconciler Lambda's timeout (infra/reconciler.py uses this very value).
RECONCILER_TIMEOUT_SECONDS: Final = 120


@dataclass(frozen=True, slots=True)
class Limit:
    """One component's limit under some settings.

    Attributes:
        component: What limits.
        per_second: Receipts per second it takes (accepted, relayed, processed, or
            looked at by the reconciler: ``bounds``).
        arithmetic: How ``per_second`` follows from the quotas and the settings.
        bounds: ``accepted`` (the receipt path: more is refused) or ``kept up``
            (buffered behind the inbox: more only grows a backlog).
        alarm: The alarm that fires first as the limit nears.
        raise_it: What to raise.
    """

    component: str
    per_second: float
    arithmetic: str
    bounds: str
    alarm: str
    raise_it: str


ACCEPTED: Final = "accepted"
KEPT_UP: Final = "kept up"


def largest(config: StackConfig | None = None) -> StackConfig:
    """The settings at their largest that capacity depends on."""
    return dataclasses.replace(
        config or StackConfig(),
        api_rate_limit=API_ACCOUNT_RATE,
        api_burst_limit=API_ACCOUNT_BURST,
        received_log_shards=table_layout.MAX_RECEIVED_LOG_SHARDS,
        relay_parallelization_factor=MAX_PARALLELIZATION_FACTOR,
        worker_max_concurrency=settings_table.WORKER_MAX_CONCURRENCY.high,
        worker_batch_size=event_source_limits.WORKER_BATCH_SIZE,
        reconcile_every_minutes=settings_table.RECONCILE_EVERY_MINUTES.low,
    )


@dataclass(frozen=True, slots=True)
class Quotas:
    """The account quotas a plan assumes: AWS's defaults, or raised ones."""

    lambda_concurrency: int = LAMBDA_ACCOUNT_CONCURRENCY
    table_write_units: int = TABLE_WRITE_UNITS


RAISED: Final = Quotas(RAISED_LAMBDA_CONCURRENCY, RAISED_TABLE_WRITE_UNITS)


def limits(config: StackConfig, quotas: Quotas) -> list[Limit]:
    """Every component's limit under ``config`` and ``quotas``, in the order a receipt
    meets them."""
    return [rule(config, quotas) for rule in _RULES]


def ceiling(config: StackConfig, quotas: Quotas) -> Limit:
    """The lowest limit on the receipt path: what the stack accepts per second."""
    return min((x for x in limits(config, quotas) if x.bounds == ACCEPTED), key=_rate)


def _rate(limit: Limit) -> float:
    return limit.per_second


def _api(config: StackConfig, _quotas: Quotas) -> Limit:
    return Limit(
        "API stage throttle",
        float(config.api_rate_limit),
        f"`api_rate_limit` {config.api_rate_limit:,}/s, burst `api_burst_limit` "
        f"{config.api_burst_limit:,} (account quota {API_ACCOUNT_RATE:,}/s, burst "
        f"{API_ACCOUNT_BURST:,})",
        ACCEPTED,
        "none: the stage answers 429 and RelayLink retries; the access log's `status` counts them",
        "`api_rate_limit`, `api_burst_limit`; above 10,000/s a Service Quotas increase",
    )


def _receiver(config: StackConfig, quotas: Quotas) -> Limit:
    others = _relay_concurrency(config) + config.worker_max_concurrency + 1
    free = quotas.lambda_concurrency - others
    return Limit(
        "Receiver Lambda concurrency",
        free / RECEIVER_SECONDS,
        f"({quotas.lambda_concurrency:,} account concurrency - worker "
        f"{config.worker_max_concurrency:,} - relay {_relay_concurrency(config):,} - "
        f"reconciler 1) / {RECEIVER_SECONDS * 1000:.0f} ms per receipt",
        ACCEPTED,
        "Api5xx (a throttled invocation is a 5xx), ReceiverErrors",
        "Lambda concurrency quota (Service Quotas); reserved concurrency for the receiver",
    )


def _received_log(config: StackConfig, _quotas: Quotas) -> Limit:
    shards = config.received_log_shards
    return Limit(
        "Received log partitions",
        shards * PARTITION_WRITE_UNITS / 2 * SHARD_SKEW,
        f"{shards} shards x {PARTITION_WRITE_UNITS:,} WCU/s per partition / 2 WCU per "
        f"transactional put x {SHARD_SKEW} (the hottest shard's skew)",
        ACCEPTED,
        "none at first: `ReceiptRetries` counts the throttled receipts the receiver "
        "rides out; Api5xx once they outlast its 3 s",
        "`received_log_shards` (up to 64; in effect increase-only)",
    )


def _table(config: StackConfig, quotas: Quotas) -> Limit:
    units = quotas.table_write_units
    return Limit(
        "Table write throughput (on-demand)",
        units / RECEIPT_WRITE_UNITS,
        f"{units:,} WRU/s per table / {RECEIPT_WRITE_UNITS} WRU per receipt (with "
        f"processing keeping pace, {DELIVERY_WRITE_UNITS} per delivery: "
        f"{units / DELIVERY_WRITE_UNITS:,.0f}/s); a new table takes "
        f"{NEW_TABLE_WRITE_UNITS:,} WRU/s at once "
        f"({NEW_TABLE_WRITE_UNITS / RECEIPT_WRITE_UNITS:,.0f} receipts/s)",
        ACCEPTED,
        "none at first (`ReceiptRetries`), then Api5xx",
        "table write throughput quota (Service Quotas); warm throughput before a launch",
    )


def _relay_concurrency(config: StackConfig) -> int:
    # The outbox records sit under the received log's keys: at most one stream shard
    # per log shard carries them.
    return config.received_log_shards * config.relay_parallelization_factor


def _relay(config: StackConfig, _quotas: Quotas) -> Limit:
    batch = event_source_limits.RELAY_BATCH_SIZE
    return Limit(
        "Relay (stream to queue)",
        _relay_concurrency(config) * batch / RELAY_BATCH_SECONDS,
        f"{config.received_log_shards} hot stream shards (one per log shard) x "
        f"`relay_parallelization_factor` {config.relay_parallelization_factor} x "
        f"{batch} records per {RELAY_BATCH_SECONDS * 1000:.0f} ms batch",
        KEPT_UP,
        "RelayIteratorAge",
        "`relay_parallelization_factor` (up to 10), `received_log_shards`",
    )


def _worker(config: StackConfig, _quotas: Quotas) -> Limit:
    return Limit(
        "Worker (processing; protects the MCP server)",
        config.worker_max_concurrency * config.worker_batch_size / WORKER_BATCH_SECONDS,
        f"`worker_max_concurrency` {config.worker_max_concurrency:,} x "
        f"`worker_batch_size` {config.worker_batch_size} / {WORKER_BATCH_SECONDS} s per "
        "batch (300 ms MCP answers, the batch side by side)",
        KEPT_UP,
        "WorkQueueAge",
        "`worker_max_concurrency` (what the MCP server and the model can bear)",
    )


def _reconciler(config: StackConfig, _quotas: Quotas) -> Limit:
    period = config.reconcile_every_minutes * 60
    usable = min(1.0, (RECONCILER_TIMEOUT_SECONDS - SAFETY_MARGIN_SECONDS) / period)
    return Limit(
        "Reconciler, received log kept current",
        RECONCILER_READS_PER_SECOND * usable,
        f"{RECONCILER_READS_PER_SECOND:,.0f} receipts read per second x "
        f"{RECONCILER_TIMEOUT_SECONDS - SAFETY_MARGIN_SECONDS:.0f} s of a run / "
        f"`reconcile_every_minutes` {config.reconcile_every_minutes} x 60 s (at most all "
        "of it)",
        KEPT_UP,
        "ReceivedLogLag",
        "`reconcile_every_minutes`; past it a lost relay message is found later than "
        "the received age (the receipts are kept, the relay still delivers them); a "
        f"{RECEIVED_WINDOW_SECONDS} s window of the log must fit in one run, so above "
        f"~{_window_limit():,.0f}/s sustained the watermark stops (ReceivedLogLag)",
    )


def _window_limit() -> float:
    """Receipts per second at which one window of the log takes a whole run to read."""
    run = RECONCILER_TIMEOUT_SECONDS - SAFETY_MARGIN_SECONDS
    return RECONCILER_READS_PER_SECOND * run / RECEIVED_WINDOW_SECONDS


_RULES: Final[tuple[Callable[[StackConfig, Quotas], Limit], ...]] = (
    _api,
    _receiver,
    _received_log,
    _table,
    _relay,
    _worker,
    _reconciler,
)


def table(config: StackConfig, quotas: Quotas) -> list[str]:
    """The plan under ``config`` and ``quotas`` as a Markdown table."""
    lines = [
        "| component | receipts/s | bounds | arithmetic | first alarm | raise |",
        "|---|---:|---|---|---|---|",
    ]
    for limit in limits(config, quotas):
        lines.append(
            f"| {limit.component} | {limit.per_second:,.0f} | {limit.bounds} | "
            f"{limit.arithmetic} | {limit.alarm} | {limit.raise_it} |"
        )
    top = ceiling(config, quotas)
    lines.append("")
    lines.append(f"Ceiling: **{top.per_second:,.0f} receipts/s accepted** ({top.component}).")
    return lines


def render() -> str:
    """docs/capacity.md."""
    defaults = StackConfig()
    big = largest(defaults)
    return "\n".join(
        [
            "# Capacity plan",
            "",
            "Rendered from `infra/capacity.py` (the one source of these numbers; "
            "`make bench` prints the same tables, and a docs test checks this file is "
            "current); do not edit by hand.",
            "",
            "The inbox takes deliveries faster than they are processed and works them off "
            "later. So a limit on the receipt path (**accepted**) refuses deliveries (429 "
            "or 503, which RelayLink retries), while a limit behind the inbox (**kept "
            "up**) only lets a backlog grow, which its alarm reports. The API stage's "
            "throttle protects the table's write capacity and the bill from a flood; the "
            "worker's concurrency (`worker_max_concurrency`, `worker_batch_size`) is what "
            "protects the MCP server and the model.",
            "",
            "Quotas are AWS's published defaults (API Gateway HTTP API 10,000 requests/s "
            "per account and region, burst 5,000; Lambda 1,000 concurrent executions per "
            "account and region; DynamoDB 1,000 WCU/s per partition key, 40,000 WRU/s per "
            "on-demand table, 4,000 WRU/s at once on a new one; a stream event source 1 to "
            "10 batches per shard in flight). Latencies are assumed in-region figures, "
            "named in each line (docs/cost.md prices the same).",
            "",
            "## At the defaults",
            "",
            *table(defaults, Quotas()),
            "",
            "## At the largest settings",
            "",
            f"`api_rate_limit` {big.api_rate_limit:,}, `api_burst_limit` "
            f"{big.api_burst_limit:,}, `received_log_shards` {big.received_log_shards}, "
            f"`relay_parallelization_factor` {big.relay_parallelization_factor}, "
            f"`worker_max_concurrency` {big.worker_max_concurrency:,}, "
            f"`reconcile_every_minutes` {big.reconcile_every_minutes}; with the Lambda "
            f"concurrency quota raised to {RAISED.lambda_concurrency:,} and the table's "
            f"write throughput quota to {RAISED.table_write_units:,} WRU/s (Service "
            "Quotas).",
            "",
            *table(big, RAISED),
            "",
            "## Before a launch",
            "",
            "* A new on-demand table takes 4,000 WRU/s at once (1,000 receipts/s) and "
            "adapts to twice its previous peak within about 30 minutes; for a launch "
            "expecting more from the first minute, set the table's warm throughput "
            "(`-c table_warm_write_units=N`) to the expected peak in WRU/s (receipts/s x "
            "4, plus 3 per delivery processed).",
            "* Raise `received_log_shards` before the traffic, never to lower it later: "
            "each reconciler run records the largest count it was deployed with and "
            "reads every shard up to it (the synth prints a note saying so).",
            "* Raise the Lambda concurrency quota before `worker_max_concurrency` takes "
            "most of it: the receiver needs the rest.",
            "* Watch `ReceiptRetries`: receipts that met throttling and were retried "
            "inside the receiver's time budget. A steady count means a limit above is "
            "near; Api5xx follows once the retries no longer succeed within 3 s.",
            "",
            "## Measured locally",
            "",
            "`docs/benchmarks.md` has the two local figures, with their date, commit and "
            "what bounds them on one machine: a burst of 2,000 deliveries sent at once "
            "through the local front door (figure 13: the share answered 2xx, accepted "
            "per second, time until every one is completed) and the reconciler against "
            "100,000 open items over moto (figure 12: items per run-second, time until "
            "the relay's lost receipts are back in the queue). Neither is AWS's speed: "
            "one machine runs the sender, the receiver, the emulated AWS and the worker "
            "side on the same cores.",
            "",
        ]
    )


def printed() -> str:
    """What ``make bench`` prints: the same tables."""
    return render()
