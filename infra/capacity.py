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
from functions.core.reconcile import RECEIVED_WINDOW_SECONDS
from infra import capacity_model
from infra import capacity_quotas as q
from infra.config import StackConfig

# The quotas and per-item costs: infra/capacity_quotas.py (the model uses the same).
API_ACCOUNT_RATE: Final = q.API_ACCOUNT_RATE
API_ACCOUNT_BURST: Final = q.API_ACCOUNT_BURST
RECONCILER_TIMEOUT_SECONDS: Final = q.RECONCILER_TIMEOUT_SECONDS
# One reconciler pass at a time: the received log read as one.
ONE_PASS: Final = settings_table.RECONCILE_PARALLELISM.low


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
        relay_parallelization_factor=q.MAX_PARALLELIZATION_FACTOR,
        worker_max_concurrency=settings_table.WORKER_MAX_CONCURRENCY.high,
        worker_batch_size=event_source_limits.WORKER_BATCH_SIZE,
        reconcile_every_minutes=settings_table.RECONCILE_EVERY_MINUTES.low,
        reconcile_parallelism=q.LARGEST_RECONCILE_PARALLELISM,
    )


@dataclass(frozen=True, slots=True)
class Quotas:
    """The account quotas a plan assumes: AWS's defaults, or raised ones."""

    lambda_concurrency: int = q.LAMBDA_ACCOUNT_CONCURRENCY
    table_write_units: int = q.TABLE_WRITE_UNITS


RAISED: Final = Quotas(q.RAISED_LAMBDA_CONCURRENCY, q.RAISED_TABLE_WRITE_UNITS)


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
    per_env = min(q.REQUESTS_PER_ENVIRONMENT, 1 / q.RECEIVER_SECONDS)
    return Limit(
        "Receiver Lambda concurrency",
        free * per_env,
        f"({quotas.lambda_concurrency:,} account concurrency - worker "
        f"{config.worker_max_concurrency:,} - relay {_relay_concurrency(config):,} - "
        f"reconciler 1) x {per_env:.0f} requests/s per environment (Lambda serves at most "
        f"{q.REQUESTS_PER_ENVIRONMENT} a second each; {q.RECEIVER_SECONDS * 1000:.0f} ms per "
        f"receipt would allow {1 / q.RECEIVER_SECONDS:.0f}); it grows by at most "
        f"{q.SCALING_ENVIRONMENTS:,} environments per {q.SCALING_SECONDS} s",
        ACCEPTED,
        "Api5xx (a throttled invocation is a 5xx), ReceiverErrors",
        "Lambda concurrency quota (Service Quotas); reserved concurrency for the receiver",
    )


def _received_log(config: StackConfig, _quotas: Quotas) -> Limit:
    shards = config.received_log_shards
    return Limit(
        "Received log partitions",
        shards * q.PARTITION_WRITE_UNITS / q.LOG_WRITE_UNITS * q.SHARD_SKEW,
        f"{shards} shards x {q.PARTITION_WRITE_UNITS:,} WCU/s per partition / "
        f"{q.LOG_WRITE_UNITS} WCU per transactional put x {q.SHARD_SKEW} (the hottest "
        "shard's skew)",
        ACCEPTED,
        "none at first: `ReceiptRetries` counts the throttled receipts the receiver "
        "rides out; Api5xx once they outlast its 3 s",
        "`received_log_shards` (up to 64; in effect increase-only)",
    )


def _table(config: StackConfig, quotas: Quotas) -> Limit:
    units = quotas.table_write_units
    return Limit(
        "Table write throughput (on-demand)",
        units / q.RECEIPT_WRITE_UNITS,
        f"{units:,} WRU/s per table / {q.RECEIPT_WRITE_UNITS} WRU per receipt (with "
        f"processing keeping pace, {q.DELIVERY_WRITE_UNITS} per delivery: "
        f"{units / q.DELIVERY_WRITE_UNITS:,.0f}/s); a new table takes "
        f"{q.NEW_TABLE_WRITE_UNITS:,} WRU/s at once "
        f"({q.NEW_TABLE_WRITE_UNITS / q.RECEIPT_WRITE_UNITS:,.0f} receipts/s)",
        ACCEPTED,
        "none at first (`ReceiptRetries`), then Api5xx",
        "table write throughput quota (Service Quotas); warm throughput before a launch",
    )


