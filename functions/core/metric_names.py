"""The service name, the metric namespace and every metric name (EMF).

One definition shared by the code that counts, the CDK alarms and dashboard, and the
tests. Standard library only.
"""

from __future__ import annotations

from typing import Final

SERVICE: Final = "relaylink-receiver"
METRICS_NAMESPACE: Final = "RelayLinkReceiver"

METRIC_QUARANTINED: Final = "DeliveriesQuarantined"
# A signed body nested deeper than the parser goes: valid JSON we cannot read, counted
# apart from other invalid bodies so that a sender change shows on its own.
METRIC_BODY_TOO_DEEP: Final = "DeliveriesTooDeep"
# A receipt's transaction tried again after throttling or a lost answer (one per retry).
METRIC_RECEIPT_RETRIES: Final = "ReceiptRetries"
METRIC_MCP_AUTH_FAILURES: Final = "McpAuthFailures"
METRIC_UNCERTAIN_EFFECTS: Final = "UncertainEffects"
# Processing (relay, worker, reconciler); one count per outcome.
METRIC_WORK_RELAYED: Final = "WorkItemsRelayed"
METRIC_WORK_COMPLETED: Final = "WorkCompleted"
METRIC_WORK_ALREADY_DONE: Final = "WorkAlreadyDone"
METRIC_WORK_DEFERRED: Final = "WorkDeferred"  # leased by another worker, or the budget is spent
METRIC_WORK_RETRIED: Final = "WorkRetried"
METRIC_WORK_FAILED: Final = "WorkFailed"
METRIC_WORK_DEAD_LETTERED: Final = "WorkDeadLettered"
METRIC_CLAIMS_LOST: Final = "ClaimsLost"
# Suspect deliveries (earlier attempts died unexplained) set aside to run alone.
METRIC_WORK_SET_ASIDE: Final = "WorkSetAside"
# Open deliveries closed unrun because their TTL passed (their records may be deleted).
METRIC_WORK_EXPIRED: Final = "WorkExpired"
# A queue message naming another package or MCP server than its inbox item: refused.
METRIC_WORK_REFUSED: Final = "WorkRefused"
# A refetched package (its recorded content gone) is not the recorded one: failed.
METRIC_PACKAGE_CHANGED: Final = "PackagesChanged"
# Returned unclaimed: no time left in the invocation, or its MCP server unreachable.
METRIC_WORK_NOT_STARTED: Final = "WorkNotStarted"
METRIC_RECONCILER_PENDING_REQUEUED: Final = "ReconcilerPendingRequeued"
METRIC_RECONCILER_LEASES_REQUEUED: Final = "ReconcilerExpiredLeasesRequeued"
METRIC_RECONCILER_EFFECTS_REQUEUED: Final = "ReconcilerUncertainEffectsRequeued"
METRIC_RECONCILER_EFFECTS_FLAGGED: Final = "ReconcilerUncertainEffectsFlagged"
# Open receipts a run listed from the received log (none while workers keep up).
METRIC_RECONCILER_RECEIVED_LISTED: Final = "ReconcilerReceivedListed"
# Seconds from the received log's watermark to the run's time: about the received age
# when every run finishes; more when runs fall behind, or when they stopped.
METRIC_RECONCILER_RECEIVED_LOG_LAG: Final = "ReconcilerReceivedLogLag"
# Durable steps and the agent workflow.
METRIC_STEP_RERUNS: Final = "StepReruns"  # a step run again after its worker died inside it
METRIC_BUDGET_EXHAUSTED: Final = "BudgetExhausted"  # a delivery waits for the token budget
METRIC_MODEL_CALLS: Final = "ModelCalls"  # Converse requests made (failed ones too)
# The approval gate: deliveries parked for a person, those the timeout denied, and how
# long the oldest one still waiting has waited (0 when none waits; its alarm's figure).
METRIC_WORK_PARKED: Final = "WorkAwaitingApproval"
METRIC_APPROVALS_EXPIRED: Final = "ApprovalsExpired"
METRIC_APPROVAL_OLDEST_WAIT: Final = "ApprovalOldestWaitSeconds"


# The counts published as CloudWatch metrics (EMF directives): those an alarm reads. Every
# other count is a field of its log line, summed by Logs Insights (docs/operations.md,
# "Counts from the logs"): a custom metric is billed $0.30 a month whatever its volume,
# most of a small team's bill (docs/cost.md).
PUBLISHED_METRICS: Final = frozenset(
    {
        METRIC_QUARANTINED,
        METRIC_WORK_FAILED,
        METRIC_MCP_AUTH_FAILURES,
        METRIC_UNCERTAIN_EFFECTS,
        METRIC_RECONCILER_RECEIVED_LOG_LAG,
        METRIC_RECEIPT_RETRIES,
        METRIC_BUDGET_EXHAUSTED,
        METRIC_APPROVAL_OLDEST_WAIT,
        METRIC_PACKAGE_CHANGED,
    }
)
# Published only by a workflow that calls a model (its budget) or has an approval gate:
# never by the default stack's archive workflow, so never billed there.
WORKFLOW_ONLY_METRICS: Final = frozenset({METRIC_BUDGET_EXHAUSTED, METRIC_APPROVAL_OLDEST_WAIT})


def receiver_outcome_metric(outcome: str) -> str:
    """Metric name for one receiver outcome, e.g. ``accepted`` -> ``DeliveriesAccepted``."""
    return "Deliveries" + "".join(part.capitalize() for part in outcome.split("_"))
