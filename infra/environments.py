"""Each function's environment, from the names of the resources it uses.

The CDK stack calls these with tokens, the local runtime with the emulator's
names: one definition of what every function is told, so the two cannot drift.
No CDK import here, so the local runtime can use it without the CDK installed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from functions.core import env_keys, setting_defaults, table_layout
from functions.core.log_levels import level_number
from functions.core.retry_policy import RETRY_BASE_SECONDS


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
    secrets_max_age_seconds: int = setting_defaults.DEFAULT_SECRETS_MAX_AGE_SECONDS,
    received_log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
) -> dict[str, str]:
    return {
        env_keys.ENV_TABLE_NAME: table_name,
        env_keys.ENV_SIGNING_SECRETS_ARN: signing_secrets_arn,
        env_keys.ENV_SECRETS_MAX_AGE_SECONDS: str(secrets_max_age_seconds),
        env_keys.ENV_INBOX_RETENTION_DAYS: str(inbox_retention_days),
        env_keys.ENV_RECEIVED_LOG_SHARDS: str(received_log_shards),
    }


def relay_environment(*, work_queue_url: str) -> dict[str, str]:
    return {env_keys.ENV_WORK_QUEUE_URL: work_queue_url}


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
    mcp_timeout_seconds: int = setting_defaults.DEFAULT_MCP_TIMEOUT_SECONDS,
    secrets_max_age_seconds: int = setting_defaults.DEFAULT_SECRETS_MAX_AGE_SECONDS,
    retry_base_seconds: int = RETRY_BASE_SECONDS,
    batch_concurrency: int = setting_defaults.DEFAULT_BATCH_CONCURRENCY,
    workflow_seconds: int = setting_defaults.DEFAULT_WORKFLOW_SECONDS,
    retry_horizon_seconds: int = setting_defaults.DEFAULT_RETRY_HORIZON_SECONDS,
) -> dict[str, str]:
    environment = {
        env_keys.ENV_TABLE_NAME: table_name,
        env_keys.ENV_WORK_QUEUE_URL: work_queue_url,
        env_keys.ENV_DEAD_LETTER_QUEUE_URL: dead_letter_queue_url,
        env_keys.ENV_MCP_TOKEN_SECRET_ARN: mcp_token_secret_arn,
        env_keys.ENV_MCP_ALLOWED_HOSTS: ",".join(mcp_allowed_hosts),
        env_keys.ENV_MCP_TIMEOUT_SECONDS: str(mcp_timeout_seconds),
        env_keys.ENV_WORKFLOW: workflow,
        # Compact and sorted: the same settings give the same template.
        env_keys.ENV_WORKFLOW_SETTINGS: json.dumps(
            dict(workflow_settings or {}), sort_keys=True, separators=(",", ":")
        ),
        env_keys.ENV_ARCHIVE_BUCKET: archive_bucket,
        env_keys.ENV_MAX_ATTEMPTS: str(max_attempts),
        env_keys.ENV_LEASE_SECONDS: str(lease_seconds),
        env_keys.ENV_SECRETS_MAX_AGE_SECONDS: str(secrets_max_age_seconds),
        env_keys.ENV_RETRY_BASE_SECONDS: str(retry_base_seconds),
        env_keys.ENV_BATCH_CONCURRENCY: str(batch_concurrency),
        env_keys.ENV_WORKFLOW_SECONDS: str(workflow_seconds),
        env_keys.ENV_RETRY_HORIZON_SECONDS: str(retry_horizon_seconds),
    }
    if notify_url is not None:
        environment[env_keys.ENV_NOTIFY_URL] = notify_url
    if alert_topic_arn is not None:
        environment[env_keys.ENV_ALERT_TOPIC_ARN] = alert_topic_arn
    return environment


def reconciler_environment(
    *,
    table_name: str,
    work_queue_url: str,
    lease_seconds: int,
    pending_age_seconds: int = setting_defaults.DEFAULT_RECONCILE_PENDING_AGE_SECONDS,
    effect_age_seconds: int = setting_defaults.DEFAULT_RECONCILE_EFFECT_AGE_SECONDS,
    received_log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
    inbox_retention_days: int = setting_defaults.DEFAULT_INBOX_RETENTION_DAYS,
) -> dict[str, str]:
    return {
        env_keys.ENV_RECEIVED_LOG_SHARDS: str(received_log_shards),
        env_keys.ENV_INBOX_RETENTION_DAYS: str(inbox_retention_days),
        env_keys.ENV_TABLE_NAME: table_name,
        env_keys.ENV_WORK_QUEUE_URL: work_queue_url,
        env_keys.ENV_LEASE_SECONDS: str(lease_seconds),
        env_keys.ENV_RECONCILE_PENDING_AGE_SECONDS: str(pending_age_seconds),
        env_keys.ENV_RECONCILE_EFFECT_AGE_SECONDS: str(effect_age_seconds),
    }
