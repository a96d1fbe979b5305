"""The cost model: the stack's monthly bill, line by line, from the figures of this run.

What is measured (in the same ``make bench`` run) and what is assumed are kept
apart: every quantity is a :class:`Quantity` that says which. Prices are AWS list
prices (:mod:`bench.prices`); :mod:`bench.cost_doc` renders the bill as docs/cost.md.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.prices import GB, PRICES, tiered
from bench.report import Figure
from bench.write_units import WORKFLOW_PHASE, WORKFLOW_RECORD_PREFIXES, item_size
from functions.core import event_source_limits, metric_names, settings_table, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.work_queue import SEND_BATCH_LIMIT
from functions.core.reconcile import RECEIVED_WINDOW_SECONDS
from infra import function_memory
from infra.access_log import ACCESS_LOG_FIELDS

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
VOLUMES: Final = (1_000_000, 100_000_000, 1_000_000_000)
SECONDS_PER_MONTH: Final = 30 * 24 * 3600
WORKER_BATCH: Final = event_source_limits.WORKER_BATCH_SIZE  # a full batch
# Groups of the bill that are not the pipeline's: what the workflow does, and pays for.
WORKFLOW_EFFECTS: Final = "Workflow effects"
MODEL_TOKENS: Final = "Model tokens"
# The figure that measures the agent workflow's model calls from its spend records.
AGENT_SPEND_FIGURE: Final = 14
# A tool-using agent's model calls, input and output tokens per delivery: the
# walk-through's team agent (a lookup, then an approved ticket, then the summary).
TOOL_AGENT_SPEND: Final = (3, 2413, 93)
TOOL_AGENT_SPEND_SOURCE: Final = (
    "measured: tests/e2e/test_build_your_own_agent.py's 5 deliveries on the scripted model, "
    "inbox show --json; the emulator counts 4 characters a token, tool blocks included; "
    "not re-run by make bench"
)


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
# workflow calls no model): measured by figure 14 from the deliveries' spend records;
# these two stand in only for a run without it.
MODEL_TOKENS_PER_DELIVERY: Final = Quantity(
    1500.0, "assumed: the agent workflow's prompt + answer for one package"
)
MODEL_USD_PER_1000_TOKENS: Final = Quantity(
    0.002, "assumed: a small Bedrock model, input and output tokens blended"
)
COLD_START_RATE: Final = Quantity(
    1 / 10_000, "assumed: one cold start per 10,000 receiver requests (steady traffic)"
)
# How full the worker's batches are. AWS: the SQS event-source mapping starts with five
# pollers, each gathering for up to the batching window (or until a batch is full).
SQS_POLLERS: Final = Quantity(
    5.0,
    "assumed: the event-source mapping's 5 starting pollers share the arrivals (more "
    "pollers would make smaller batches)",
)
SQS_POLL_GATHER_SECONDS: Final = Quantity(
    0.25,
    "assumed: without a batching window a poll returns what arrived in about 0.25 s "
    "(a receive's round trip and the hand-off to an invocation)",
)
# AWS: a new on-demand table has about 4 partitions, and a stream a shard per partition;
# Lambda reads each shard 4 times a second.
STREAM_SHARDS_AT_START: Final = Quantity(
    4.0, "assumed: a new on-demand table starts with about 4 partitions, a stream shard each"
)
STREAM_POLLS_PER_SECOND: Final = 4
# AWS KMS: each of a rotated key's first two new backing keys adds a key's monthly price;
# later rotations add nothing. Yearly rotation: $2 in the second year, $3 from the third.
KMS_ROTATIONS_BILLED: Final = Quantity(
    2.0, "AWS: a rotated key's first two rotations are billed as keys (from the third year on)"
)
# CloudWatch bills a custom metric by the hour it gets a data point. The received log's
# lag is published by every reconciler run; the other alarmed counts only when
# something went wrong (a quarantine, a failure, a retry).
ALWAYS_PUBLISHED_METRICS: Final = frozenset({metric_names.METRIC_RECONCILER_RECEIVED_LOG_LAG})
FAULT_HOURS_PER_MONTH: Final = Quantity(
    24.0, "assumed: hours a month in which a fault-only metric gets a data point"
)
HOURS_PER_MONTH: Final = SECONDS_PER_MONTH / 3600
SQS_EMPTY_RECEIVES_PER_MONTH: Final = Quantity(
    5 * 3 * 60 * 24 * 30,
    "assumed: the event-source mapping's 5 pollers long-poll (20 s) when the queue is idle",
)


def _memory_mb(worker_memory_mb: int) -> dict[str, int]:
    """The functions' memory sizes as infra deploys them; the worker's is a setting
    (``worker_memory_mb``)."""
    return {
        "receiver": function_memory.RECEIVER_MEMORY_MB,
        "relay": function_memory.RELAY_MEMORY_MB,
        "reconciler": function_memory.RECONCILER_MEMORY_MB,
        "worker": worker_memory_mb,
    }


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
# variable (the rest of the line is infra/access_log.py's format, as deployed).
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
    (:data:`infra.access_log.ACCESS_LOG_FIELDS`) with :data:`ACCESS_LOG_SAMPLE`'s values."""
    # Compact, as the deployed ACCESS_LOG_FORMAT writes it.
    line = json.dumps(
        {name: ACCESS_LOG_SAMPLE.get(v, v) for name, v in ACCESS_LOG_FIELDS.items()},
        separators=(",", ":"),
    )
    return Quantity(
        float(len(line.encode()) + 1),
        "assumed: infra/access_log.py's format with an accepted delivery's values",
    )


