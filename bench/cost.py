"""``docs/cost.md``: dollars per million deliveries, from the figures of this run.

What is measured (in the same ``make bench`` run) and what is assumed are kept
apart: every quantity is a :class:`Quantity` that says which. Prices are AWS list
prices for us-east-1 (:data:`PRICES`), without the free tier, savings plans or
reserved capacity.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.report import Figure
from functions.core import event_source_limits, metric_names, setting_defaults, table_layout
from functions.core.models import Outcome

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
REGION: Final = "us-east-1"
PRICE_DATE: Final = "2025-06"
VOLUMES: Final = (1_000_000, 100_000_000, 1_000_000_000)
SECONDS_PER_MONTH: Final = 30 * 24 * 3600
GB: Final = 1024**3


@dataclass(frozen=True)
class Price:
    what: str
    usd: float
    per: str


# AWS list prices, us-east-1, as published on the services' pricing pages and known
# to the author at PRICE_DATE (DynamoDB on-demand after its November 2024 reduction;
# Lambda INIT billed since August 2025 is covered by the cold-start line). Check
# https://aws.amazon.com/pricing/ before relying on them.
PRICES: Final = {
    "http_api": Price("API Gateway HTTP API, first 300 M requests/month", 1.00, "1 M requests"),
    "http_api_over": Price("API Gateway HTTP API, over 300 M", 0.90, "1 M requests"),
    "rest_api": Price("API Gateway REST API, first 333 M requests/month", 3.50, "1 M requests"),
    "rest_api_2": Price("API Gateway REST API, next 667 M", 2.80, "1 M requests"),
    "rest_api_3": Price("API Gateway REST API, next 19 B", 2.38, "1 M requests"),
    "lambda_requests": Price("Lambda requests", 0.20, "1 M requests"),
    "lambda_arm_gbs": Price("Lambda duration, arm64, first 7.5 B GB-s/month", 0.0000133334, "GB-s"),
    "lambda_arm_gbs_2": Price("Lambda duration, arm64, next 11.25 B GB-s", 0.0000120001, "GB-s"),
    "ddb_wru": Price("DynamoDB on-demand write request units", 0.625, "1 M WRU"),
    "ddb_rru": Price("DynamoDB on-demand read request units", 0.125, "1 M RRU"),
    "ddb_storage": Price("DynamoDB Standard storage", 0.25, "GB-month"),
    "ddb_pitr": Price("DynamoDB point-in-time recovery", 0.20, "GB-month"),
    "ddb_streams": Price("DynamoDB Streams reads by a Lambda trigger", 0.0, "—"),
    "sqs": Price("SQS standard requests (64 KB chunks)", 0.40, "1 M requests"),
    "s3_put": Price("S3 Standard PUT", 0.005, "1,000 requests"),
    "s3_storage": Price("S3 Standard storage", 0.023, "GB-month"),
    "logs_ingest": Price("CloudWatch Logs ingestion (Lambda, first 10 TB)", 0.50, "GB"),
    "logs_storage": Price("CloudWatch Logs storage", 0.03, "GB-month"),
    "metric": Price("CloudWatch custom metric (first 10,000)", 0.30, "metric-month"),
    "alarm": Price("CloudWatch standard alarm", 0.10, "alarm-month"),
    "dashboard": Price("CloudWatch dashboard (beyond 3 free)", 3.00, "dashboard-month"),
    "xray": Price("X-Ray traces recorded", 5.00, "1 M traces"),
    "secret": Price("Secrets Manager secret", 0.40, "secret-month"),
    "secret_calls": Price("Secrets Manager API calls", 0.05, "10,000 calls"),
    "kms_key": Price("KMS customer managed key (alarm topic)", 1.00, "key-month"),
    "egress": Price("Data transfer out to the internet (first 10 TB)", 0.09, "GB"),
}


@dataclass(frozen=True)
class Quantity:
    value: float
    source: str  # "measured: ..." or "assumed: ..." or "config: ..."


# Assumptions: what this machine cannot measure (network time inside AWS, the
# partner's MCP server). Each is stated in cost.md next to what it drives.
DYNAMODB_WRITE_MS: Final = Quantity(
    10.0, "assumed: TransactWriteItems of 2 items in-region, p50 (single writes ~5 ms)"
)
DYNAMODB_CALL_MS: Final = Quantity(5.0, "assumed: one GetItem/PutItem/UpdateItem in-region")
MCP_CALL_MS: Final = Quantity(300.0, "assumed: the partner MCP server answers in 300 ms (figure 5)")
NOTIFY_MS: Final = Quantity(50.0, "assumed: the notification endpoint answers in 50 ms")
S3_PUT_MS: Final = Quantity(20.0, "assumed: one small S3 PUT")
EGRESS_BYTES: Final = Quantity(2500.0, "assumed: MCP request + notification sent, per delivery")
REFERENCE_CPU_MB: Final = 1769  # Lambda gives one full vCPU at 1,769 MB
COLD_START_RATE: Final = Quantity(
    1 / 10_000, "assumed: one cold start per 10,000 receiver requests (steady traffic)"
)
SQS_EMPTY_RECEIVES_PER_MONTH: Final = Quantity(
    5 * 3 * 60 * 24 * 30,
    "assumed: the event-source mapping's 5 pollers long-poll (20 s) when the queue is idle",
)


def _memory_mb() -> dict[str, int]:
    """The functions' memory sizes, read from infra (the defaults where none is set)."""
    sizes: dict[str, int] = {}
    for function in ("receiver", "relay", "worker", "reconciler"):
        text = (REPO_ROOT / "infra" / f"{function}.py").read_text(encoding="utf-8")
        found = re.search(r"memory_size=(\d+)", text)
        sizes[function] = int(found.group(1)) if found else 256
    return sizes


