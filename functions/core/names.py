"""Names shared by the functions, the CDK stack, the local runtime and the tests.

One module so that a key schema, an environment variable or a metric name cannot
drift between the code that writes it and the infrastructure that provisions it.
Nothing here imports anything heavier than the standard library.
"""

from __future__ import annotations

from typing import Final

SERVICE: Final = "relaylink-receiver"
METRICS_NAMESPACE: Final = "RelayLinkReceiver"

# --- Environment variables (each function's settings read a subset) -----------
ENV_TABLE_NAME: Final = "TABLE_NAME"
ENV_SIGNING_SECRETS_ARN: Final = "SIGNING_SECRETS_ARN"
ENV_SECRETS_MAX_AGE_SECONDS: Final = "SECRETS_MAX_AGE_SECONDS"
ENV_INBOX_RETENTION_DAYS: Final = "INBOX_RETENTION_DAYS"
ENV_WORK_QUEUE_URL: Final = "WORK_QUEUE_URL"
ENV_MCP_TOKEN_SECRET_ARN: Final = "MCP_TOKEN_SECRET_ARN"  # noqa: S105 (a variable name)
ENV_MCP_ALLOWED_HOSTS: Final = "MCP_ALLOWED_HOSTS"
ENV_MCP_ALLOW_INSECURE_LOOPBACK: Final = "MCP_ALLOW_INSECURE_LOOPBACK"
ENV_MCP_TIMEOUT_SECONDS: Final = "MCP_TIMEOUT_SECONDS"
ENV_WORKFLOW: Final = "WORKFLOW"
ENV_NOTIFY_URL: Final = "NOTIFY_URL"
ENV_ARCHIVE_BUCKET: Final = "ARCHIVE_BUCKET"
ENV_DEAD_LETTER_QUEUE_URL: Final = "DEAD_LETTER_QUEUE_URL"
ENV_MAX_ATTEMPTS: Final = "WORKER_MAX_ATTEMPTS"
ENV_LEASE_SECONDS: Final = "WORKER_LEASE_SECONDS"
ENV_RETRY_BASE_SECONDS: Final = "WORKER_RETRY_BASE_SECONDS"  # first retry delay; doubles
# Powertools reads these itself; listed so infra and tests agree on them.
ENV_POWERTOOLS_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
ENV_POWERTOOLS_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
ENV_POWERTOOLS_LOG_LEVEL: Final = "POWERTOOLS_LOG_LEVEL"

# --- The table (single-table design; see docs/architecture.md) -----------------
TABLE_PARTITION_KEY: Final = "pk"  # the delivery id
TABLE_SORT_KEY: Final = "sk"  # which record of the delivery, see SK_*
TTL_ATTRIBUTE: Final = "expires_at"  # epoch seconds; DynamoDB TTL
KIND_ATTRIBUTE: Final = "kind"  # the stream filter reads this

SK_INBOX: Final = "inbox"
SK_OUTBOX: Final = "outbox"
SK_QUARANTINE_PREFIX: Final = "quarantine#"  # + digest of the conflicting body
SK_EFFECT_PREFIX: Final = "effect#"  # + effect name

KIND_INBOX: Final = "inbox"
KIND_OUTBOX: Final = "outbox"
KIND_QUARANTINE: Final = "quarantine"
KIND_EFFECT: Final = "effect"

# A sparse global secondary index of "things an operator or the reconciler lists":
# inbox items by state, quarantine records, effects whose outcome is uncertain.
# The partition key is sharded so that no single GSI partition takes every write.
STATE_INDEX: Final = "by_state"
STATE_INDEX_PARTITION_KEY: Final = "state_shard"  # f"{state}#{shard:02d}"
STATE_INDEX_SORT_KEY: Final = "state_changed_at"  # epoch seconds (number)
STATE_INDEX_SHARDS: Final = 8

# Outbox records only need to live as long as the stream that carries them (24 h).
OUTBOX_TTL_SECONDS: Final = 24 * 3600
DEFAULT_INBOX_RETENTION_DAYS: Final = 30
DEFAULT_SECRETS_MAX_AGE_SECONDS: Final = 300