def _stream_shards(config: StackConfig) -> int:
    """Stream shards with the API stage's rate written and processed: one per partition."""
    return capacity_model.stream_shards(config.api_rate_limit * q.DELIVERY_WRITE_UNITS)


def _relay_concurrency(config: StackConfig) -> int:
    # Stream shards follow the table's partitions, not the received log's keys; each is
    # read by up to relay_parallelization_factor batches at once.
    return _stream_shards(config) * config.relay_parallelization_factor


def _relay(config: StackConfig, _quotas: Quotas) -> Limit:
    batch = event_source_limits.RELAY_BATCH_SIZE
    return Limit(
        "Relay (stream to queue)",
        _relay_concurrency(config) * batch / q.RELAY_BATCH_SECONDS,
        f"{_stream_shards(config)} stream shards (one per table partition at "
        f"{config.api_rate_limit:,} deliveries/s x {q.DELIVERY_WRITE_UNITS} WRU, at least "
        f"{q.INITIAL_PARTITIONS}) x `relay_parallelization_factor` "
        f"{config.relay_parallelization_factor} x {batch} records per "
        f"{q.RELAY_BATCH_SECONDS * 1000:.0f} ms batch",
        KEPT_UP,
        "RelayIteratorAge",
        "`relay_parallelization_factor` (up to 10)",
    )


def _worker(config: StackConfig, _quotas: Quotas) -> Limit:
    batches = min(config.worker_max_concurrency, q.SQS_MAX_CONCURRENCY)
    slow = batches / q.WORKER_SECONDS_PER_MESSAGE_MCP_300MS
    return Limit(
        "Worker (processing; protects the MCP server)",
        batches / q.WORKER_SECONDS_PER_MESSAGE,
        f"`worker_max_concurrency` {config.worker_max_concurrency:,} batches (the SQS "
        f"event source takes at most {q.SQS_MAX_CONCURRENCY:,}) / "
        f"{q.WORKER_SECONDS_PER_MESSAGE * 1000:.1f} ms per message in a batch (measured, "
        f"figure 4); at a 300 ms MCP answer ({q.WORKER_SECONDS_PER_MESSAGE_MCP_300MS * 1000:.1f}"
        f" ms, figure 9) {slow:,.0f}/s",
        KEPT_UP,
        "WorkQueueAge",
        "`worker_max_concurrency` (what the MCP server and the model can bear); past "
        f"{q.SQS_MAX_CONCURRENCY:,} batches, a faster workflow",
    )


def _completions(config: StackConfig, _quotas: Quotas) -> Limit:
    keys = capacity_model.listing_keys(config)
    return Limit(
        "Completed listing keys",
        keys * q.PARTITION_WRITE_UNITS / q.LISTING_WRITE_UNITS * q.SHARD_SKEW,
        f"{keys} keys (`received_log_shards`, at least "
        f"{table_layout.STATE_INDEX_SHARDS}) x {q.PARTITION_WRITE_UNITS:,} WCU/s per "
        f"partition / {q.LISTING_WRITE_UNITS} WCU per entry x {q.SHARD_SKEW}",
        KEPT_UP,
        "WorkQueueAge (a throttled completion is retried)",
        "`received_log_shards`",
    )