def _alarm_count() -> int:
    text = (REPO_ROOT / "infra" / "monitoring.py").read_text(encoding="utf-8")
    return len(re.findall(r"self\._alarm\(", text))


def _metric_names() -> set[str]:
    receiver = {metric_names.receiver_outcome_metric(o.value) for o in Outcome}
    others = {
        v for k, v in vars(metric_names).items() if k.startswith("METRIC_") and isinstance(v, str)
    }
    return receiver | others


def _tiered(amount: float, tiers: list[tuple[float, float]]) -> float:
    """Cost of ``amount`` with ``tiers`` of (size or inf, price per unit)."""
    total, left = 0.0, amount
    for size, price in tiers:
        used = min(left, size)
        total += used * price
        left -= used
        if left <= 0:
            break
    return total


@dataclass(frozen=True)
class Line:
    component: str
    group: str
    usd_per_month: float
    basis: str


class Model:
    """The stack's monthly bill as a function of deliveries per month."""

    def __init__(self, figures: dict[int, Figure], config: dict[str, Any]) -> None:
        self.memory = _memory_mb()
        self.config = config
        pipeline = figures[7].details
        # The shapes bench.pipeline_calls.PipelineCalls.to_json writes.
        self.calls: dict[str, dict[str, float]] = pipeline["calls_per_delivery"]
        self.capacity: dict[str, dict[str, float]] = pipeline[
            "dynamodb_capacity_units_per_delivery"
        ]
        self.log_bytes: dict[str, float] = pipeline["log_bytes_per_delivery"]
        self.items: dict[str, dict[str, float]] = pipeline["items_at_rest"]
        self.archive_bytes: float = pipeline["archive_bytes_per_delivery"]
        canned = figures[2].details["canned"]
        self.receiver_cpu_ms = Quantity(
            canned["handler_us"]["median"] / 1000,
            "measured: figure 2, handler time with DynamoDB answering at once",
        )
        worker = figures[4].details
        self.worker_cpu_ms = Quantity(
            worker["worker_ms_per_message_batched"]["median"],
            "measured: figure 4, worker time per message in a batch of 10 (moto in-process "
            "included, so an overestimate)",
        )
        cold = figures[3].details["receiver"]["receiver_ms"]
        self.cold_ms = Quantity(cold["total_ms"]["median"], "measured: figure 3, receiver total")
        self.alarms = _alarm_count()
        self.metrics = len(_metric_names())

    def _cpu_scale(self, function: str) -> float:
        """Lambda's CPU share scales with memory: CPU-bound time stretches below 1,769 MB."""
        return max(1.0, REFERENCE_CPU_MB / self.memory[function])

    def receiver_ms(self) -> float:
        cpu = self.receiver_cpu_ms.value * self._cpu_scale("receiver")
        return math.ceil(cpu + DYNAMODB_WRITE_MS.value)  # billed in whole milliseconds

    def worker_ms_per_message(self) -> float:
        calls = self.calls["worker"]
        dynamodb_calls = sum(n for op, n in calls.items() if op.startswith("dynamodb."))
        waits = (
            MCP_CALL_MS.value
            + NOTIFY_MS.value
            + S3_PUT_MS.value * calls.get("s3.PutObject", 0)
            + DYNAMODB_CALL_MS.value * dynamodb_calls
        )
        return self.worker_cpu_ms.value * self._cpu_scale("worker") + waits

    def relay_ms_per_record(self) -> float:
        return DYNAMODB_CALL_MS.value * self.calls["relay"].get("sqs.SendMessage", 1)

    def lines(self, deliveries: int) -> list[Line]:
        d = deliveries
        m = d / 1e6
        rps = d / SECONDS_PER_MONTH
        out: list[Line] = []

        def add(component: str, group: str, usd: float, basis: str) -> None:
            out.append(Line(component, group, usd, basis))

        # API Gateway: the receiver sits behind an HTTP API; REST API shown for comparison.
        http = _tiered(m, [(300, PRICES["http_api"].usd), (math.inf, PRICES["http_api_over"].usd)])
        add("API Gateway HTTP API", "API Gateway", http, f"{d:,} requests")

        # Lambda: requests and GB-seconds per function.
        gbs_price = [
            (7.5e9, PRICES["lambda_arm_gbs"].usd),
            (math.inf, PRICES["lambda_arm_gbs_2"].usd),
        ]
        relay_batch = min(
            event_source_limits.RELAY_BATCH_SIZE, max(1.0, rps / (4 * self._stream_shards(d)))
        )
        worker_batch = min(event_source_limits.WORKER_BATCH_SIZE, max(1.0, rps * 0.5))
        invocations = {
            "receiver": d,
            "relay": d / relay_batch,
            "worker": d / worker_batch,
            "reconciler": SECONDS_PER_MONTH / (60 * self.config["reconcile_every_minutes"]),
        }
        seconds = {
            "receiver": d * self.receiver_ms() / 1000,
            "relay": invocations["relay"] * (20 + relay_batch * self.relay_ms_per_record()) / 1000,
            "worker": d * self.worker_ms_per_message() / 1000,
            "reconciler": invocations["reconciler"] * 0.2,
        }
        for function in ("receiver", "relay", "worker", "reconciler"):
            gb_s = seconds[function] * self.memory[function] / 1024
            usd = invocations[function] / 1e6 * PRICES["lambda_requests"].usd + _tiered(
                gb_s, gbs_price
            )
            add(
                f"Lambda {function}",
                "Lambda",
                usd,
                f"{invocations[function]:,.0f} invocations, {gb_s:,.0f} GB-s "
                f"({self.memory[function]} MB)",
            )
        cold_gbs = (
            d * COLD_START_RATE.value * self.cold_ms.value / 1000 * self.memory["receiver"] / 1024
        )
        add(
            "Lambda receiver cold starts (INIT)",
            "Lambda",
            cold_gbs * PRICES["lambda_arm_gbs"].usd,
            f"{d * COLD_START_RATE.value:,.0f} cold starts x {self.cold_ms.value:.0f} ms",
        )

        # DynamoDB: writes (transactional ones at 2 WRU per item), index writes, reads.
        wru = sum(c.get("table_wru", 0) + c.get("index_wru", 0) for c in self.capacity.values())
        rru = sum(c.get("rru", 0) for c in self.capacity.values())
        add(
            "DynamoDB writes (table + by_state index)",
            "DynamoDB",
            d * wru / 1e6 * PRICES["ddb_wru"].usd,
            f"{wru:g} WRU per delivery",
        )
        add(
            "DynamoDB reads",
            "DynamoDB",
            d * rru / 1e6 * PRICES["ddb_rru"].usd,
            f"{rru:g} RRU per delivery",
        )
        retention_months = self.config["inbox_retention_days"] / 30
        item_bytes = sum(
            k["count_per_delivery"] * (k["mean_bytes"] + 100) for k in self.items.values()
        )
        index_bytes = self.items.get("inbox", {}).get("mean_bytes", 0) + 100
        stored_gb = d * retention_months * (item_bytes + index_bytes) / GB
        add(
            "DynamoDB storage (retention period)",
            "DynamoDB",
            stored_gb * PRICES["ddb_storage"].usd,
            f"{stored_gb:,.1f} GB at rest ({item_bytes + index_bytes:,.0f} B per delivery "
            "incl. index and 100 B/item overhead)",
        )
        add(
            "DynamoDB point-in-time recovery",
            "DynamoDB",
            stored_gb * PRICES["ddb_pitr"].usd,
            f"{stored_gb:,.1f} GB",
        )
        add("DynamoDB Streams (read by the relay's trigger)", "DynamoDB", 0.0, "free for Lambda")

        # SQS: the relay's send, the event-source mapping's receive and delete per batch.
        sends = d * self.calls["relay"].get("sqs.SendMessage", 1)
        polls = d / worker_batch * 2 + SQS_EMPTY_RECEIVES_PER_MONTH.value
        add(
            "SQS",
            "SQS",
            (sends + polls) / 1e6 * PRICES["sqs"].usd,
            f"{sends + polls:,.0f} requests",
        )

        # S3 archive (the default workflow keeps the package for the retention period).
        puts = d * self.calls["worker"].get("s3.PutObject", 0)
        add("S3 archive PUTs", "S3", puts / 1000 * PRICES["s3_put"].usd, f"{puts:,.0f} PUTs")
        s3_gb = d * retention_months * self.archive_bytes / GB
        add("S3 archive storage", "S3", s3_gb * PRICES["s3_storage"].usd, f"{s3_gb:,.1f} GB")

        # CloudWatch: logs (measured bytes), metrics, alarms, dashboard; X-Ray.
        log_gb = d * sum(self.log_bytes.values()) / GB
        log_usd = _tiered(log_gb, [(10_240, PRICES["logs_ingest"].usd), (math.inf, 0.25)])
        retention = self.config["log_retention_days"] / 30
        add(
            "CloudWatch Logs ingestion + storage",
            "CloudWatch",
            log_usd + log_gb * retention * PRICES["logs_storage"].usd,
            f"{log_gb:,.1f} GB ({sum(self.log_bytes.values()):,.0f} B per delivery)",
        )
        add(
            "CloudWatch metrics (EMF), alarms, dashboard",
            "CloudWatch",
            self.metrics * PRICES["metric"].usd
            + self.alarms * PRICES["alarm"].usd
            + PRICES["dashboard"].usd,
            f"{self.metrics} metrics, {self.alarms} alarms, 1 dashboard",
        )
        traces = sum(
            min(n, SECONDS_PER_MONTH) + 0.05 * max(0.0, n - SECONDS_PER_MONTH)
            for n in invocations.values()
        )
        add(
            "X-Ray (active tracing, default sampling)",
            "CloudWatch",
            traces / 1e6 * PRICES["xray"].usd,
            f"{traces:,.0f} traces (1/s + 5 % per function)",
        )

        # Secrets Manager, KMS, data transfer.
        containers = max(1.0, rps * self.receiver_ms() / 1000) + max(
            1.0, rps * self.worker_ms_per_message() / 1000
        )
        secret_calls = (
            containers * SECONDS_PER_MONTH / setting_defaults.DEFAULT_SECRETS_MAX_AGE_SECONDS
        )
        add(
            "Secrets Manager (2 secrets + fetches)",
            "Other",
            2 * PRICES["secret"].usd + secret_calls / 10_000 * PRICES["secret_calls"].usd,
            f"{secret_calls:,.0f} fetches (one per warm container per "
            f"{setting_defaults.DEFAULT_SECRETS_MAX_AGE_SECONDS} s)",
        )
        add("KMS key of the alarm topic", "Other", PRICES["kms_key"].usd, "1 key")
        egress_gb = d * EGRESS_BYTES.value / GB
        add(
            "Data transfer out (MCP, notifications)",
            "Other",
            egress_gb * PRICES["egress"].usd,
            f"{egress_gb:,.1f} GB",
        )
        return out

    @staticmethod
    def rest_api(deliveries: int) -> float:
        """What the REST API would cost instead of the HTTP API."""
        return _tiered(
            deliveries / 1e6,
            [
                (333, PRICES["rest_api"].usd),
                (667, PRICES["rest_api_2"].usd),
                (19_000, PRICES["rest_api_3"].usd),
            ],
        )

    def _stream_shards(self, deliveries: int) -> int:
        """Stream shards follow table partitions: ~1 per 1,000 WRU/s of writes."""
        wru = sum(c.get("table_wru", 0) for c in self.capacity.values())
        return max(1, math.ceil(deliveries / SECONDS_PER_MONTH * wru / 1000))