# --- RelayLink's request (docs/contract.md, Headers), names lower-cased ------------
HEADER_DELIVERY: Final = "x-relaylink-delivery"
HEADER_EVENT: Final = "x-relaylink-event"
HEADER_TIMESTAMP: Final = "x-relaylink-timestamp"
HEADER_SIGNATURE: Final = "x-relaylink-signature"
HEADER_ATTEMPT: Final = "x-relaylink-attempt"
MAX_BODY_BYTES: Final = 256 * 1024  # RelayLink never sends more (docs/contract.md, Body)

# --- Metrics (EMF, namespace above) ---------------------------------------------
METRIC_QUARANTINED: Final = "DeliveriesQuarantined"
METRIC_MCP_AUTH_FAILURES: Final = "McpAuthFailures"
METRIC_UNCERTAIN_EFFECTS: Final = "UncertainEffects"
# Processing (relay, worker, reconciler); one count per outcome.
METRIC_WORK_RELAYED: Final = "WorkItemsRelayed"
METRIC_WORK_COMPLETED: Final = "WorkCompleted"
METRIC_WORK_ALREADY_DONE: Final = "WorkAlreadyDone"
METRIC_WORK_DEFERRED: Final = "WorkDeferred"  # leased by another live worker
METRIC_WORK_RETRIED: Final = "WorkRetried"
METRIC_WORK_FAILED: Final = "WorkFailed"
METRIC_WORK_DEAD_LETTERED: Final = "WorkDeadLettered"
METRIC_CLAIMS_LOST: Final = "ClaimsLost"
METRIC_RECONCILER_PENDING_REQUEUED: Final = "ReconcilerPendingRequeued"
METRIC_RECONCILER_LEASES_REQUEUED: Final = "ReconcilerExpiredLeasesRequeued"
METRIC_RECONCILER_EFFECTS_REQUEUED: Final = "ReconcilerUncertainEffectsRequeued"
METRIC_RECONCILER_EFFECTS_FLAGGED: Final = "ReconcilerUncertainEffectsFlagged"

# --- Event sources (the CDK stack's mappings; the local runtime emulates the same) --
RELAY_BATCH_SIZE: Final = 10
# Bounded: a record that still fails after this goes to the failure queue (metadata
# only) and the reconciler re-enqueues its pending inbox item from the table.
RELAY_RETRY_ATTEMPTS: Final = 10
RELAY_MAX_RECORD_AGE_SECONDS: Final = 6 * 3600
WORKER_BATCH_SIZE: Final = 10
# AWS: a queue's visibility timeout should be at least six times the function's timeout
# (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
VISIBILITY_TIMEOUT_FACTOR: Final = 6

# --- Processing (worker, reconciler) ----------------------------------------------
ENV_RECONCILE_PENDING_AGE_SECONDS: Final = "RECONCILE_PENDING_AGE_SECONDS"
ENV_RECONCILE_EFFECT_AGE_SECONDS: Final = "RECONCILE_EFFECT_AGE_SECONDS"
STATE_LABEL_EFFECT_INTENT: Final = "effect_intent"  # index label of an effect in doubt
DEFAULT_WORKFLOW: Final = "functions.workflows.wiring:build_default"
DEFAULT_MAX_ATTEMPTS: Final = 5  # the work queue's redrive maxReceiveCount must equal it
DEFAULT_LEASE_SECONDS: Final = 900  # longer than the worker's Lambda timeout
DEFAULT_MCP_TIMEOUT_SECONDS: Final = 10
# A pending item normally reaches a worker within seconds; longer than the largest
# retry delay (15 min) so that items waiting out a back-off are not re-enqueued.
DEFAULT_RECONCILE_PENDING_AGE_SECONDS: Final = 30 * 60
DEFAULT_RECONCILE_EFFECT_AGE_SECONDS: Final = 60 * 60


def receiver_outcome_metric(outcome: str) -> str:
    """Metric name for one receiver outcome, e.g. ``accepted`` -> ``DeliveriesAccepted``."""
    return "Deliveries" + "".join(part.capitalize() for part in outcome.split("_"))
