"""The default of each setting that has one, shared by the functions' settings and infra.

Standard library only.
"""

from __future__ import annotations

from typing import Final

DEFAULT_INBOX_RETENTION_DAYS: Final = 30
DEFAULT_SECRETS_MAX_AGE_SECONDS: Final = 300
DEFAULT_WORKFLOW: Final = "functions.workflows.wiring:build_default"
DEFAULT_MAX_ATTEMPTS: Final = 5  # the work queue's redrive maxReceiveCount must equal it
DEFAULT_LEASE_SECONDS: Final = 900  # longer than the worker's Lambda timeout
DEFAULT_MCP_TIMEOUT_SECONDS: Final = 10
DEFAULT_BATCH_CONCURRENCY: Final = 10  # the whole batch (the worker's batch size) at once
# Time a message's workflow is allowed; a message is started only while the invocation
# has this (plus the MCP fetch's bound) left. An agent's model calls take 10-60 s.
DEFAULT_WORKFLOW_SECONDS: Final = 60
# A pending item normally reaches a worker within seconds; longer than the largest
# retry delay (15 min) so that items waiting out a back-off are not re-enqueued.
DEFAULT_RECONCILE_PENDING_AGE_SECONDS: Final = 30 * 60
DEFAULT_RECONCILE_EFFECT_AGE_SECONDS: Final = 60 * 60
