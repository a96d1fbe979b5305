"""The numbers capacity depends on: AWS's published quotas (each with its default and
the value the 10,000 receipts/s plan needs) and the per-item costs, each with its source.

One module for both the plan (infra/capacity.py) and the model
(infra/capacity_model.py), so neither can drift from the other. CDK-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from functions.core import settings_table
from functions.core.reconcile import SAFETY_MARGIN_SECONDS

# --- AWS's published quotas (per account and Region unless said) -------------------------
# API Gateway HTTP API: 10,000 requests/s across the account's APIs, burst 5,000 ("Amazon
# API Gateway quotas"). The settings table bounds api_rate_limit and api_burst_limit by them.
API_ACCOUNT_RATE: Final = settings_table.API_RATE_LIMIT.high
API_ACCOUNT_BURST: Final = settings_table.API_BURST_LIMIT.high
# Lambda: 1,000 concurrent executions shared by the account's functions (adjustable; a
# new account may start lower) ("Lambda quotas").
LAMBDA_ACCOUNT_CONCURRENCY: Final = 1_000
# Lambda: an execution environment serves at most 10 requests a second, so a function's
# synchronous request rate is at most 10 x its concurrency ("Lambda scaling behavior").
REQUESTS_PER_ENVIRONMENT: Final = 10
# Lambda: a function gains at most 1,000 environments every 10 s, refilled continuously
# ("Lambda scaling behavior", concurrency scaling rate). Not adjustable.
SCALING_ENVIRONMENTS: Final = 1_000
SCALING_SECONDS: Final = 10
# DynamoDB: a partition takes 1,000 WCU/s (not adjustable); an on-demand table 40,000
# WRU/s (adjustable), 4,000 WRU/s at once when new, and starts with about 4 partitions;
# its stream has a shard per partition ("DynamoDB service quotas", "DynamoDB Streams").
PARTITION_WRITE_UNITS: Final = 1_000
TABLE_WRITE_UNITS: Final = 40_000
NEW_TABLE_WRITE_UNITS: Final = settings_table.TABLE_WARM_WRITE_UNITS.low
INITIAL_PARTITIONS: Final = 4
# Lambda's stream event source: 1 to 10 batches of one shard in flight at once.
MAX_PARALLELIZATION_FACTOR: Final = settings_table.RELAY_PARALLELIZATION_FACTOR.high
# SQS event source: starts with 5 concurrent batches, adds up to 300 a minute, at most its
# maximum concurrency, 2 to 1,000 ("Configuring scaling behavior for SQS event source
# mappings"). A standard queue has no throughput quota; about 120,000 messages in flight.
SQS_START_BATCHES: Final = 5
SQS_BATCHES_PER_MINUTE: Final = 300
SQS_MAX_CONCURRENCY: Final = settings_table.WORKER_MAX_CONCURRENCY.high
SQS_IN_FLIGHT: Final = 120_000
# EventBridge: a rate schedule runs at most once a minute.
SCHEDULE_MINUTES: Final = settings_table.RECONCILE_EVERY_MINUTES.low

# --- The raised quotas the largest settings assume ----------------------------------------
RAISED_LAMBDA_CONCURRENCY: Final = 10_000
RAISED_TABLE_WRITE_UNITS: Final = 80_000
# Shard passes a reconciler run makes at once at the largest settings.
LARGEST_RECONCILE_PARALLELISM: Final = 16

# --- Per-item costs -------------------------------------------------------------------------
# Write units: a receipt's transaction puts two items under 1 KB, 2 WRU each
# (transactional); a processed delivery writes 3 more (claim, completion, its index
# entry). Measured: docs/benchmarks.md, figure 11.
RECEIPT_WRITE_UNITS: Final = 4
DELIVERY_WRITE_UNITS: Final = 7
# The outbox record's transactional put on its received log key; the completion's index
# entry on its listing key (keys only, under 1 KB).
LOG_WRITE_UNITS: Final = 2
LISTING_WRITE_UNITS: Final = 1
# crc32 of random ids spreads receipts evenly, not exactly: the hottest key takes about a
# tenth more than its share.
SHARD_SKEW: Final = 0.9
# Assumed in-region latencies (docs/cost.md prices the same): a receiver invocation (its
# TransactWriteItems and the handler; the local stack measures 47.9 ms through its front
# door, figure 5), a relay batch of 10 records (one SendMessageBatch).
RECEIVER_SECONDS: Final = 0.030
RELAY_BATCH_SECONDS: Final = 0.025
# Worker: measured time per message of the default workflow in a batch of 10 (figure 4:
# the real handler, moto, an MCP server on loopback), and the cost model's in-region
# time per message at a 300 ms MCP answer (figure 9: billed time, batch of 10).
WORKER_SECONDS_PER_MESSAGE: Final = 0.0394
WORKER_SECONDS_PER_MESSAGE_MCP_300MS: Final = 0.1362
# Reconciler: receipts one shard's pass reads per second, measured over moto in process
# (figure 12: 1,232 items/s, moto's own work on the same cores included): a floor.
RECONCILER_READS_PER_SLICE: Final = 1_232
# The reconciler Lambda's timeout (infra/reconciler.py uses this very value).
RECONCILER_TIMEOUT_SECONDS: Final = 120
RECONCILER_RUN_SECONDS: Final = RECONCILER_TIMEOUT_SECONDS - SAFETY_MARGIN_SECONDS


@dataclass(frozen=True, slots=True)
class Quota:
    """One AWS quota that binds on the way to 10,000 receipts/s.

    Attributes:
        name: The quota, as Service Quotas or the AWS docs name it.
        default: AWS's default, in ``unit``.
        plan: The value the plan at 10,000 receipts/s needs (the default if it does).
        unit: What it counts.
        adjustable: Whether Service Quotas can raise it.
        source: The AWS document that states it.
    """

    name: str
    default: int
    plan: int
    unit: str
    adjustable: bool
    source: str


QUOTAS: Final = (
    Quota(
        "Lambda concurrent executions",
        LAMBDA_ACCOUNT_CONCURRENCY,
        RAISED_LAMBDA_CONCURRENCY,
        "environments (account; a new account may have less)",
        True,
        "Lambda quotas",
    ),
    Quota(
        "Lambda requests per environment",
        REQUESTS_PER_ENVIRONMENT,
        REQUESTS_PER_ENVIRONMENT,
        "requests/s (so 10 x concurrency per function)",
        False,
        "Lambda scaling behavior",
    ),
    Quota(
        "Lambda scaling rate",
        SCALING_ENVIRONMENTS,
        SCALING_ENVIRONMENTS,
        f"new environments per {SCALING_SECONDS} s per function",
        False,
        "Lambda scaling behavior",
    ),
    Quota(
        "API Gateway HTTP API throttle",
        API_ACCOUNT_RATE,
        API_ACCOUNT_RATE,
        "requests/s (account; no headroom at 10,000)",
        True,
        "Amazon API Gateway quotas",
    ),
    Quota(
        "API Gateway HTTP API burst",
        API_ACCOUNT_BURST,
        API_ACCOUNT_BURST,
        "requests",
        True,
        "Amazon API Gateway quotas",
    ),
    Quota(
        "DynamoDB table write throughput (on-demand)",
        TABLE_WRITE_UNITS,
        RAISED_TABLE_WRITE_UNITS,
        "WRU/s per table",
        True,
        "DynamoDB service quotas",
    ),
    Quota(
        "DynamoDB partition write throughput",
        PARTITION_WRITE_UNITS,
        PARTITION_WRITE_UNITS,
        "WCU/s per partition key",
        False,
        "DynamoDB service quotas",
    ),
    Quota(
        "SQS event source maximum concurrency",
        SQS_MAX_CONCURRENCY,
        SQS_MAX_CONCURRENCY,
        f"batches at once (starts at {SQS_START_BATCHES}, +{SQS_BATCHES_PER_MINUTE} a minute)",
        False,
        "Configuring scaling behavior for SQS event source mappings",
    ),
    Quota(
        "SQS standard queue messages in flight",
        SQS_IN_FLIGHT,
        SQS_IN_FLIGHT,
        "messages (throughput itself has no quota)",
        True,
        "Amazon SQS quotas",
    ),
)