def _reconciler(config: StackConfig, _quotas: Quotas) -> Limit:
    period = config.reconcile_every_minutes * 60
    usable = min(1.0, q.RECONCILER_RUN_SECONDS / period)
    slices = min(config.reconcile_parallelism, config.received_log_shards)
    return Limit(
        "Reconciler, received log kept current",
        slices * q.RECONCILER_READS_PER_SLICE * usable,
        f"{slices} shard passes at once (`reconcile_parallelism`) x "
        f"{q.RECONCILER_READS_PER_SLICE:,} receipts read per second each (measured over "
        f"moto, figure 12) x {q.RECONCILER_RUN_SECONDS:.0f} s of a run / "
        f"`reconcile_every_minutes` {config.reconcile_every_minutes} x 60 s (at most all "
        "of it)",
        KEPT_UP,
        "ReceivedLogLag",
        "`reconcile_parallelism`, `reconcile_every_minutes`; past it a lost relay message "
        "is found later than the received age (the receipts are kept, the relay still "
        f"delivers them); a {RECEIVED_WINDOW_SECONDS} s window of a pass's shards must fit "
        f"in one run, so above ~{_window_limit(config):,.0f}/s sustained the watermark "
        "stops (ReceivedLogLag)",
    )


def _window_limit(config: StackConfig) -> float:
    """Receipts per second at which one window of a pass's shards takes a whole run."""
    side_by_side = config.reconcile_parallelism > 1
    per_pass = config.received_log_shards if side_by_side else 1
    return (
        q.RECONCILER_READS_PER_SLICE
        * q.RECONCILER_RUN_SECONDS
        / RECEIVED_WINDOW_SECONDS
        * (per_pass)
    )