@functools.cache  # one synth per process
def _alarm_count() -> int:
    """The alarms of the default stack (cdk.json's context, no bundling), as synthesized
    (once per process: a synth takes seconds, and every model and document reads it)."""
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


@dataclass(frozen=True)
class AgentModelSpend:
    """The agent workflow's model calls and tokens per delivery, as its spend records
    count them (figure 14)."""

    model_calls: float
    input_tokens: float
    output_tokens: float
    source: str

    @property
    def usd(self) -> float:
        """What one delivery's model calls cost at Bedrock's per-token prices."""
        return (
            self.input_tokens * PRICES["bedrock_input"].usd
            + self.output_tokens * PRICES["bedrock_output"].usd
        ) / 1e6


def agent_model_spend(figures: dict[int, Figure]) -> AgentModelSpend | None:
    """Figure 14's spend per delivery; None when this run did not measure it."""
    figure = figures.get(AGENT_SPEND_FIGURE)
    if figure is None:
        return None
    spend = figure.details
    return AgentModelSpend(
        model_calls=spend["model_calls_per_delivery"],
        input_tokens=spend["input_tokens_per_delivery"],
        output_tokens=spend["output_tokens_per_delivery"],
        source=(
            f"measured: figure 14, the spend records of {spend['deliveries']} agent "
            "deliveries on the local stack (the Bedrock emulator's token counts)"
        ),
    )


@dataclass(frozen=True)
class Line:
    component: str
    group: str
    usd_per_month: float
    basis: str


# The inbox item's attribute a package kept there would be written under.
PACKAGE_ATTRIBUTE: Final = "package"
# DynamoDB's item size limit: a package document above it could not be kept on the item.
DYNAMODB_ITEM_LIMIT_BYTES: Final = 400 * 1024


@dataclass(frozen=True)
class PackageOnInboxItem:
    """The default install's month with the package kept on the inbox item (priced)."""

    usd: float
    inbox_bytes_with_package: float
    extra_wru: int  # write units the completing update adds per delivery
    saved_s3_usd: float
    added_usd: float


