"""The default of each setting that has one, shared by the functions' settings and infra.

Standard library only.
"""

from __future__ import annotations

from typing import Final

# RelayLink retries a delivery for up to 3 days (docs/contract.md): two weeks keep
# every retry deduplicated, with room for the dead-letter queue, whose retention infra
# derives from this (infra.schema.dead_letter_retention_seconds) so that a dead letter
# sent as late as the worker sends one is gone before its item. Later letters (after an
# operator's requeue) may outlive their item: the worker then finds it expired or
# missing and acknowledges them. Storage is billed per day kept.
DEFAULT_INBOX_RETENTION_DAYS: Final = 14
DEFAULT_SECRETS_MAX_AGE_SECONDS: Final = 300
# An alias (functions.workflows.wiring.SHIPPED): archive needs nothing outside
# the stack, so a bare deployment starts and completes deliveries.
DEFAULT_WORKFLOW: Final = "archive"
# Attempts of unknown outcome (a workflow bug, a worker that died) before dead-lettering.
DEFAULT_MAX_ATTEMPTS: Final = 5
# How long known-transient failures are retried after a delivery's receipt: a night and
# the next working day for an operator paged by McpAuthFailures or WorkQueueAge to fix
# a token or an MCP server, yet the dead-letter queue still says within a day that
# something is broken for good. At most RelayLink's own 3 days.
DEFAULT_RETRY_HORIZON_SECONDS: Final = 24 * 3600
DEFAULT_LEASE_SECONDS: Final = 900  # longer than the worker's Lambda timeout
DEFAULT_MCP_TIMEOUT_SECONDS: Final = 10
# The agent workflow's model (its ``model_id`` setting); infra grants InvokeModel on it.
DEFAULT_AGENT_MODEL_ID: Final = "amazon.nova-micro-v1:0"
DEFAULT_BATCH_CONCURRENCY: Final = 10  # the whole batch (the worker's batch size) at once
# Time a message's workflow is allowed; a message is started only while the invocation
# has this (plus the MCP fetch's bound) left. An agent's model calls take 10-60 s.
DEFAULT_WORKFLOW_SECONDS: Final = 60
# A pending item normally reaches a worker within seconds; longer than the largest
# retry delay (15 min) so that items waiting out a back-off are not re-enqueued.
DEFAULT_RECONCILE_PENDING_AGE_SECONDS: Final = 30 * 60
DEFAULT_RECONCILE_EFFECT_AGE_SECONDS: Final = 60 * 60