_RULES: Final[tuple[Callable[[StackConfig, Quotas], Limit], ...]] = (
    _api,
    _receiver,
    _received_log,
    _table,
    _relay,
    _worker,
    _completions,
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
            "Quotas are AWS's published defaults (the table below lists each, with the "
            "value the plan at 10,000 receipts/s needs). Per-item costs are measured "
            "figures of docs/benchmarks.md where there is one, else assumed in-region "
            "latencies; each line names its own (`infra/capacity_quotas.py` holds them).",
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
            f"`reconcile_every_minutes` {big.reconcile_every_minutes}, "
            f"`reconcile_parallelism` {big.reconcile_parallelism}; with the Lambda "
            f"concurrency quota raised to {RAISED.lambda_concurrency:,} and the table's "
            f"write throughput quota to {RAISED.table_write_units:,} WRU/s (Service "
            "Quotas).",
            "",
            *table(big, RAISED),
            "",
            *_quota_table(big),
            "",
            *_model_section(big),
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
            "* For 10,000 receipts/s: the quotas marked in bold above (Service Quotas), "
            f"`received_log_shards` {big.received_log_shards} (the received log and the "
            "completed listing), `reconcile_parallelism` "
            f"{big.reconcile_parallelism}, `reconcile_every_minutes` "
            f"{big.reconcile_every_minutes}, and a workflow that finishes a message in "
            f"under {1000 * q.SQS_MAX_CONCURRENCY / 10_000:.0f} ms of a batch's time (one "
            f"event source runs at most {q.SQS_MAX_CONCURRENCY:,} batches).",
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


def _quota_table(big: StackConfig) -> list[str]:
    """Every AWS quota that binds on the way to 10,000 receipts/s."""
    lines = [
        "## Quotas at 10,000 receipts/s",
        "",
        "Each AWS quota the model below is held to, its default and the value the plan "
        "at the largest settings needs. Stream shards are no quota: DynamoDB gives a "
        "stream a shard per partition, about "
        f"{capacity_model.stream_shards(10_000 * q.DELIVERY_WRITE_UNITS)} at 10,000 "
        f"deliveries/s ({q.DELIVERY_WRITE_UNITS} WRU each, {q.PARTITION_WRITE_UNITS:,} per "
        "partition), and the relay holds `relay_parallelization_factor` environments for "
        "each. A standard SQS queue has no throughput quota.",
        "",
        "| quota | AWS default | the plan | unit | adjustable | source |",
        "|---|---:|---:|---|---|---|",
    ]
    for quota in q.QUOTAS:
        raised = f"**{quota.plan:,}**" if quota.plan != quota.default else f"{quota.plan:,}"
        lines.append(
            f"| {quota.name} | {quota.default:,} | {raised} | {quota.unit} | "
            f"{'yes' if quota.adjustable else 'no'} | {quota.source} |"
        )
    lines += [
        "",
        f"At 10,000 receipts/s the receiver alone needs {10_000 // q.REQUESTS_PER_ENVIRONMENT:,} "
        f"environments (10 requests each), the worker up to {big.worker_max_concurrency:,}, "
        f"the relay {_relay_concurrency(big):,}: more than the default 1,000 for the whole "
        "account. The table takes "
        f"{10_000 * q.DELIVERY_WRITE_UNITS:,} WRU/s with processing keeping pace, more "
        f"than its default {q.TABLE_WRITE_UNITS:,}.",
    ]
    return lines


def _model_cases(big: StackConfig) -> list[tuple[str, list[capacity_model.Queue]]]:
    raised = capacity_model.RAISED
    return [
        ("largest settings, raised quotas", capacity_model.run(big, raised)),
        ("AWS's default quotas", capacity_model.run(big, capacity_model.Limits())),
        (
            "the table's write quota not raised",
            capacity_model.run(
                big, dataclasses.replace(raised, table_write_units=q.TABLE_WRITE_UNITS)
            ),
        ),
        (
            "the Lambda concurrency quota not raised",
            capacity_model.run(
                big, dataclasses.replace(raised, lambda_concurrency=q.LAMBDA_ACCOUNT_CONCURRENCY)
            ),
        ),
        (
            f"`reconcile_parallelism` {ONE_PASS}",
            capacity_model.run(dataclasses.replace(big, reconcile_parallelism=ONE_PASS), raised),
        ),
        (
            "a 300 ms MCP answer",
            capacity_model.run(big, raised, worker_seconds=q.WORKER_SECONDS_PER_MESSAGE_MCP_300MS),
        ),
    ]


def _model_section(big: StackConfig) -> list[str]:
    """The model's runs at 10,000 receipts/s (infra/capacity_model.py)."""
    lines = [
        "## The model at 10,000 receipts/s",
        "",
        "`infra/capacity_model.py` drives 10,000 receipts/s through the receive, relay, "
        "work and reconcile paths one second at a time for "
        f"{capacity_model.RUN_SECONDS // 60} minutes: a {capacity_model.RAMP_SECONDS} s ramp "
        f"from nothing, then the rate, with one second of {capacity_model.BURST_EXTRA:,} "
        f"more at {capacity_model.BURST_AT // 60} minutes. Its limits are the quotas above "
        "and the settings; its per-item costs are the constants of "
        "`infra/capacity_quotas.py`, each with its source. A queue **grows** when it ends "
        f"higher than {capacity_model.TREND_SECONDS // 60} minutes before the end.",
        "",
        "| run | queue | peak | at the end | |",
        "|---|---|---:|---:|---|",
    ]
    for name, queues in _model_cases(big):
        for queue in queues:
            verdict = "**grows**" if queue.grows else "bounded"
            lines.append(
                f"| {name} | {queue.name} | {queue.peak:,.0f} {queue.unit} | "
                f"{queue.end:,.0f} | {verdict} |"
            )
    lines += [
        "",
        "What the runs say: at the largest settings and the raised quotas every queue "
        "stays bounded. The burst's second meets the table's write quota, and what it "
        "refused stays with RelayLink: at exactly the API's rate, the API stage's bucket "
        "never refills to take it. At AWS's default quotas the receiver gets almost no "
        "concurrency (the worker and the relay hold most of the 1,000), so refused "
        "receipts pile up at RelayLink. With one reconciler pass at a time the "
        "watermark falls behind. At a 300 ms MCP answer the worker's event source, at "
        f"most {q.SQS_MAX_CONCURRENCY:,} batches, finishes "
        f"{q.SQS_MAX_CONCURRENCY / q.WORKER_SECONDS_PER_MESSAGE_MCP_300MS:,.0f} messages/s: "
        "the work queue grows.",
    ]
    return lines


def printed() -> str:
    """What ``make bench`` prints: the same tables."""
    return render()
