"""Each function's environment, from the names of the resources it uses.

The CDK stack calls these with tokens, the local runtime with the emulator's
names: one definition of what every function is told, so the two cannot drift.
No CDK import here, so the local runtime can use it without the CDK installed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from functions.core import env_names, settings_table
from functions.core.log_levels import level_number


def application_log_level(log_level: str) -> str:
    """Lambda's application log level for the stack's ``log_level``: DEBUG, else INFO.

    Lambda drops a JSON line below this level and takes a line without a ``level`` for
    INFO; EMF metric lines have none, so above INFO every metric would be dropped and
    its alarm go silent. WARNING and ERROR are the functions' own level instead
    (``POWERTOOLS_LOG_LEVEL``, which ``functions.core.observability`` applies).
    """
    return "DEBUG" if level_number(log_level) == logging.DEBUG else "INFO"


def receiver_environment(
    *,
    table_name: str,
    signing_secrets_arn: str,
    inbox_retention_days: int,
    secrets_max_age_seconds: int = settings_table.SECRETS_MAX_AGE_SECONDS.default,
    received_log_shards: int = settings_table.RECEIVED_LOG_SHARDS.default,
    trace_sample_percent: int = settings_table.TRACE_SAMPLE_PERCENT.default,
) -> dict[str, str]:
    return {
        env_names.ENV_TABLE_NAME: table_name,
        env_names.ENV_SIGNING_SECRETS_ARN: signing_secrets_arn,
        env_names.ENV_SECRETS_MAX_AGE_SECONDS: str(secrets_max_age_seconds),
        env_names.ENV_INBOX_RETENTION_DAYS: str(inbox_retention_days),
        env_names.ENV_RECEIVED_LOG_SHARDS: str(received_log_shards),
        env_names.ENV_TRACE_SAMPLE_PERCENT: str(trace_sample_percent),
    }


def relay_environment(*, work_queue_url: str) -> dict[str, str]:
    return {env_names.ENV_WORK_QUEUE_URL: work_queue_url}


def worker_environment(
    *,
    table_name: str,
    work_queue_url: str,
    dead_letter_queue_url: str,
    mcp_token_secret_arn: str,
    mcp_allowed_hosts: Sequence[str],
    workflow: str,
    archive_bucket: str,
    max_attempts: int,
    lease_seconds: int,
    notify_url: str | None = None,
    workflow_settings: Mapping[str, str] | None = None,
    alert_topic_arn: str | None = None,
    mcp_timeout_seconds: int = settings_table.MCP_TIMEOUT_SECONDS.default,
    secrets_max_age_seconds: int = settings_table.SECRETS_MAX_AGE_SECONDS.default,
    retry_base_seconds: int = settings_table.WORKER_RETRY_BASE_SECONDS.default,
    batch_concurrency: int = settings_table.WORKER_BATCH_CONCURRENCY.env_integer().default,
    workflow_seconds: int = settings_table.WORKER_WORKFLOW_SECONDS.default,
    retry_horizon_seconds: int = settings_table.WORKER_RETRY_HORIZON_HOURS.env_default,
    received_log_shards: int = settings_table.RECEIVED_LOG_SHARDS.default,
) -> dict[str, str]:
    environment = {
        env_names.ENV_RECEIVED_LOG_SHARDS: str(received_log_shards),
        env_names.ENV_TABLE_NAME: table_name,
        env_names.ENV_WORK_QUEUE_URL: work_queue_url,
        env_names.ENV_DEAD_LETTER_QUEUE_URL: dead_letter_queue_url,
        env_names.ENV_MCP_TOKEN_SECRET_ARN: mcp_token_secret_arn,
        env_names.ENV_MCP_ALLOWED_HOSTS: ",".join(mcp_allowed_hosts),
        env_names.ENV_MCP_TIMEOUT_SECONDS: str(mcp_timeout_seconds),
        env_names.ENV_WORKFLOW: workflow,
        # Compact and sorted: the same settings give the same template.
        env_names.ENV_WORKFLOW_SETTINGS: json.dumps(
            dict(workflow_settings or {}), sort_keys=True, separators=(",", ":")
        ),
        env_names.ENV_ARCHIVE_BUCKET: archive_bucket,
        env_names.ENV_MAX_ATTEMPTS: str(max_attempts),
        env_names.ENV_LEASE_SECONDS: str(lease_seconds),
        env_names.ENV_SECRETS_MAX_AGE_SECONDS: str(secrets_max_age_seconds),
        env_names.ENV_RETRY_BASE_SECONDS: str(retry_base_seconds),
        env_names.ENV_BATCH_CONCURRENCY: str(batch_concurrency),
        env_names.ENV_WORKFLOW_SECONDS: str(workflow_seconds),
        env_names.ENV_RETRY_HORIZON_SECONDS: str(retry_horizon_seconds),
    }
    if notify_url is not None:
        environment[env_names.ENV_NOTIFY_URL] = notify_url
    if alert_topic_arn is not None:
        environment[env_names.ENV_ALERT_TOPIC_ARN] = alert_topic_arn
    return environment


def reconciler_environment(
    *,
    table_name: str,
    work_queue_url: str,
    lease_seconds: int,
    pending_age_seconds: int = settings_table.RECONCILE_PENDING_AGE_SECONDS.default,
    effect_age_seconds: int = settings_table.RECONCILE_EFFECT_AGE_SECONDS.default,
    received_log_shards: int = settings_table.RECEIVED_LOG_SHARDS.default,
    inbox_retention_days: int = settings_table.INBOX_RETENTION_DAYS.default,
    parallelism: int = settings_table.RECONCILE_PARALLELISM.default,
) -> dict[str, str]:
    return {
        env_names.ENV_RECEIVED_LOG_SHARDS: str(received_log_shards),
        env_names.ENV_RECONCILE_PARALLELISM: str(parallelism),
        env_names.ENV_INBOX_RETENTION_DAYS: str(inbox_retention_days),
        env_names.ENV_TABLE_NAME: table_name,
        env_names.ENV_WORK_QUEUE_URL: work_queue_url,
        env_names.ENV_LEASE_SECONDS: str(lease_seconds),
        env_names.ENV_RECONCILE_PENDING_AGE_SECONDS: str(pending_age_seconds),
        env_names.ENV_RECONCILE_EFFECT_AGE_SECONDS: str(effect_age_seconds),
    }
