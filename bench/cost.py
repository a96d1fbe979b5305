"""``docs/cost.md``: dollars per million deliveries, from the figures of this run.

What is measured (in the same ``make bench`` run) and what is assumed are kept
apart: every quantity is a :class:`Quantity` that says which. Prices are AWS list
prices for us-east-1 (:data:`PRICES`), without the free tier, savings plans or
reserved capacity.
"""

from __future__ import annotations

import ast
import copy
import json
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.report import Figure, Row, Target
from bench.write_units import WORKFLOW_PHASE, WORKFLOW_RECORD_PREFIXES, item_size
from functions.core import event_source_limits, metric_names, settings_table, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.work_queue import SEND_BATCH_LIMIT
from functions.core.reconcile import RECEIVED_WINDOW_SECONDS

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
REGION: Final = "us-east-1"
PRICE_DATE: Final = "2025-06"
VOLUMES: Final = (1_000_000, 100_000_000, 1_000_000_000)
SECONDS_PER_MONTH: Final = 30 * 24 * 3600
WORKER_BATCH: Final = event_source_limits.WORKER_BATCH_SIZE  # a full batch
# Groups of the bill that are not the pipeline's: what the workflow does, and pays for.
WORKFLOW_EFFECTS: Final = "Workflow effects"
MODEL_TOKENS: Final = "Model tokens"
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
DYNAMODB_BATCH_GET_MS: Final = Quantity(
    20.0, "assumed: one consistent BatchGetItem of 100 small items in-region"
)
MCP_CALL_MS: Final = Quantity(300.0, "assumed: the partner MCP server answers in 300 ms (figure 5)")
NOTIFY_MS: Final = Quantity(50.0, "assumed: the notification endpoint answers in 50 ms")
S3_PUT_MS: Final = Quantity(20.0, "assumed: one small S3 PUT")
EGRESS_BYTES: Final = Quantity(2500.0, "assumed: MCP request + notification sent, per delivery")
# What figure 7 cannot see of the data sent out: TLS (a handshake per MCP session of a
# batch of 10, about 30 B per record) and the receiver's answer to RelayLink through
# API Gateway (status line, headers, a short JSON body).
EGRESS_OVERHEAD_BYTES: Final = Quantity(
    400.0, "assumed: TLS on the MCP requests and the receiver's HTTP answer, per delivery"
)
TTL_DELETION_LAG_DAYS: Final = Quantity(
    2.0, "assumed: DynamoDB deletes an expired item within a few days of its TTL"
)
REFERENCE_CPU_MB: Final = 1769  # Lambda gives one full vCPU at 1,769 MB
# The agent workflow's model tokens, shown apart from the pipeline (the default
# workflow calls no model): a stated assumption, not a measurement.
MODEL_TOKENS_PER_DELIVERY: Final = Quantity(
    1500.0, "assumed: the agent workflow's prompt + answer for one package"
)
MODEL_USD_PER_1000_TOKENS: Final = Quantity(
    0.002, "assumed: a small Bedrock model, input and output tokens blended"
)
# The target this document is measured against (docs/benchmarks.md, figure 9).
TARGET_PIPELINE_USD_PER_MILLION_AT_100M: Final = 8.0
# The same at 1 M deliveries a month, where the fixed items (alarms, metrics, secrets,
# key) weigh most.
SMALL_VOLUME: Final = 1_000_000
TARGET_PIPELINE_USD_PER_MILLION_AT_1M: Final = 15.0
TARGET_VOLUME: Final = 100_000_000
# Worker GB-seconds per delivery at a 300 ms MCP answer before the batch ran its
# messages concurrently (263,184 GB-s per million, commit df85aab): the target is a
# quarter of it.
WORKER_GB_S_BEFORE: Final = 263_184 / 1e6
TARGET_WORKER_GB_S: Final = WORKER_GB_S_BEFORE / 4
# $ per 1 M deliveries at 1 M / month per component in the run before the targets of
# figure 9 (docs/cost.md of commit df85aab), for the "before -> after" lines.
BEFORE_COMMIT: Final = "df85aab"
BEFORE_USD_PER_MILLION: Final = {
    "X-Ray": 15.04,
    "DynamoDB writes": 11.88,
    "S3 archive PUTs": 5.00,
    "Lambda worker": 3.71,
    "SQS": 1.46,
    "API Gateway HTTP API": 1.00,
    "DynamoDB storage": 0.456,
    "CloudWatch Logs": 0.405,
    "DynamoDB point-in-time recovery": 0.365,
    "Lambda receiver": 0.287,
    "Lambda relay": 0.283,
    "DynamoDB reads": 0.250,
    "Data transfer out": 0.210,
}
BEFORE_PIPELINE_AT_100M: Final = 19.70  # $ per 1 M at 100 M / month without the S3 archive
# $ per 1 M at 100 M / month per component in the last committed run before the
# pipeline was billed with the default workflow (docs/cost.md of commit 3917c4b: the
# notify workflow's pipeline, 13 WRU, its effects' worker time and data inside).
BEFORE_100M_COMMIT: Final = "3917c4b"
BEFORE_USD_PER_MILLION_AT_100M: Final = {
    "DynamoDB writes": 8.125,
    "API Gateway HTTP API": 1.000,
    "Lambda worker": 0.796,
    "SQS": 0.483,
    "CloudWatch Logs": 0.405,
    "DynamoDB storage": 0.338,
    "Lambda receiver": 0.293,
    "DynamoDB point-in-time recovery": 0.270,
    "DynamoDB reads": 0.250,
    "Data transfer out": 0.210,
    "CloudWatch metrics": 0.124,
    "Lambda relay": 0.044,
    "Secrets Manager": 0.012,
    "KMS key": 0.010,
}
COLD_START_RATE: Final = Quantity(
    1 / 10_000, "assumed: one cold start per 10,000 receiver requests (steady traffic)"
)
SQS_EMPTY_RECEIVES_PER_MONTH: Final = Quantity(
    5 * 3 * 60 * 24 * 30,
    "assumed: the event-source mapping's 5 pollers long-poll (20 s) when the queue is idle",
)


def _memory_mb(worker_memory_mb: int) -> dict[str, int]:
    """The functions' memory sizes, read from infra (the defaults where none is set);
    the worker's is a setting (``worker_memory_mb``, infra/config.py)."""
    sizes: dict[str, int] = {}
    for function in ("receiver", "relay", "reconciler"):
        text = (REPO_ROOT / "infra" / f"{function}.py").read_text(encoding="utf-8")
        found = re.search(r"memory_size=(\d+)", text)
        sizes[function] = int(found.group(1)) if found else 256
    sizes["worker"] = worker_memory_mb
    return sizes


