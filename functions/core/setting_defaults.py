"""The default of each setting that has one, shared by the functions' settings and infra.

Standard library only.
"""

from __future__ import annotations

from typing import Final

DEFAULT_INBOX_RETENTION_DAYS: Final = 30
DEFAULT_SECRETS_MAX_AGE_SECONDS: Final = 300
# An alias (functions.core.workflow.WORKFLOW_ALIASES): archive needs nothing outside
# the stack, so a bare deployment starts and completes deliveries.
DEFAULT_WORKFLOW: Final = "archive"
DEFAULT_MAX_ATTEMPTS: Final = 5  # the work queue's redrive maxReceiveCount must equal it
DEFAULT_LEASE_SECONDS: Final = 900  # longer than the worker's Lambda timeout
DEFAULT_MCP_TIMEOUT_SECONDS: Final = 10
# The agent workflow's model (its ``model_id`` setting); infra grants InvokeModel on it.
DEFAULT_AGENT_MODEL_ID: Final = "amazon.nova-micro-v1:0"
# A pending item normally reaches a worker within seconds; longer than the largest
# retry delay (15 min) so that items waiting out a back-off are not re-enqueued.
DEFAULT_RECONCILE_PENDING_AGE_SECONDS: Final = 30 * 60
DEFAULT_RECONCILE_EFFECT_AGE_SECONDS: Final = 60 * 60
