"""Environment variable names: each function's settings read a subset, infra sets them.

One definition, so that a variable cannot drift between the code that reads it and the
infrastructure (or the local runtime) that sets it. Standard library only.
"""

from __future__ import annotations

from typing import Final

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
ENV_WORKFLOW_SETTINGS: Final = "WORKFLOW_SETTINGS"  # a JSON object of strings
ENV_ALERT_TOPIC_ARN: Final = "ALERT_TOPIC_ARN"
ENV_NOTIFY_URL: Final = "NOTIFY_URL"
ENV_ARCHIVE_BUCKET: Final = "ARCHIVE_BUCKET"
ENV_DEAD_LETTER_QUEUE_URL: Final = "DEAD_LETTER_QUEUE_URL"
ENV_MAX_ATTEMPTS: Final = "WORKER_MAX_ATTEMPTS"
ENV_LEASE_SECONDS: Final = "WORKER_LEASE_SECONDS"
ENV_RETRY_BASE_SECONDS: Final = "WORKER_RETRY_BASE_SECONDS"  # first retry delay; doubles
ENV_BATCH_CONCURRENCY: Final = "WORKER_BATCH_CONCURRENCY"  # messages of a batch at once
ENV_WORKFLOW_SECONDS: Final = "WORKER_WORKFLOW_SECONDS"  # the workflow's time allowance
ENV_RETRY_HORIZON_SECONDS: Final = "WORKER_RETRY_HORIZON_SECONDS"  # since receipt
ENV_RECONCILE_PENDING_AGE_SECONDS: Final = "RECONCILE_PENDING_AGE_SECONDS"
ENV_RECONCILE_EFFECT_AGE_SECONDS: Final = "RECONCILE_EFFECT_AGE_SECONDS"
ENV_RECEIVED_LOG_SHARDS: Final = "RECEIVED_LOG_SHARDS"  # receiver writes, reconciler reads
ENV_RECONCILE_PARALLELISM: Final = "RECONCILE_PARALLELISM"  # reconciler only
# Powertools reads these itself; listed so infra and tests agree on them.
ENV_POWERTOOLS_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
ENV_POWERTOOLS_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
ENV_POWERTOOLS_LOG_LEVEL: Final = "POWERTOOLS_LOG_LEVEL"
# "false" only where the stack turns tracing on (infra.config: ``tracing``).
ENV_POWERTOOLS_TRACE_DISABLED: Final = "POWERTOOLS_TRACE_DISABLED"
# Lambda sets these itself from the function's logging configuration (the local runtime
# emulates them): the log format, and the application log level its filter applies.
ENV_LAMBDA_LOG_FORMAT: Final = "AWS_LAMBDA_LOG_FORMAT"
ENV_LAMBDA_LOG_LEVEL: Final = "AWS_LAMBDA_LOG_LEVEL"
# Where spans go (functions.core.adapters.span_export): a file of OTLP-JSON lines (the
# local stack's collector), an OTLP/HTTP endpoint (a team's own backend). Absent: none.
ENV_SPANS_FILE: Final = "RELAYLINK_SPANS_FILE"
ENV_OTLP_ENDPOINT: Final = "RELAYLINK_OTLP_ENDPOINT"
ENV_TRACE_SAMPLE_PERCENT: Final = "TRACE_SAMPLE_PERCENT"  # receiver decides, at receipt
# Lambda sets it with active tracing on: where its X-Ray daemon listens.
ENV_XRAY_DAEMON_ADDRESS: Final = "AWS_XRAY_DAEMON_ADDRESS"