@dataclass(frozen=True)
class DynamoDbInputs:
    """Every DynamoDB quantity the model bills, in one place.

    Attributes:
        wru: the pipeline's write request units per delivery, by function (table +
            index writes), without the workflow's effect and step records.
        index_wru: of those, the index writes (all functions).
        effect_wru: write units of the workflow's effect and step records per delivery
            (billed as a workflow effect, outside the pipeline).
        rru: read request units per delivery (all functions), without the workflow's.
        effect_rru: read units of the workflow's records (its effect ledger's reads).
        kinds_at_rest: the pipeline's items per delivery by kind (``inbox``, ``outbox``,
            ...), bytes with DynamoDB's 100 B overhead per item.
        effect_kinds_at_rest: the same for the workflow's effect and step records.
        source: where the figures come from.
    """

    wru: dict[str, float]
    index_wru: float
    effect_wru: float
    rru: float
    effect_rru: float
    kinds_at_rest: dict[str, float]
    effect_kinds_at_rest: dict[str, float]
    source: str

    @property
    def wru_total(self) -> float:
        return sum(self.wru.values())

    @property
    def bytes_at_rest(self) -> float:
        return sum(self.kinds_at_rest.values())

    @property
    def effect_bytes_at_rest(self) -> float:
        return sum(self.effect_kinds_at_rest.values())


WORKFLOW_RECORD_KINDS: Final = (table_layout.KIND_EFFECT, "step")
# Items at rest are counted by kind; the index entries of completed deliveries too.
INDEX_ENTRY_KIND: Final = "listing index entry"
# "receiver: Transact Put inbox (new, pending)": the function, then the record's sort key.
_WRITE_LABEL: Final = re.compile(r"^(?P<function>[^:]+): (?:Transact )?\S+ (?P<record>\S+) \(")


def _workflow_record(record: str) -> bool:
    return record.startswith(WORKFLOW_RECORD_PREFIXES)


def dynamodb_inputs(pipeline: dict[str, Any], write_units: dict[str, Any]) -> DynamoDbInputs:
    """Write units from figure 11 (the default workflow, metered from the items each write
    changed), reads and item sizes from figure 7 (the same pipeline, more deliveries).
    The workflow's effect and step records are split off: they are what the workflow
    does, not what carrying a delivery costs."""
    wru: dict[str, float] = {}
    index_wru = effect_wru = 0.0
    for row in write_units["writes_per_delivery"]:
        found = _WRITE_LABEL.match(row["write"])
        function = row.get("function") or (found["function"] if found else "?")
        record = row.get("record") or (found["record"] if found else "?")
        units = row["table_wru"] + row["index_wru"]
        if _workflow_record(record):
            effect_wru += units
            continue
        wru[function] = wru.get(function, 0.0) + units
        index_wru += row["index_wru"]
    capacity: dict[str, dict[str, float]] = pipeline["dynamodb_capacity_units_per_delivery"]
    items: dict[str, dict[str, float]] = pipeline["items_at_rest"]

    stored = {k: v["count_per_delivery"] * (v["mean_bytes"] + 100) for k, v in items.items()}
    # The state index is sparse and keys-only: at rest a completed delivery keeps one
    # keys-only entry under the completed label (table keys, state_shard, listed_at),
    # for as long as its inbox item.
    stored[INDEX_ENTRY_KIND] = _completed_entry_bytes() + 100
    return DynamoDbInputs(
        wru=wru,
        index_wru=index_wru,
        effect_wru=effect_wru,
        rru=sum(c.get("rru", 0) for f, c in capacity.items() if f != WORKFLOW_PHASE),
        effect_rru=capacity.get(WORKFLOW_PHASE, {}).get("rru", 0.0),
        kinds_at_rest={k: v for k, v in stored.items() if k not in WORKFLOW_RECORD_KINDS},
        effect_kinds_at_rest={k: v for k, v in stored.items() if k in WORKFLOW_RECORD_KINDS},
        source=(
            "measured: write units figure 11 (default workflow, metered by DynamoDB's "
            "rules), reads and item sizes figure 7"
        ),
    )


def _completed_entry_bytes() -> int:
    """The size of a completed delivery's keys-only index entry (a uuid delivery id)."""
    delivery_id = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"
    return item_size(
        {
            **dynamodb_items.inbox_key(delivery_id),
            table_layout.STATE_INDEX_PARTITION_KEY: {
                "S": dynamodb_items.state_shard(table_layout.STATE_LABEL_COMPLETED, delivery_id)
            },
            table_layout.STATE_INDEX_SORT_KEY: {"N": "1800000000"},
        }
    )


# What an access-log line of the HTTP API stage holds for an accepted delivery, by
# variable (the rest of the line is infra/receiver.py's format, as deployed).
ACCESS_LOG_SAMPLE: Final = {
    "$context.requestId": "Jk2LmhzxoAMEbXw=",
    "$context.extendedRequestId": "Jk2LmhzxoAMEbXw=",
    "$context.requestTimeEpoch": "1796346007819",
    "$context.httpMethod": "POST",
    "$context.routeKey": "POST /relaylink",
    "$context.status": "202",
    "$context.protocol": "HTTP/1.1",
    "$context.responseLength": "40",
    "$context.responseLatency": "25",
    "$context.integrationStatus": "200",
    "$context.integrationLatency": "24",
    "$context.error.message": "-",
    "$context.identity.sourceIp": "203.0.113.120",
    "$context.identity.userAgent": "RelayLink-Webhooks/1.0",
}


def access_log_bytes() -> Quantity:
    """One access-log line of the receiver's HTTP API stage: the deployed format
    (``ACCESS_LOG_FIELDS`` of infra/receiver.py, read without importing CDK) with
    :data:`ACCESS_LOG_SAMPLE`'s values."""
    tree = ast.parse((REPO_ROOT / "infra" / "receiver.py").read_text(encoding="utf-8"))
    fields = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "ACCESS_LOG_FIELDS" for t in node.targets)
    )
    # Compact, as infra/receiver.py's ACCESS_LOG_FORMAT writes it.
    line = json.dumps(
        {name: ACCESS_LOG_SAMPLE.get(v, v) for name, v in fields.items()}, separators=(",", ":")
    )
    return Quantity(
        float(len(line.encode()) + 1),
        "assumed: infra/receiver.py's access-log format with an accepted delivery's values",
    )