def _volume(deliveries: int) -> str:
    return f"{deliveries / 1e9:g} B" if deliveries >= 1e9 else f"{deliveries / 1e6:g} M"


def _usd(value: float) -> str:
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.3f}"


def render(figures: list[Figure], run: dict[str, Any]) -> str:
    by_number = {f.number: f for f in figures}
    from infra.config import StackConfig  # noqa: PLC0415 (CDK-free settings)

    defaults = StackConfig()
    config = {
        "reconcile_every_minutes": defaults.reconcile_every_minutes,
        "inbox_retention_days": defaults.inbox_retention_days,
        "log_retention_days": defaults.log_retention_days,
        "worker_max_concurrency": defaults.worker_max_concurrency,
        "api_rate_limit": defaults.api_rate_limit,
        "api_burst_limit": defaults.api_burst_limit,
    }
    model = Model(by_number, config)
    bills = {v: model.lines(v) for v in VOLUMES}
    lines = [
        "# Cost per delivery",
        "",
        f"Written by `make bench` ({run['date (UTC)']}, commit {run['commit']}) from the "
        "figures of the same run (docs/benchmarks.md); do not edit by hand.",
        "",
        f"**Prices:** AWS list prices for **{REGION}**, as published on the services' "
        f"pricing pages and known to the author as of **{PRICE_DATE}** (DynamoDB on-demand "
        "after its November 2024 reduction; Lambda's INIT phase billed like invocation "
        "time, as AWS announced for 1 August 2025); no free tier, savings plans or "
        "reserved capacity. Check https://aws.amazon.com/pricing/ before relying on them. "
        "Lambda on arm64 (the build target). Measured quantities come from this run; "
        "assumed ones (network times inside AWS, the partner's MCP server) are marked "
        "`assumed` under Inputs.",
        "",
        "## Dollars per million deliveries",
        "",
        "A delivery: one accepted `package.received`, processed once by the default "
        "workflow (archive to S3, one notification). Variable cost at 1 M deliveries a "
        "month, per million; the fixed monthly items (alarms, metrics, dashboard, "
        "secrets, key) are listed at the end of the same table (the SQS line includes "
        "the event-source mapping's idle polling).",
        "",
        "| component | $ per 1 M deliveries | basis (at 1 M / month) |",
        "|---|---|---|",
    ]
    one_million = bills[VOLUMES[0]]
    fixed_names = {
        "CloudWatch metrics (EMF), alarms, dashboard",
        "Secrets Manager (2 secrets + fetches)",
        "KMS key of the alarm topic",
    }
    variable = [x for x in one_million if x.component not in fixed_names]
    for x in sorted(variable, key=lambda x: -x.usd_per_month):
        lines.append(f"| {x.component} | {_usd(x.usd_per_month)} | {x.basis} |")
    variable_total = sum(x.usd_per_month for x in variable)
    lines.append(f"| **variable total** | **{_usd(variable_total)}** | |")
    rest = model.rest_api(VOLUMES[0])
    lines.append(
        f"| (REST API instead of HTTP API) | {_usd(rest)} "
        f"| +{_usd(rest - one_million[0].usd_per_month)} per 1 M |"
    )
    for x in one_million:
        if x.component in fixed_names:
            lines.append(
                f"| {x.component} (fixed, per month) | {_usd(x.usd_per_month)} | {x.basis} |"
            )
    lines += [
        "",
        "## At 1 M, 100 M and 1 B deliveries a month",
        "",
        "| group | 1 M / month | 100 M / month | 1 B / month |",
        "|---|---|---|---|",
    ]
    groups = ["API Gateway", "Lambda", "DynamoDB", "SQS", "S3", "CloudWatch", "Other"]
    totals = {v: sum(x.usd_per_month for x in bills[v]) for v in VOLUMES}
    for group in groups:
        cells = [_usd(sum(x.usd_per_month for x in bills[v] if x.group == group)) for v in VOLUMES]
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    lines.append("| **total** | " + " | ".join(f"**{_usd(totals[v])}**" for v in VOLUMES) + " |")
    lines.append(
        "| per 1 M deliveries | " + " | ".join(_usd(totals[v] / (v / 1e6)) for v in VOLUMES) + " |"
    )
    lines += ["", "What dominates:", ""]
    for v in VOLUMES:
        ranked = sorted(bills[v], key=lambda x: -x.usd_per_month)
        top = ", ".join(
            f"{x.component} {100 * x.usd_per_month / totals[v]:.0f} %" for x in ranked[:3]
        )
        lines.append(f"- **{_volume(v)} / month:** {top}.")
    lines += _reading(model, bills)
    lines += [
        "",
        "## Inputs",
        "",
        "| input | value | source |",
        "|---|---|---|",
        f"| receiver billed duration | {model.receiver_ms():.0f} ms | CPU "
        f"{model.receiver_cpu_ms.value:.2f} ms ({model.receiver_cpu_ms.source}) x "
        f"{model._cpu_scale('receiver'):.1f} (CPU share at {model.memory['receiver']} MB) + "
        f"{DYNAMODB_WRITE_MS.value:.0f} ms ({DYNAMODB_WRITE_MS.source}) |",
        f"| worker billed duration per message | {model.worker_ms_per_message():.0f} ms | CPU "
        f"{model.worker_cpu_ms.value:.1f} ms ({model.worker_cpu_ms.source}) x "
        f"{model._cpu_scale('worker'):.1f}, plus waits: MCP {MCP_CALL_MS.value:.0f} ms "
        f"({MCP_CALL_MS.source}), notification {NOTIFY_MS.value:.0f} ms ({NOTIFY_MS.source}), "
        f"S3 {S3_PUT_MS.value:.0f} ms, {DYNAMODB_CALL_MS.value:.0f} ms per DynamoDB call |",
        f"| memory | {', '.join(f'{k} {v} MB' for k, v in model.memory.items())} | infra/*.py |",
    ]
    for function, ops in model.calls.items():
        calls = ", ".join(f"{op} {n:g}" for op, n in ops.items())
        lines.append(f"| {function} AWS calls per delivery | {calls} | measured: figure 7 |")
    log_text = ", ".join(f"{k} {v:,.0f}" for k, v in model.log_bytes.items())
    items_text = ", ".join(
        f"{k} {v['count_per_delivery']:g} x {v['mean_bytes']:.0f} B" for k, v in model.items.items()
    )
    for function, units in model.capacity.items():
        text = ", ".join(f"{u} {n:g}" for u, n in units.items())
        lines.append(
            f"| {function} DynamoDB capacity per delivery | {text} "
            "| measured: figure 7 (model of DynamoDB's rules) |"
        )
    lines += [
        f"| log bytes per delivery | {log_text} | measured: figure 7 |",
        f"| items at rest per delivery | {items_text} | measured: figure 7 |",
        f"| retention | inbox {config['inbox_retention_days']} days, logs "
        f"{config['log_retention_days']} days | infra/config.py defaults |",
        f"| cold starts | {COLD_START_RATE.value:g} per request x {model.cold_ms.value:.0f} ms "
        f"| {COLD_START_RATE.source}; {model.cold_ms.source} |",
        f"| data transfer out | {EGRESS_BYTES.value:,.0f} B per delivery | {EGRESS_BYTES.source} |",
        f"| idle SQS polling | {SQS_EMPTY_RECEIVES_PER_MONTH.value:,.0f} receives / month "
        f"| {SQS_EMPTY_RECEIVES_PER_MONTH.source} |",
        "",
        "## Prices used",
        "",
        "| item | USD | per |",
        "|---|---|---|",
        *(f"| {p.what} | {p.usd:g} | {p.per} |" for p in PRICES.values()),
    ]
    lines += _limits(model, config)
    return "\n".join(lines).rstrip() + "\n"