class Model:
    """The stack's monthly bill as a function of deliveries per month."""

    def __init__(
        self, figures: dict[int, Figure], config: dict[str, Any], *, alarms: int | None = None
    ) -> None:
        """``alarms``: the stack's alarm count (None: the default stack's, synthesized)."""
        self.memory = _memory_mb(config["worker_memory_mb"])
        self.config = config
        self.batching_window_s = float(config.get("worker_batching_window_seconds", 0))
        # A fixed average batch instead of the arrival model's (the bill's sensitivity).
        self.fixed_worker_batch: float | None = None
        self.tracing: bool = config["tracing"]
        # Percent of deliveries whose own trace is recorded with tracing on.
        self.trace_sample_percent: int = config["trace_sample_percent"]
        pipeline = figures[7].details
        # The shapes bench.pipeline_calls.PipelineCalls.to_json writes.
        self.calls: dict[str, dict[str, float]] = pipeline["calls_per_delivery"]
        self.capacity: dict[str, dict[str, float]] = pipeline[
            "dynamodb_capacity_units_per_delivery"
        ]
        self.dynamodb = dynamodb_inputs(pipeline, figures[11].details)
        self.agent_spend = agent_model_spend(figures)
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
        self.alarms = _alarm_count() if alarms is None else alarms
        self.access_log_bytes = access_log_bytes()
        self.metrics = len(_metric_names())
        self.dashboards = 1 if config.get("dashboard") else 0
        self.alarm_topic_key = bool(config.get("alarm_topic_key"))

    def worker_batch(self, deliveries: float) -> float:
        """The worker's average batch at ``deliveries`` a month: what the pollers gather
        in a poll (the batching window, or a receive's round trip without one), shared
        among them, from one message to a full batch."""
        if self.fixed_worker_batch is not None:
            return self.fixed_worker_batch
        rps = deliveries / SECONDS_PER_MONTH
        gathered = rps * (self.batching_window_s + SQS_POLL_GATHER_SECONDS.value)
        return min(float(WORKER_BATCH), max(1.0, gathered / SQS_POLLERS.value))

    def metric_months(self) -> float:
        """Custom metrics billed a month: by the hours each one is published."""
        always = len(ALWAYS_PUBLISHED_METRICS & _metric_names())
        on_faults = self.metrics - always
        return always + on_faults * FAULT_HOURS_PER_MONTH.value / HOURS_PER_MONTH

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
        http = tiered(m, [(300, PRICES["http_api"].usd), (math.inf, PRICES["http_api_over"].usd)])
        add("API Gateway HTTP API", "API Gateway", http, f"{d:,} requests")

        # Lambda: requests and GB-seconds per function.
        gbs_price = [
            (7.5e9, PRICES["lambda_arm_gbs"].usd),
            (math.inf, PRICES["lambda_arm_gbs_2"].usd),
        ]
        relay_batch = min(
            event_source_limits.RELAY_BATCH_SIZE,
            max(1.0, rps / (STREAM_POLLS_PER_SECOND * self._stream_shards(d))),
        )
        worker_batch = self.worker_batch(d)
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
            usd = invocations[function] / 1e6 * PRICES["lambda_requests"].usd + tiered(
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
            f"records per relay batch over {self._stream_shards(d)} stream shards; "
            f"{worker_batch:.1f} messages per worker batch)",
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
        log_usd = tiered(log_gb, [(10_240, PRICES["logs_ingest"].usd), (math.inf, 0.25)])
        retention = self.config["log_retention_days"] / 30
        add(
            "CloudWatch Logs ingestion + storage",
            "CloudWatch",
            log_usd + log_gb * retention * PRICES["logs_storage"].usd,
            f"{log_gb:,.1f} GB ({log_bytes:,.0f} B per delivery: the functions' "
            f"{function_bytes:,.0f}, the HTTP API's access log {self.access_log_bytes.value:,.0f})",
        )
        metric_months = self.metric_months()
        add(
            "CloudWatch metrics (EMF), alarms, dashboard",
            "CloudWatch",
            metric_months * PRICES["metric"].usd
            + self.alarms * PRICES["alarm"].usd
            + self.dashboards * PRICES["dashboard"].usd,
            f"{self.metrics} metrics (the alarmed counts; the others are log fields) billed "
            f"by the hour: {metric_months:.2f} metric-months ("
            f"{len(ALWAYS_PUBLISHED_METRICS & _metric_names())} published every run, the "
            f"rest {FAULT_HOURS_PER_MONTH.value:g} h a month), "
            f"{self.alarms} alarms, {self.dashboards} dashboard"
            + (" (`-c dashboard=true` adds one)" if not self.dashboards else ""),
        )
        # Two kinds of trace are recorded with tracing on: Lambda's own, one per sampled
        # invocation of each function (its default rule, which no setting changes), and
        # one per sampled delivery (our segments, all under the delivery's trace id).
        own = self.traces(invocations)
        percent = self.trace_sample_percent
        delivered = d * percent / 100
        add(
            "X-Ray",
            "CloudWatch",
            (own + delivered) / 1e6 * PRICES["xray"].usd if self.tracing else 0.0,
            f"active tracing: {own + delivered:,.0f} traces, Lambda's own {own:,.0f} "
            f"(1/s + 5 % per function) and {delivered:,.0f} deliveries "
            f"(`trace_sample_percent` {percent})"
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
        key_usd = PRICES["kms_key"].usd * (1 + KMS_ROTATIONS_BILLED.value)
        add(
            "KMS key of the alarm topic",
            "Other",
            key_usd if self.alarm_topic_key else 0.0,
            f"1 key, rotated yearly: + {KMS_ROTATIONS_BILLED.value:g} rotations billed as keys "
            "(from its third year; $2 in the second)"
            if self.alarm_topic_key
            else f"none (the default: a TLS-only topic; `-c alarm_topic_key=true` adds a key, "
            f"${key_usd:g} a month once rotated twice)",
        )
        egress_gb = d * self.egress.value / GB
        add(
            "Data transfer out (MCP requests, the receiver's answers)",
            "Other",
            egress_gb * PRICES["egress"].usd,
            f"{egress_gb:,.1f} GB",
        )
        out.append(self.model_tokens_line(d))
        return out

    def model_tokens_line(self, deliveries: int) -> Line:
        """The agent workflow's model calls: priced from figure 14's spend records, or
        from the stated assumption when this run has no figure 14."""
        spend = self.agent_spend
        if spend is None:
            return self.assumed_model_tokens_line(deliveries)
        tokens_in, tokens_out = deliveries * spend.input_tokens, deliveries * spend.output_tokens
        return Line(
            f"agent workflow, {spend.model_calls:g} model "
            f"call{'' if spend.model_calls == 1 else 's'} and "
            f"{spend.input_tokens + spend.output_tokens:,.0f} tokens per delivery (measured)",
            MODEL_TOKENS,
            deliveries * spend.usd,
            f"{tokens_in:,.0f} input tokens at ${PRICES['bedrock_input'].usd:g} and "
            f"{tokens_out:,.0f} output tokens at ${PRICES['bedrock_output'].usd:g} per 1 M "
            "(measured: figure 14's spend records)",
        )

    @staticmethod
    def tool_agent_tokens_line(deliveries: int) -> Line:
        """A tool-using agent's model calls (docs/workflows.md's walk-through), priced at
        the default model's per-token prices: a row beside the agent's, in no total."""
        calls, tokens_in, tokens_out = TOOL_AGENT_SPEND
        usd = deliveries * (
            tokens_in * PRICES["bedrock_input"].usd + tokens_out * PRICES["bedrock_output"].usd
        )
        return Line(
            f"agent workflow with tools, {calls} model calls and "
            f"{tokens_in + tokens_out:,} tokens per delivery (measured)",
            MODEL_TOKENS,
            usd / 1_000_000,
            f"{deliveries * tokens_in:,.0f} input tokens at ${PRICES['bedrock_input'].usd:g} and "
            f"{deliveries * tokens_out:,.0f} output tokens at "
            f"${PRICES['bedrock_output'].usd:g} per 1 M ({TOOL_AGENT_SPEND_SOURCE})",
        )

    @staticmethod
    def assumed_model_tokens_line(deliveries: int) -> Line:
        """The agent workflow's model tokens at the stated assumption."""
        tokens = deliveries * MODEL_TOKENS_PER_DELIVERY.value
        return Line(
            f"agent workflow, {MODEL_TOKENS_PER_DELIVERY.value:,.0f} tokens per delivery",
            MODEL_TOKENS,
            tokens / 1000 * MODEL_USD_PER_1000_TOKENS.value,
            f"{tokens:,.0f} tokens at ${MODEL_USD_PER_1000_TOKENS.value:g} per 1,000 "
            "(assumed: no figure 14 in this run)",
        )

    @staticmethod
    def traces(invocations: dict[str, float]) -> float:
        """Traces Lambda's default sampling records: 1 per second + 5 % above, per function."""
        return sum(
            min(n, SECONDS_PER_MONTH) + 0.05 * max(0.0, n - SECONDS_PER_MONTH)
            for n in invocations.values()
        )

    def default_install_usd(self, deliveries: int) -> float:
        """The month's bill of the default install: the pipeline and its default
        workflow's effects (the archive's S3 PUTs and storage), without model tokens."""
        return sum(x.usd_per_month for x in self.lines(deliveries) if x.group != MODEL_TOKENS)

    def s3_object_per_delivery_usd(self, deliveries: int) -> float:
        """The default install's month if its archive were still an S3 object per
        delivery, on top of the package record: a PUT each and the worker's wait for it
        (the object's storage, a few cents a month, aside)."""
        d = float(deliveries)
        missing = max(0.0, 1.0 - self.calls["worker"].get("s3.PutObject", 0))
        batches = d / self.worker_batch(deliveries)
        wait_gb_s = batches * S3_PUT_MS.value * missing / 1000 * self.memory["worker"] / 1024
        return (
            self.default_install_usd(deliveries)
            + d * missing / 1000 * PRICES["s3_put"].usd
            + wait_gb_s * PRICES["lambda_arm_gbs"].usd
        )

    def package_on_inbox_item(self, deliveries: int) -> PackageOnInboxItem:
        """The default install's month with the package kept on the inbox item
        (DynamoDB, point-in-time recovery, the inbox's retention) instead of an S3
        object, from the measured item and archive sizes by DynamoDB's metering rules.
        Built since the package record moved onto the inbox item: with no archive PUT
        measured, it is the default install's bill."""
        d = float(deliveries)
        inbox_bytes = self.items["inbox"]["mean_bytes"]
        with_package = inbox_bytes + len(PACKAGE_ATTRIBUTE) + self.archive_bytes
        extra_wru = math.ceil(with_package / 1024) - math.ceil(inbox_bytes / 1024)
        bill = self.lines(deliveries)
        s3 = sum(x.usd_per_month for x in bill if x.component.startswith("S3 archive"))
        batches = d / self.worker_batch(deliveries)
        put_wait_gb_s = (
            batches
            * S3_PUT_MS.value
            * self.calls["worker"].get("s3.PutObject", 0)
            / 1000
            * self.memory["worker"]
            / 1024
        )
        stored_gb = d * self.archive_bytes * self.lifetime_days("inbox") / 30 / GB
        added = (
            d * extra_wru / 1e6 * PRICES["ddb_wru"].usd
            + stored_gb * (PRICES["ddb_storage"].usd + PRICES["ddb_pitr"].usd)
            - put_wait_gb_s * PRICES["lambda_arm_gbs"].usd
        )
        return PackageOnInboxItem(
            usd=self.default_install_usd(deliveries) - s3 + added,
            inbox_bytes_with_package=with_package,
            extra_wru=extra_wru,
            saved_s3_usd=s3,
            added_usd=added,
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
        return tiered(
            deliveries / 1e6,
            [
                (333, PRICES["rest_api"].usd),
                (667, PRICES["rest_api_2"].usd),
                (19_000, PRICES["rest_api_3"].usd),
            ],
        )

    def _stream_shards(self, deliveries: int) -> int:
        """Stream shards follow table partitions: the new table's, or ~1 per 1,000 WRU/s."""
        wru = self.dynamodb.wru_total
        return max(
            int(STREAM_SHARDS_AT_START.value),
            math.ceil(deliveries / SECONDS_PER_MONTH * wru / 1000),
        )


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
        "worker_batching_window_seconds": defaults.worker_batching_window_seconds,
        "api_rate_limit": defaults.api_rate_limit,
        "api_burst_limit": defaults.api_burst_limit,
        "received_log_shards": defaults.received_log_shards,
        "tracing": defaults.tracing,
        "trace_sample_percent": defaults.trace_sample_percent,
        "dashboard": defaults.dashboard,
        "alarm_topic_key": defaults.alarm_topic_key,
    }


def model_with_worker_batch(model: Model, batch: float) -> Model:
    """The same model with every worker batch of ``batch`` messages on average."""
    fixed = copy.copy(model)
    fixed.fixed_worker_batch = batch
    return fixed


def model_with_batching_window(model: Model, seconds: float) -> Model:
    """The same model with another batching window on the worker's event source."""
    changed = copy.copy(model)
    changed.batching_window_s = seconds
    return changed


def model_with_tracing(model: Model) -> Model:
    """The same model with tracing on (for the alternative X-Ray line)."""
    traced = copy.copy(model)
    traced.tracing = True
    return traced