def _alarm_count() -> int:
    """The alarms of the default stack (cdk.json's context, no bundling), as synthesized."""
    from infra.application import build_app  # noqa: PLC0415 (the CDK: only when counted)

    context = json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    with tempfile.TemporaryDirectory() as outdir:
        app, stack = build_app(context={**context, "aws:cdk:bundling-stacks": []}, outdir=outdir)
        template = app.synth().get_stack_by_name(stack.stack_name).template
    return sum(1 for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm")


def _metric_names() -> set[str]:
    """The counts billed as CloudWatch metrics for the default stack: the alarmed ones
    (the rest are fields of the functions' log lines, already priced as log bytes), less
    those only a model-calling or approval-gated workflow ever publishes."""
    return set(metric_names.PUBLISHED_METRICS - metric_names.WORKFLOW_ONLY_METRICS)


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
        self.memory = _memory_mb(config["worker_memory_mb"])
        self.config = config
        self.tracing: bool = config["tracing"]
        pipeline = figures[7].details
        # The shapes bench.pipeline_calls.PipelineCalls.to_json writes.
        self.calls: dict[str, dict[str, float]] = pipeline["calls_per_delivery"]
        self.capacity: dict[str, dict[str, float]] = pipeline[
            "dynamodb_capacity_units_per_delivery"
        ]
        self.dynamodb = dynamodb_inputs(pipeline, figures[11].details)
        self.workflow: str = pipeline.get("workflow", "notify")
        applied = pipeline.get("notify_applications", {}).get("total", 0)
        # Runs before the field existed measured the notify workflow: one per delivery.
        self.notifications: float = pipeline.get(
            "notifications_per_delivery", 1.0 if applied or "workflow" not in pipeline else 0.0
        )
        measured_egress = pipeline.get("mcp_request_bytes_per_delivery")
        self.egress = (
            Quantity(
                measured_egress + EGRESS_OVERHEAD_BYTES.value,
                f"measured: figure 7, {measured_egress:,.0f} B sent to the MCP server per "
                f"delivery; + {EGRESS_OVERHEAD_BYTES.value:,.0f} B "
                f"({EGRESS_OVERHEAD_BYTES.source})",
            )
            if measured_egress is not None
            else EGRESS_BYTES
        )
        self.log_bytes: dict[str, float] = pipeline["log_bytes_per_delivery"]
        self.items: dict[str, dict[str, float]] = pipeline["items_at_rest"]
        self.archive_bytes: float = pipeline["archive_bytes_per_delivery"]
        canned = figures[2].details["canned"]
        self.receiver_cpu_ms = Quantity(
            canned["handler_us"]["median"] / 1000,
            "measured: figure 2, handler time with DynamoDB answering at once",
        )
        worker = figures[8].details
        self.worker_cpu_ms = Quantity(
            worker["cpu_ms_per_message"]["median"],
            "measured: figure 8, the worker process's CPU time per message in a batch of "
            f"{worker['batch_size']} (this machine's CPU)",
        )
        # Without the workflow's work (runs before figure 8 measured it: all of it).
        bare = worker.get("no_workflow", worker)
        self.worker_bare_cpu_ms = Quantity(
            min(bare["cpu_ms_per_message"]["median"], self.worker_cpu_ms.value),
            "measured: figure 8, the same with a workflow that does nothing",
        )
        self.workflow_calls: dict[str, float] = pipeline.get("workflow_calls_per_delivery", {}).get(
            "worker", {}
        )
        self.worker_rss_mb = float(worker["max_rss_mb"])
        cold = figures[3].details["receiver"]["receiver_ms"]
        self.cold_ms = Quantity(cold["total_ms"]["median"], "measured: figure 3, receiver total")
        self.alarms = _alarm_count()
        self.access_log_bytes = access_log_bytes()
        self.metrics = len(_metric_names())
        self.dashboards = 1 if config.get("dashboard") else 0

    def _cpu_scale(self, function: str) -> float:
        """Lambda's CPU share scales with memory: CPU-bound time stretches below 1,769 MB."""
        return max(1.0, REFERENCE_CPU_MB / self.memory[function])

    def receiver_ms(self) -> float:
        cpu = self.receiver_cpu_ms.value * self._cpu_scale("receiver")
        return math.ceil(cpu + DYNAMODB_WRITE_MS.value)  # billed in whole milliseconds

    def worker_wait_ms(self, batch: float, *, effects: bool = True) -> float:
        """A batch's waiting: one message's calls one after another, the messages side by
        side. In a batch of more than one, the first message to a server fetches alone
        (it probes the server for the others), so two MCP answers are waited for.
        ``effects=False``: without the calls made for the workflow's effects."""

        def dynamodb(calls: dict[str, float]) -> float:
            return sum(n for op, n in calls.items() if op.startswith("dynamodb."))

        effect_calls = dynamodb(self.workflow_calls)
        pipeline = MCP_CALL_MS.value * (2 if batch > 1 else 1) + DYNAMODB_CALL_MS.value * (
            dynamodb(self.calls["worker"]) - effect_calls
        )
        if not effects:
            return pipeline
        return (
            pipeline
            + NOTIFY_MS.value * self.notifications
            + S3_PUT_MS.value * self.calls["worker"].get("s3.PutObject", 0)
            + DYNAMODB_CALL_MS.value * effect_calls
        )

    def worker_batch_ms(self, batch: float, *, effects: bool = True) -> float:
        """Billed time of one invocation: the waiting, plus every message's CPU time
        (threads share the function's CPU share), none of it assumed to overlap.
        ``effects=False``: the pipeline's part, without the workflow's work."""
        cpu_ms = self.worker_cpu_ms if effects else self.worker_bare_cpu_ms
        cpu = batch * cpu_ms.value * self._cpu_scale("worker")
        return self.worker_wait_ms(batch, effects=effects) + cpu

    def worker_ms_per_message(self, batch: float = WORKER_BATCH) -> float:
        return self.worker_batch_ms(batch) / batch

    def worker_gb_s_per_delivery(self, batch: float = WORKER_BATCH) -> float:
        return self.worker_ms_per_message(batch) / 1000 * self.memory["worker"] / 1024

    def lifetime_days(self, kind: str) -> float:
        """How long a record of ``kind`` is stored: its TTL, plus DynamoDB's lag in
        deleting expired items."""
        # Every record expires with its inbox item, the outbox record (the received log) too.
        del kind
        return float(self.config["inbox_retention_days"]) + TTL_DELETION_LAG_DAYS.value

    def byte_months(self, kinds: dict[str, float]) -> float:
        """Bytes x months stored per delivery (a month's deliveries at rest, steady state)."""
        return sum(size * self.lifetime_days(kind) / 30 for kind, size in kinds.items())

    def reconciler_log_reads(self) -> tuple[float, float, float]:
        """The reconciler's reads of the received log, by DynamoDB's metering rules:
        ``(RRU per delivery, RRU per month, WRU per month)``.

        Per receipt: its inbox item read by BatchGetItem, eventually consistent (0.5 RRU
        per 4 KB, rounded up per item: the listing that follows is a conditional write)
        and its share of the log's Query (eventually consistent:
        0.5 RRU per 4 KB of records read), looked at again within the overlap of the next
        run. Per run: the watermark's read (1 RRU), its update after each window that
        moves it (1 WRU each: the run's period in windows), and a Query per log shard per
        window (at least 0.5 RRU each, empty or not).
        """
        period = 60 * self.config["reconcile_every_minutes"]
        looked_at = 1 + table_layout.RECEIVED_LOG_OVERLAP_SECONDS / period
        inbox = 0.5 * max(1, math.ceil(self.items["inbox"]["mean_bytes"] / 4096))
        log = 0.5 * self.items["outbox"]["mean_bytes"] / 4096
        runs = SECONDS_PER_MONTH / period
        windows = math.ceil(
            (period + table_layout.RECEIVED_LOG_OVERLAP_SECONDS) / RECEIVED_WINDOW_SECONDS
        )
        per_run = 1 + windows * self.config["received_log_shards"] * 0.5
        advances = math.ceil(period / RECEIVED_WINDOW_SECONDS)
        return looked_at * (inbox + log), runs * per_run, runs * advances

    def relay_sends(self, records: float) -> float:
        """SQS requests for one relay invocation of ``records``: one per record, or one
        per ten when the relay batches (figure 7 shows which call it makes)."""
        if "sqs.SendMessageBatch" in self.calls["relay"]:
            return float(math.ceil(records / SEND_BATCH_LIMIT))
        return records * self.calls["relay"].get("sqs.SendMessage", 1)

    def relay_batch_ms(self, records: float) -> float:
        return 20 + DYNAMODB_CALL_MS.value * self.relay_sends(records)

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
            "relay": invocations["relay"] * self.relay_batch_ms(relay_batch) / 1000,
            "worker": invocations["worker"]
            * self.worker_batch_ms(worker_batch, effects=False)
            / 1000,
            # A run's fixed time, and its reads of the received log: a BatchGetItem per
            # 100 receipts (and their share of the log's Query pages).
            "reconciler": invocations["reconciler"] * 0.2
            + d * self.reconciler_log_reads()[0] / 100 * DYNAMODB_BATCH_GET_MS.value / 1000,
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
        effect_gb_s = (
            invocations["worker"]
            * (
                self.worker_batch_ms(worker_batch)
                - self.worker_batch_ms(worker_batch, effects=False)
            )
            / 1000
            * self.memory["worker"]
            / 1024
        )
        add(
            "Lambda worker time of the effects",
            WORKFLOW_EFFECTS,
            effect_gb_s * PRICES["lambda_arm_gbs"].usd,
            f"{effect_gb_s:,.0f} GB-s: the {self.workflow} workflow's CPU time (figure 8, "
            "beside a workflow that does nothing) and its calls' waits",
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
        wru = self.dynamodb.wru_total
        rru = self.dynamodb.rru
        add(
            "DynamoDB writes (table + state index)",
            "DynamoDB",
            d * wru / 1e6 * PRICES["ddb_wru"].usd,
            f"{wru:g} WRU per delivery (figure 11, without the workflow's effect records)",
        )
        effect_wru = self.dynamodb.effect_wru
        add(
            "DynamoDB effect records (writes)",
            WORKFLOW_EFFECTS,
            d * effect_wru / 1e6 * PRICES["ddb_wru"].usd,
            f"{effect_wru:g} WRU per delivery (figure 11: the {self.workflow} workflow's "
            "effect and step records)",
        )
        add(
            "DynamoDB reads",
            "DynamoDB",
            d * rru / 1e6 * PRICES["ddb_rru"].usd,
            f"{rru:g} RRU per delivery",
        )
        log_rru, run_rru, run_wru = self.reconciler_log_reads()
        add(
            "DynamoDB reads of the received log (reconciler)",
            "DynamoDB",
            (d * log_rru + run_rru) / 1e6 * PRICES["ddb_rru"].usd
            + run_wru / 1e6 * PRICES["ddb_wru"].usd,
            f"{log_rru:.3g} RRU per delivery (each receipt's inbox item, an eventually "
            f"consistent read once it is older than the received age, and its log record) + "
            f"{run_rru:,.0f} RRU and {run_wru:,.0f} WRU a month for the runs' log queries "
            "and watermark",
        )
        effect_rru = self.dynamodb.effect_rru
        add(
            "DynamoDB effect records (reads)",
            WORKFLOW_EFFECTS,
            d * effect_rru / 1e6 * PRICES["ddb_rru"].usd,
            f"{effect_rru:g} RRU per delivery (the effect ledger's reads, figure 7)",
        )
        retention_months = self.config["inbox_retention_days"] / 30
        stored_gb = d * self.byte_months(self.dynamodb.kinds_at_rest) / GB
        lifetimes = ", ".join(
            f"{kind} {self.lifetime_days(kind):g}" for kind in self.dynamodb.kinds_at_rest
        )
        add(
            "DynamoDB storage (retention period)",
            "DynamoDB",
            stored_gb * PRICES["ddb_storage"].usd,
            f"{stored_gb:,.1f} GB at rest ({self.dynamodb.bytes_at_rest:,.0f} B per delivery "
            f"incl. 100 B/item overhead and a completed delivery's keys-only index entry, "
            f"kept for days: {lifetimes})",
        )
        add(
            "DynamoDB point-in-time recovery",
            "DynamoDB",
            stored_gb * PRICES["ddb_pitr"].usd,
            f"{stored_gb:,.1f} GB",
        )
        effect_gb = d * self.byte_months(self.dynamodb.effect_kinds_at_rest) / GB
        add(
            "DynamoDB effect records (storage + point-in-time recovery)",
            WORKFLOW_EFFECTS,
            effect_gb * (PRICES["ddb_storage"].usd + PRICES["ddb_pitr"].usd),
            f"{effect_gb:,.1f} GB ({self.dynamodb.effect_bytes_at_rest:,.0f} B per delivery)",
        )
        add("DynamoDB Streams (read by the relay's trigger)", "DynamoDB", 0.0, "free for Lambda")

        # SQS: the relay's send, the event-source mapping's receive and delete per batch.
        sends = invocations["relay"] * self.relay_sends(relay_batch)
        polls = d / worker_batch * 2 + SQS_EMPTY_RECEIVES_PER_MONTH.value
        add(
            "SQS",
            "SQS",
            (sends + polls) / 1e6 * PRICES["sqs"].usd,
            f"{sends + polls:,.0f} requests ({sends:,.0f} relay sends, {relay_batch:.1f} "
            "records per relay batch)",
        )

        # S3 archive (the default workflow keeps the package for the retention period).
        puts = d * self.calls["worker"].get("s3.PutObject", 0)
        add(
            "S3 archive PUTs",
            WORKFLOW_EFFECTS,
            puts / 1000 * PRICES["s3_put"].usd,
            f"{puts:,.0f} PUTs",
        )
        s3_gb = d * retention_months * self.archive_bytes / GB
        add(
            "S3 archive storage",
            WORKFLOW_EFFECTS,
            s3_gb * PRICES["s3_storage"].usd,
            f"{s3_gb:,.1f} GB",
        )

        # CloudWatch: logs (measured bytes), metrics, alarms, dashboard; X-Ray.
        function_bytes = sum(self.log_bytes.values())
        log_bytes = function_bytes + self.access_log_bytes.value
        log_gb = d * log_bytes / GB
        log_usd = _tiered(log_gb, [(10_240, PRICES["logs_ingest"].usd), (math.inf, 0.25)])
        retention = self.config["log_retention_days"] / 30
        add(
            "CloudWatch Logs ingestion + storage",
            "CloudWatch",
            log_usd + log_gb * retention * PRICES["logs_storage"].usd,
            f"{log_gb:,.1f} GB ({log_bytes:,.0f} B per delivery: the functions' "
            f"{function_bytes:,.0f}, the HTTP API's access log {self.access_log_bytes.value:,.0f})",
        )
        add(
            "CloudWatch metrics (EMF), alarms, dashboard",
            "CloudWatch",
            self.metrics * PRICES["metric"].usd
            + self.alarms * PRICES["alarm"].usd
            + self.dashboards * PRICES["dashboard"].usd,
            f"{self.metrics} metrics (the alarmed counts; the others are log fields), "
            f"{self.alarms} alarms, {self.dashboards} dashboard"
            + (" (`-c dashboard=true` adds one)" if not self.dashboards else ""),
        )
        traces = self.traces(invocations)
        add(
            "X-Ray",
            "CloudWatch",
            traces / 1e6 * PRICES["xray"].usd if self.tracing else 0.0,
            f"active tracing, default sampling: {traces:,.0f} traces (1/s + 5 % per function)"
            if self.tracing
            else "tracing off (the default; `-c tracing=true` turns it on)",
        )

        # Secrets Manager, KMS, data transfer.
        containers = max(1.0, rps * self.receiver_ms() / 1000) + max(
            1.0,
            invocations["worker"] / SECONDS_PER_MONTH * self.worker_batch_ms(worker_batch) / 1000,
        )
        secret_calls = (
            containers * SECONDS_PER_MONTH / settings_table.SECRETS_MAX_AGE_SECONDS.default
        )
        add(
            "Secrets Manager (2 secrets + fetches)",
            "Other",
            2 * PRICES["secret"].usd + secret_calls / 10_000 * PRICES["secret_calls"].usd,
            f"{secret_calls:,.0f} fetches (one per warm container per "
            f"{settings_table.SECRETS_MAX_AGE_SECONDS.default} s)",
        )
        add("KMS key of the alarm topic", "Other", PRICES["kms_key"].usd, "1 key")
        egress_gb = d * self.egress.value / GB
        add(
            "Data transfer out (MCP requests, the receiver's answers)",
            "Other",
            egress_gb * PRICES["egress"].usd,
            f"{egress_gb:,.1f} GB",
        )
        tokens = d * MODEL_TOKENS_PER_DELIVERY.value
        add(
            f"agent workflow, {MODEL_TOKENS_PER_DELIVERY.value:,.0f} tokens per delivery",
            MODEL_TOKENS,
            tokens / 1000 * MODEL_USD_PER_1000_TOKENS.value,
            f"{tokens:,.0f} tokens at ${MODEL_USD_PER_1000_TOKENS.value:g} per 1,000 (assumed)",
        )
        return out

    @staticmethod
    def traces(invocations: dict[str, float]) -> float:
        """Traces Lambda's default sampling records: 1 per second + 5 % above, per function."""
        return sum(
            min(n, SECONDS_PER_MONTH) + 0.05 * max(0.0, n - SECONDS_PER_MONTH)
            for n in invocations.values()
        )

    def pipeline_usd(self, deliveries: int) -> float:
        """The month's bill without the workflow's own effects and model tokens."""
        return sum(
            x.usd_per_month
            for x in self.lines(deliveries)
            if x.group not in (WORKFLOW_EFFECTS, MODEL_TOKENS)
        )

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
        wru = self.dynamodb.wru_total
        return max(1, math.ceil(deliveries / SECONDS_PER_MONTH * wru / 1000))


def _volume(deliveries: int) -> str:
    return f"{deliveries / 1e9:g} B" if deliveries >= 1e9 else f"{deliveries / 1e6:g} M"


def _usd(value: float) -> str:
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.3f}"


def stack_config() -> dict[str, Any]:
    """The stack's defaults the model reads (infra/config.py)."""
    from infra.config import StackConfig  # noqa: PLC0415 (CDK-free settings)

    defaults = StackConfig()
    return {
        "reconcile_every_minutes": defaults.reconcile_every_minutes,
        "inbox_retention_days": defaults.inbox_retention_days,
        "log_retention_days": defaults.log_retention_days,
        "worker_max_concurrency": defaults.worker_max_concurrency,
        "worker_memory_mb": defaults.worker_memory_mb,
        "api_rate_limit": defaults.api_rate_limit,
        "api_burst_limit": defaults.api_burst_limit,
        "received_log_shards": defaults.received_log_shards,
        "tracing": defaults.tracing,
        "dashboard": defaults.dashboard,
    }


TARGETS_FIGURE: Final = 9


def targets_figure(figures: list[Figure]) -> Figure:
    """Figure 9: the cost targets, from the model fed by this run's figures."""
    model = Model({f.number: f for f in figures}, stack_config())
    per_m = TARGET_VOLUME / 1e6
    pipeline = model.pipeline_usd(TARGET_VOLUME) / per_m
    bill = model.lines(TARGET_VOLUME)
    effects = sum(x.usd_per_month for x in bill if x.group == WORKFLOW_EFFECTS) / per_m
    tokens = sum(x.usd_per_month for x in bill if x.group == MODEL_TOKENS) / per_m
    gb_s = model.worker_gb_s_per_delivery()
    traced = model_with_tracing(model)
    return Figure(
        TARGETS_FIGURE,
        "Cost targets (docs/cost.md)",
        "The cost model of docs/cost.md, fed by this run's figures (2, 3, 7, 8, 11) and the "
        "stated assumptions (in-region AWS latencies, a 300 ms MCP answer), at the "
        "stack's defaults. The pipeline: every AWS line of the bill for the default "
        f"workflow (`{model.workflow}`) except what the workflow itself does (its S3 "
        "archive, its effect records) and model tokens, which are rows of their own. The "
        f"worker: a full batch of {WORKER_BATCH} messages run concurrently, billed as its "
        "waiting plus every message's CPU time at the worker's memory.",
        [
            Row(
                "pipeline cost per 1 M deliveries at 100 M / month",
                "$",
                # Cents, as docs/cost.md shows it: rounding twice could show another cent.
                value=round(pipeline, 2),
                target=Target("<=", TARGET_PIPELINE_USD_PER_MILLION_AT_100M),
            ),
            Row(
                "pipeline cost per 1 M deliveries at 1 M / month",
                "$",
                # A small team's bill: the fixed monthly items weigh most here.
                value=round(model.pipeline_usd(SMALL_VOLUME) / (SMALL_VOLUME / 1e6), 2),
                target=Target("<=", TARGET_PIPELINE_USD_PER_MILLION_AT_1M),
            ),
            Row(
                "workflow effects per 1 M deliveries at 100 M / month (default workflow)",
                "$",
                value=round(effects, 3),
            ),
            Row(
                f"model tokens per 1 M deliveries (agent workflow, "
                f"{MODEL_TOKENS_PER_DELIVERY.value:,.0f} tokens at "
                f"${MODEL_USD_PER_1000_TOKENS.value:g} per 1,000, assumed)",
                "$",
                value=round(tokens, 2),
            ),
            Row(
                "the same with tracing on (Lambda's default sampling)",
                "$",
                value=round(traced.pipeline_usd(TARGET_VOLUME) / (TARGET_VOLUME / 1e6), 3),
            ),
            Row(
                "worker GB-seconds per delivery at a 300 ms MCP answer",
                "GB-s",
                value=round(gb_s, 5),
                target=Target("<=", round(TARGET_WORKER_GB_S, 5)),
            ),
            Row(
                "worker GB-seconds per 1 M deliveries at a 300 ms MCP answer",
                "GB-s",
                value=round(gb_s * 1e6),
            ),
            Row(
                "worker billed time per message, batch of 10",
                "ms",
                value=round(model.worker_ms_per_message(), 1),
            ),
            Row(
                "DynamoDB write request units per delivery, as billed here",
                "WRU",
                value=round(model.dynamodb.wru_total, 3),
            ),
            Row(
                "DynamoDB write request units per delivery of the workflow's effect records",
                "WRU",
                value=round(model.dynamodb.effect_wru, 3),
            ),
        ],
        notes=[
            f"Before: {BEFORE_PIPELINE_AT_100M:.2f} $ per 1 M at 100 M / month for the "
            f"pipeline and {WORKER_GB_S_BEFORE:.4f} GB-s per delivery for the worker "
            f"(messages one after another at 512 MB; commit {BEFORE_COMMIT}).",
            f"DynamoDB: {model.dynamodb.source}.",
            _pipeline_bound(model),
        ],
    )


def _pipeline_bound(model: Model) -> str:
    """What the pipeline's cost is made of at the target volume, and what bounds it."""
    per_m = TARGET_VOLUME / 1e6
    bill = [
        x for x in model.lines(TARGET_VOLUME) if x.group not in (WORKFLOW_EFFECTS, MODEL_TOKENS)
    ]
    ranked = sorted(bill, key=lambda x: -x.usd_per_month)[:3]
    top = ", ".join(f"{x.component} {_usd(x.usd_per_month / per_m)}" for x in ranked)
    total = sum(x.usd_per_month for x in bill) / per_m
    writes = next(x for x in bill if x.component.startswith("DynamoDB writes")).usd_per_month
    fixed_by_requests = sum(x.usd_per_month for x in bill if x.component == "API Gateway HTTP API")
    per_unit = writes / per_m / model.dynamodb.wru_total
    verdict = (
        f"met with {_usd(TARGET_PIPELINE_USD_PER_MILLION_AT_100M - total)} to spare"
        if total <= TARGET_PIPELINE_USD_PER_MILLION_AT_100M
        else f"missed by {_usd(total - TARGET_PIPELINE_USD_PER_MILLION_AT_100M)}"
    )
    return (
        f"At 100 M / month the largest lines per 1 M are {top}; the target is {verdict}. "
        f"DynamoDB writes ({model.dynamodb.wru_total:g} WRU, {_usd(writes / per_m)}) and "
        f"API Gateway's per-request price ({_usd(fixed_by_requests / per_m)}) are "
        f"{100 * (writes + fixed_by_requests) / per_m / total:.0f} % of it. "
        f"Each write unit per delivery costs {_usd(per_unit)} per 1 M: one of them keeps "
        "completed deliveries listed for operators (the completion moves its index entry "
        "to the `completed` label, a delete and a put, where dropping it would be one "
        f"delete); without that listing the pipeline would cost {_usd(total - per_unit)}."
    )


def render(figures: list[Figure], run: dict[str, Any]) -> str:
    by_number = {f.number: f for f in figures}
    config = stack_config()
    model = Model(by_number, config)
    traced = model_with_tracing(model)
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
        "assumed ones (network times inside AWS, the partner's MCP server, model tokens) "
        "are marked `assumed` under Inputs.",
        "",
        "## Dollars per million deliveries",
        "",
        f"A delivery: one accepted `package.received`, processed once by the default "
        f"workflow (`{model.workflow}`: the package archived to S3). Variable cost at 1 M "
        "deliveries a month, per million; the fixed monthly items (alarms, metrics, dashboard, "
        "secrets, key) are listed at the end of the same table (the SQS line includes "
        "the event-source mapping's idle polling). The workflow's own effects and model "
        "tokens are lines of their own, outside the pipeline's total.",
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
    apart = (WORKFLOW_EFFECTS, MODEL_TOKENS)
    variable = [x for x in one_million if x.component not in fixed_names and x.group not in apart]
    for x in sorted(variable, key=lambda x: -x.usd_per_month):
        lines.append(f"| {x.component} | {_usd(x.usd_per_month)} | {x.basis} |")
    variable_total = sum(x.usd_per_month for x in variable)
    lines.append(f"| **pipeline, variable total** | **{_usd(variable_total)}** | |")
    rest = model.rest_api(VOLUMES[0])
    lines.append(
        f"| (REST API instead of HTTP API) | {_usd(rest)} "
        f"| +{_usd(rest - one_million[0].usd_per_month)} per 1 M |"
    )
    xray_on = next(x for x in traced.lines(VOLUMES[0]) if x.component == "X-Ray")
    lines.append(f"| (X-Ray with tracing on) | {_usd(xray_on.usd_per_month)} | {xray_on.basis} |")
    for x in one_million:
        if x.component in fixed_names:
            lines.append(
                f"| {x.component} (fixed, per month) | {_usd(x.usd_per_month)} | {x.basis} |"
            )
    for x in one_million:
        if x.group in apart:
            lines.append(f"| {x.group}: {x.component} | {_usd(x.usd_per_month)} | {x.basis} |")
    lines += [
        "",
        "## At 1 M, 100 M and 1 B deliveries a month",
        "",
        "| group | 1 M / month | 100 M / month | 1 B / month |",
        "|---|---|---|---|",
    ]
    groups = ["API Gateway", "Lambda", "DynamoDB", "SQS", "CloudWatch", "Other"]

    def total(volume: int, groups: list[str] | tuple[str, ...]) -> float:
        return sum(x.usd_per_month for x in bills[volume] if x.group in groups)

    for group in groups:
        cells = [_usd(total(v, [group])) for v in VOLUMES]
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    pipeline = {v: total(v, groups) for v in VOLUMES}
    lines.append(
        "| **pipeline total** | " + " | ".join(f"**{_usd(pipeline[v])}**" for v in VOLUMES) + " |"
    )
    lines.append(
        "| **pipeline per 1 M deliveries** | "
        + " | ".join(f"**{_usd(pipeline[v] / (v / 1e6))}**" for v in VOLUMES)
        + " |"
    )
    for group in apart:
        cells = [_usd(total(v, [group]) / (v / 1e6)) for v in VOLUMES]
        lines.append(f"| {group}, per 1 M deliveries | " + " | ".join(cells) + " |")
    everything = {v: total(v, [*groups, WORKFLOW_EFFECTS]) for v in VOLUMES}
    lines.append(
        "| with the default workflow's effects, per 1 M | "
        + " | ".join(_usd(everything[v] / (v / 1e6)) for v in VOLUMES)
        + " |"
    )
    at_target = pipeline[TARGET_VOLUME] / (TARGET_VOLUME / 1e6)
    met = "met" if at_target <= TARGET_PIPELINE_USD_PER_MILLION_AT_100M else "**missed**"
    lines += [
        "",
        f"Pipeline cost per 1 M deliveries at 100 M / month: **{_usd(at_target)}** against "
        f"a target of ${TARGET_PIPELINE_USD_PER_MILLION_AT_100M:g} ({met}; before: "
        f"${BEFORE_PIPELINE_AT_100M:.2f}, commit {BEFORE_COMMIT}).",
        "",
        "What dominates (the pipeline's lines):",
        "",
    ]
    for v in VOLUMES:
        ranked = sorted(
            (x for x in bills[v] if x.group not in apart), key=lambda x: -x.usd_per_month
        )
        top = ", ".join(
            f"{x.component} {100 * x.usd_per_month / pipeline[v]:.0f} %" for x in ranked[:3]
        )
        lines.append(f"- **{_volume(v)} / month:** {top}.")
    lines += _reading(model, bills)
    lines += _before_after(bills[VOLUMES[0]], bills[TARGET_VOLUME])
    effect_wait_ms = model.worker_wait_ms(WORKER_BATCH) - model.worker_wait_ms(
        WORKER_BATCH, effects=False
    )
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
        f"| worker billed duration per batch of {WORKER_BATCH} | "
        f"{model.worker_batch_ms(WORKER_BATCH):.0f} ms "
        f"({model.worker_ms_per_message():.0f} ms per message), of which the pipeline's "
        f"{model.worker_batch_ms(WORKER_BATCH, effects=False):.0f} ms | the pipeline: "
        f"waits {model.worker_wait_ms(WORKER_BATCH, effects=False):.0f} ms (messages side "
        f"by side; two MCP answers of {MCP_CALL_MS.value:.0f} ms ({MCP_CALL_MS.source}), "
        f"the first message probing the server; {DYNAMODB_CALL_MS.value:.0f} ms per "
        f"DynamoDB call) + {WORKER_BATCH} x CPU {model.worker_bare_cpu_ms.value:.1f} ms "
        f"({model.worker_bare_cpu_ms.source}); the {model.workflow} workflow's effects: "
        f"waits {effect_wait_ms:.0f} ms "
        f"(S3 {S3_PUT_MS.value:.0f} ms per PUT, {model.notifications:g} notification(s) of "
        f"{NOTIFY_MS.value:.0f} ms ({NOTIFY_MS.source}), its records' DynamoDB calls) + "
        f"{WORKER_BATCH} x CPU "
        f"{model.worker_cpu_ms.value - model.worker_bare_cpu_ms.value:.1f} ms (figure 8: "
        f"{model.worker_cpu_ms.value:.1f} ms with it, {model.worker_cpu_ms.source}); CPU "
        f"x {model._cpu_scale('worker'):.1f} (CPU share at {model.memory['worker']} MB); a "
        f"batch of one: {model.worker_batch_ms(1):.0f} ms |",
        f"| reconciler billed duration | 200 ms per run, + "
        f"{DYNAMODB_BATCH_GET_MS.value:.0f} ms per 100 receipts of the received log | "
        f"assumed: a run's fixed work; {DYNAMODB_BATCH_GET_MS.source} |",
        f"| memory | {', '.join(f'{k} {v} MB' for k, v in model.memory.items())} | infra/*.py; "
        f"the worker's from its measured peak of {model.worker_rss_mb:.0f} MB (figure 8) |",
        f"| tracing | {'on' if model.tracing else 'off'} | infra/config.py default "
        "(`-c tracing=true`) |",
    ]
    for function, ops in model.calls.items():
        calls = ", ".join(f"{op} {n:g}" for op, n in ops.items())
        lines.append(f"| {function} AWS calls per delivery | {calls} | measured: figure 7 |")
    log_text = ", ".join(f"{k} {v:,.0f}" for k, v in model.log_bytes.items())
    items_text = ", ".join(
        f"{k} {v['count_per_delivery']:g} x {v['mean_bytes']:.0f} B" for k, v in model.items.items()
    )
    wru_text = ", ".join(f"{f} {n:g}" for f, n in model.dynamodb.wru.items())
    lines += [
        f"| DynamoDB per delivery | WRU {model.dynamodb.wru_total:g} ({wru_text}; "
        f"{model.dynamodb.index_wru:g} of them index writes), RRU {model.dynamodb.rru:g}, "
        f"{model.dynamodb.bytes_at_rest:,.0f} B at rest; the workflow's records: WRU "
        f"{model.dynamodb.effect_wru:g}, RRU {model.dynamodb.effect_rru:g}, "
        f"{model.dynamodb.effect_bytes_at_rest:,.0f} B at rest | {model.dynamodb.source} |",
        f"| log bytes per delivery | {log_text}; HTTP API access log "
        f"{model.access_log_bytes.value:,.0f} | measured: figure 7; "
        f"{model.access_log_bytes.source} |",
        f"| items at rest per delivery | {items_text} | measured: figure 7 |",
        f"| retention | inbox and outbox (the received log) "
        f"{config['inbox_retention_days']} days, logs "
        f"{config['log_retention_days']} "
        f"days; + {TTL_DELETION_LAG_DAYS.value:g} days before DynamoDB deletes an expired "
        f"item | infra/config.py defaults, functions/core/table_layout.py; "
        f"{TTL_DELETION_LAG_DAYS.source} |",
        f"| cold starts | {COLD_START_RATE.value:g} per request x {model.cold_ms.value:.0f} ms "
        f"| {COLD_START_RATE.source}; {model.cold_ms.source} |",
        f"| data transfer out | {model.egress.value:,.0f} B per delivery | {model.egress.source} |",
        f"| idle SQS polling | {SQS_EMPTY_RECEIVES_PER_MONTH.value:,.0f} receives / month "
        f"| {SQS_EMPTY_RECEIVES_PER_MONTH.source} |",
        f"| model tokens (agent workflow) | {MODEL_TOKENS_PER_DELIVERY.value:,.0f} per delivery "
        f"at ${MODEL_USD_PER_1000_TOKENS.value:g} per 1,000 | "
        f"{MODEL_TOKENS_PER_DELIVERY.source}; {MODEL_USD_PER_1000_TOKENS.source} |",
        "",
        "## Prices used",
        "",
        "| item | USD | per |",
        "|---|---|---|",
        *(f"| {p.what} | {p.usd:g} | {p.per} |" for p in PRICES.values()),
    ]
    lines += _limits()
    return "\n".join(lines).rstrip() + "\n"