def _reading(model: Model, bills: dict[int, list[Line]]) -> list[str]:
    """What the numbers say, in sentences computed from them."""

    def usd(volume: int, component: str) -> float:
        return sum(x.usd_per_month for x in bills[volume] if x.component.startswith(component))

    receiver = model.capacity.get("receiver", {})
    worker = model.capacity.get("worker", {})
    r_total = receiver.get("table_wru", 0) + receiver.get("index_wru", 0)
    w_total = worker.get("table_wru", 0) + worker.get("index_wru", 0)
    index = receiver.get("index_wru", 0) + worker.get("index_wru", 0)
    low, high = VOLUMES[0], VOLUMES[-1]
    per_m = 1e6 / low
    return [
        "",
        f"- **DynamoDB writes** are the largest cost at scale: {r_total + w_total:g} WRU per "
        f"delivery, of which the receiver's one transaction is {r_total:g} (2 items at 2 WRU, "
        f"+{receiver.get('index_wru', 0):g} for the `by_state` index) and the worker's claim, "
        f"effect ledger and completion {w_total:g}; {index:g} of the {r_total + w_total:g} are "
        "index writes (projection ALL, and every state change moves the item between "
        "index partitions).",
        f"- **X-Ray** costs {_usd(usd(low, 'X-Ray') * per_m)} per 1 M at 1 M / month, when "
        "every invocation of each function is sampled (Lambda samples 1 request/s and 5 % "
        f"above it), and {_usd(usd(high, 'X-Ray') / (high / 1e6))} per 1 M at 1 B. A "
        "sampling rule, or `Tracing.PASS_THROUGH`, moves it.",
        f"- **S3 archive PUTs** ({_usd(usd(low, 'S3 archive PUTs') * per_m)} per 1 M) are "
        "the default workflow's archive effect; a workflow without it saves them.",
        f"- **The worker's Lambda time** ({_usd(usd(high, 'Lambda worker') / (high / 1e6))} "
        "per 1 M) is mostly waiting: the assumed 300 ms MCP answer and 50 ms notification "
        "are billed at 512 MB.",
        f"- **API Gateway** is {_usd(usd(low, 'API Gateway') * per_m)} per 1 M with the HTTP "
        f"API; the REST API would be {_usd(model.rest_api(low) * per_m)}.",
    ]


