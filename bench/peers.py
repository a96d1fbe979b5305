"""What a user would build instead, billed by the same model (:mod:`bench.cost`).

Each peer does the default install's work (verify the signature, fetch the package over
MCP, archive it to S3, once per delivery) with the same prices, the same assumed
in-region latencies and the same measured CPU, log bytes and worker batches as ours; none
has our guarantees (a durable receipt before the answer, a reconciler, an effect ledger,
an operator's listing). Priced generously: each peer's worker runs a batch's messages side
by side as ours does, and its fixed items are two secrets and three alarms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from bench.cost import (
    DYNAMODB_CALL_MS,
    MCP_CALL_MS,
    REFERENCE_CPU_MB,
    S3_PUT_MS,
    SECONDS_PER_MONTH,
    SQS_EMPTY_RECEIVES_PER_MONTH,
    WORKFLOW_EFFECTS,
    Line,
    Model,
    Quantity,
)
from bench.prices import GB, PRICES, tiered

# Powertools idempotency: a conditional put of the in-progress record, an update to
# completed; each under 1 KB (1 WRU), kept an hour (its default expiry).
IDEMPOTENCY_WRU: Final = 2.0
IDEMPOTENCY_RECORD_BYTES: Final = Quantity(
    300.0, "assumed: a Powertools idempotency record, its key, status, expiry and a small result"
)
IDEMPOTENCY_RECORD_HOURS: Final = 1.0
SQS_SEND_MS: Final = Quantity(5.0, "assumed: one SQS SendMessage or PutEvents in-region")
PEER_FIXED_ALARMS: Final = 3  # errors, dead letters, the queue's oldest message
PEER_MEMORY_MB: Final = 256

IN_REQUEST: Final = "Powertools idempotency in the request"
ASYNC_SQS: Final = "API Gateway -> Lambda -> SQS -> Powertools worker"
EVENTBRIDGE: Final = "EventBridge inbound webhook (function URL) + worker"
PEERS: Final = (IN_REQUEST, ASYNC_SQS, EVENTBRIDGE)


@dataclass(frozen=True)
class PeerBill:
    """One peer's month, by line (``WORKFLOW_EFFECTS``: the archive, as ours)."""

    name: str
    lines: list[Line]

    def usd(self, *, archive: bool) -> float:
        """The month's bill, with or without the archive's S3 PUTs and storage."""
        return sum(x.usd_per_month for x in self.lines if archive or x.group != WORKFLOW_EFFECTS)


def _lambda_usd(invocations: float, seconds: float, memory_mb: int) -> float:
    gb_s = seconds * memory_mb / 1024
    return invocations / 1e6 * PRICES["lambda_requests"].usd + tiered(
        gb_s,
        [(7.5e9, PRICES["lambda_arm_gbs"].usd), (math.inf, PRICES["lambda_arm_gbs_2"].usd)],
    )


def _fetch_and_archive_ms() -> float:
    """One message's waits: the idempotency put and update, the MCP answer, the PUT."""
    return 2 * DYNAMODB_CALL_MS.value + MCP_CALL_MS.value + S3_PUT_MS.value


def peer_bill(model: Model, peer: str, deliveries: int) -> PeerBill:
    """``peer``'s month at ``deliveries``, from ``model``'s measured quantities."""
    d = float(deliveries)
    lines: list[Line] = []

    def add(component: str, usd: float, group: str = "pipeline") -> None:
        lines.append(Line(component, group, usd, ""))

    cpu_scale = max(1.0, REFERENCE_CPU_MB / PEER_MEMORY_MB)
    verify_ms = model.receiver_cpu_ms.value * cpu_scale
    worker_cpu_ms = model.worker_bare_cpu_ms.value * cpu_scale
    if peer != EVENTBRIDGE:  # the sample takes the webhook on a function URL (no charge)
        http = tiered(
            d / 1e6, [(300, PRICES["http_api"].usd), (math.inf, PRICES["http_api_over"].usd)]
        )
        add("API Gateway HTTP API", http)
    if peer == IN_REQUEST:
        ms = math.ceil(verify_ms + worker_cpu_ms + _fetch_and_archive_ms())
        seconds = d * ms / 1000
        add(
            "Lambda (verify, fetch, archive in the request)",
            _lambda_usd(d, seconds, PEER_MEMORY_MB),
        )
        queue_requests = 0.0
    else:
        receiver_ms = math.ceil(verify_ms + SQS_SEND_MS.value)
        seconds = d * receiver_ms / 1000
        add("Lambda receiver (verify, send)", _lambda_usd(d, seconds, PEER_MEMORY_MB))
        if peer == EVENTBRIDGE:
            add("EventBridge PutEvents", d / 1e6 * PRICES["eventbridge_events"].usd)
        batch = model.worker_batch(deliveries)
        batches = d / batch
        batch_ms = math.ceil(_fetch_and_archive_ms() + batch * worker_cpu_ms)
        add("Lambda worker", _lambda_usd(batches, batches * batch_ms / 1000, PEER_MEMORY_MB))
        # A send per message, a receive and a delete per batch, the idle long polls.
        queue_requests = d + 2 * batches + SQS_EMPTY_RECEIVES_PER_MONTH.value
    add("SQS", queue_requests / 1e6 * PRICES["sqs"].usd)
    stored_gb = d * IDEMPOTENCY_RECORD_BYTES.value / GB
    add(
        "DynamoDB idempotency records",
        d * IDEMPOTENCY_WRU / 1e6 * PRICES["ddb_wru"].usd
        + stored_gb
        * IDEMPOTENCY_RECORD_HOURS
        / (SECONDS_PER_MONTH / 3600)
        * PRICES["ddb_storage"].usd,
    )
    function_bytes = sum(model.log_bytes.values())
    log_bytes = function_bytes + (0.0 if peer == EVENTBRIDGE else model.access_log_bytes.value)
    log_gb = d * log_bytes / GB
    retention = model.config["log_retention_days"] / 30
    add(
        "CloudWatch Logs",
        log_gb * (PRICES["logs_ingest"].usd + retention * PRICES["logs_storage"].usd),
    )
    add("CloudWatch alarms", PEER_FIXED_ALARMS * PRICES["alarm"].usd)
    add("Secrets Manager (2 secrets)", 2 * PRICES["secret"].usd)
    add("Data transfer out", d * model.egress.value / GB * PRICES["egress"].usd)
    add("S3 archive PUTs", d / 1000 * PRICES["s3_put"].usd, WORKFLOW_EFFECTS)
    s3_gb = d * model.config["inbox_retention_days"] / 30 * model.archive_bytes / GB
    add("S3 archive storage", s3_gb * PRICES["s3_storage"].usd, WORKFLOW_EFFECTS)
    return PeerBill(peer, lines)