def _before_after(bill: list[Line], at_target: list[Line]) -> list[str]:
    """One line per component, before and in this run: $ per 1 M at 1 M / month against
    the issue's starting point, and at 100 M / month against the last committed run."""

    def after(lines: list[Line], prefix: str) -> float:
        # A component's own line(s); a workflow effect only where it is the component.
        return sum(
            x.usd_per_month
            for x in lines
            if x.component.startswith(prefix)
            and (x.group not in (WORKFLOW_EFFECTS, MODEL_TOKENS) or x.component == prefix)
        )

    out = [
        "",
        f"## Before → after (per 1 M deliveries at 1 M / month; before: commit {BEFORE_COMMIT})",
        "",
    ]
    for prefix, before in BEFORE_USD_PER_MILLION.items():
        out.append(f"- {prefix}: {_usd(before)} → {_usd(after(bill, prefix))}")
    per_m = TARGET_VOLUME / 1e6
    effects = sum(x.usd_per_month for x in at_target if x.group == WORKFLOW_EFFECTS) / per_m
    out += [
        "",
        f"Per 1 M deliveries at 100 M / month, before: commit {BEFORE_100M_COMMIT}, whose "
        "pipeline was the notify workflow's with its effects' DynamoDB records, worker time "
        "and data inside; after: the default workflow's pipeline, its effects on lines of "
        "their own.",
        "",
    ]
    for prefix, before in BEFORE_USD_PER_MILLION_AT_100M.items():
        out.append(f"- {prefix}: {_usd(before)} → {_usd(after(at_target, prefix) / per_m)}")
    pipeline = _pipeline(at_target) / per_m
    out += [
        f"- **pipeline total: {_usd(sum(BEFORE_USD_PER_MILLION_AT_100M.values()))} → "
        f"{_usd(pipeline)}**",
        f"- workflow effects (outside the total): inside the pipeline's lines → {_usd(effects)}",
    ]
    return out