def _limits(model: Model, config: dict[str, Any]) -> list[str]:
    worker_s = model.worker_ms_per_message() / 1000
    worker_rps = config["worker_max_concurrency"] / worker_s
    wru = sum(c.get("table_wru", 0) + c.get("index_wru", 0) for c in model.capacity.values())

    batch_ms = 20 + event_source_limits.RELAY_BATCH_SIZE * model.relay_ms_per_record()
    relay_rps = event_source_limits.RELAY_BATCH_SIZE * 1000 / batch_ms

    def per_month(rps: float) -> float:
        return rps * SECONDS_PER_MONTH / 1e6

    def rate(deliveries_per_month: float) -> float:
        return deliveries_per_month / SECONDS_PER_MONTH

    return [
        "",
        "## Scaling limits, and the setting that moves each",
        "",
        "| limit | where it binds | what moves it |",
        "|---|---|---|",
        f"| Worker concurrency: {config['worker_max_concurrency']} concurrent batches, "
        f"messages one after another at ~{worker_s:.2f} s each | ~{worker_rps:.0f} deliveries/s "
        f"(~{per_month(worker_rps):,.0f} M / month): **below 100 M / month**; the queue "
        "absorbs bursts, but sustained traffic above it only grows the backlog | "
        "`worker_max_concurrency` (cdk context, infra/config.py; SQS event sources allow up "
        f"to 1,000); 100 M / month needs ~{math.ceil(rate(100e6) * worker_s):d}+, 1 B / month "
        f"~{math.ceil(rate(1e9) * worker_s):d}+ (and a Lambda concurrency quota above it) |",
        f"| API stage throttle: `api_rate_limit` {config['api_rate_limit']} requests/s, burst "
        f"{config['api_burst_limit']} | ~{per_month(config['api_rate_limit']):,.0f} M / month "
        "average; RelayLink's retries after a throttled (429) burst add to it | "
        "`api_rate_limit`, `api_burst_limit` (cdk context, infra/config.py) |",
        "| Lambda account concurrency: 1,000 per region by default, shared by all functions; "
        "each function scales by 1,000 per 10 s | receiver at 1 B / month needs only "
        f"~{rate(1e9) * model.receiver_ms() / 1000:.0f} concurrent; the worker needs the most | "
        "Service Quotas increase; reserved concurrency per function |",
        "| API Gateway HTTP API: 10,000 requests/s per account and region (burst 5,000) | "
        "~26 B / month average, but bursts of RelayLink retries hit it sooner | Service "
        "Quotas increase; per-route throttling in the stage |",
        f"| DynamoDB on-demand table: 40,000 WRU/s per table by default; a new table "
        f"starts at 4,000 WRU/s and doubles with its peak | {wru:g} WRU per delivery: ~"
        f"{40_000 / wru:,.0f} deliveries/s at the quota "
        f"(~{per_month(40_000 / wru) / 1000:,.1f} B / "
        f"month), ~{4_000 / wru:,.0f}/s on a cold new table | table max throughput quota; "
        "warm throughput (pre-warming) before a launch |",
        "| DynamoDB partition: 1,000 WRU/s per partition key | the table's keys are "
        "delivery ids (spread evenly); the `by_state` index's partition key is "
        f"`state#shard` with {table_layout.STATE_INDEX_SHARDS} shards, so each state's "
        f"index writes share {table_layout.STATE_INDEX_SHARDS} partitions: "
        f"~{table_layout.STATE_INDEX_SHARDS * 1000 / 2:,.0f} "
        "deliveries/s (two index writes per delivery per state) | "
        "`table_layout.STATE_INDEX_SHARDS` (the reconciler and operator queries fan out over "
        "it) |",
        "| DynamoDB Streams: one relay invocation per shard at a time, batches of "
        f"{event_source_limits.RELAY_BATCH_SIZE}, one SQS send per record | ~{relay_rps:.0f} "
        "records/s per shard; shards follow table partitions, so more traffic brings "
        "more shards | `parallelization_factor` on the stream event source (up to 10), "
        "`event_source_limits.RELAY_BATCH_SIZE`, or `SendMessageBatch` in the relay |",
        "| SQS standard queue: nearly unlimited throughput; 120,000 in-flight messages | "
        "only if the worker falls behind by more than 120,000 messages | scale the worker "
        "(above); the queue's retention (the backlog's time budget) |",
    ]


def write(figures: list[Figure], run: dict[str, Any], path: Path) -> None:
    path.write_text(render(figures, run), encoding="utf-8")