def _reading(model: Model, bills: dict[int, list[Line]]) -> list[str]:
    """What the numbers say, in sentences computed from them."""

    def usd(volume: int, component: str) -> float:
        return sum(x.usd_per_month for x in bills[volume] if x.component.startswith(component))

    def exact(volume: int, component: str) -> float:
        return sum(x.usd_per_month for x in bills[volume] if x.component == component)

    dynamodb = model.dynamodb
    low, mid, high = VOLUMES
    per_m = 1e6 / low
    xray_on = sum(
        x.usd_per_month for x in model_with_tracing(model).lines(low) if x.component == "X-Ray"
    )
    return [
        "",
        f"- **DynamoDB writes**: {dynamodb.wru_total:g} WRU per delivery "
        f"({', '.join(f'{f} {n:g}' for f, n in dynamodb.wru.items())}), "
        f"{dynamodb.index_wru:g} of them index writes; "
        f"{_usd(usd(mid, 'DynamoDB writes') / (mid / 1e6))} per 1 M at 100 M / month.",
        f"- **X-Ray** is off by default ($0). With tracing on (`-c tracing=true`) and "
        "Lambda's default sampling (1 request/s and 5 % above it, per function) it would "
        f"add {_usd(xray_on * per_m)} per 1 M at 1 M / month, the largest line at that "
        "volume.",
        f"- **The worker's Lambda time** ({_usd(exact(mid, 'Lambda worker') / (mid / 1e6))} "
        f"per 1 M at 100 M / month for the pipeline, "
        f"{_usd(exact(mid, 'Lambda worker time of the effects') / (mid / 1e6))} for the "
        "workflow's effects) runs a batch's messages side by side: a full batch "
        f"bills {model.worker_ms_per_message():.0f} ms per message at "
        f"{model.memory['worker']} MB, against 526 ms at 512 MB when they ran one after "
        "another. At 1 M / month batches hold about one message, so each bills the whole "
        f"wait ({model.worker_batch_ms(1):.0f} ms).",
        f"- **S3 archive PUTs** ({_usd(usd(low, 'S3 archive PUTs') * per_m)} per 1 M) are "
        "the default workflow's archive effect, outside the pipeline's total; a workflow "
        "without it saves them.",
        f"- **API Gateway** is {_usd(usd(low, 'API Gateway') * per_m)} per 1 M with the HTTP "
        f"API; the REST API would be {_usd(model.rest_api(low) * per_m)}.",
        f"- At 1 B / month the pipeline costs {_usd(_pipeline(bills[high]) / (high / 1e6))} "
        "per 1 M.",
    ]


def _pipeline(bill: list[Line]) -> float:
    return sum(x.usd_per_month for x in bill if x.group not in (WORKFLOW_EFFECTS, MODEL_TOKENS))


def model_with_tracing(model: Model) -> Model:
    """The same model with tracing on (for the alternative X-Ray line)."""
    traced = copy.copy(model)
    traced.tracing = True
    return traced


def _limits() -> list[str]:
    """Where the limits are: one capacity plan, docs/capacity.md (infra/capacity.py)."""
    return [
        "",
        "## Scaling limits, and the setting that moves each",
        "",
        "Each component's limit, its arithmetic from AWS's published quotas, the ceiling at "
        "the defaults and at the largest settings, the alarm that fires first and what to "
        "raise: docs/capacity.md (one source of numbers, `infra/capacity.py`).",
    ]


def write(figures: list[Figure], run: dict[str, Any], path: Path) -> None:
    path.write_text(render(figures, run), encoding="utf-8")
