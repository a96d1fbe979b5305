"""Each function's environment, from the names of the resources it uses.

The CDK stack calls these with tokens, the local runtime with the emulator's
names: one definition of what every function is told, so the two cannot drift.
No CDK import here, so the local runtime can use it without the CDK installed.
"""

from __future__ import annotations

from collections.abc import Sequence

from functions.core import names
from functions.core.process import RETRY_BASE_SECONDS


def receiver_environment(
    *,
    table_name: str,
    signing_secrets_arn: str,
    inbox_retention_days: int,
    secrets_max_age_seconds: int = names.DEFAULT_SECRETS_MAX_AGE_SECONDS,
) -> dict[str, str]:
    return {
        names.ENV_TABLE_NAME: table_name,
        names.ENV_SIGNING_SECRETS_ARN: signing_secrets_arn,
        names.ENV_SECRETS_MAX_AGE_SECONDS: str(secrets_max_age_seconds),
        names.ENV_INBOX_RETENTION_DAYS: str(inbox_retention_days),
    }


def relay_environment(*, work_queue_url: str) -> dict[str, str]:
    return {names.ENV_WORK_QUEUE_URL: work_queue_url}


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
    mcp_timeout_seconds: int = names.DEFAULT_MCP_TIMEOUT_SECONDS,
    secrets_max_age_seconds: int = names.DEFAULT_SECRETS_MAX_AGE_SECONDS,
    retry_base_seconds: int = RETRY_BASE_SECONDS,
) -> dict[str, str]:
    environment = {
        names.ENV_TABLE_NAME: table_name,
        names.ENV_WORK_QUEUE_URL: work_queue_url,
        names.ENV_DEAD_LETTER_QUEUE_URL: dead_letter_queue_url,
        names.ENV_MCP_TOKEN_SECRET_ARN: mcp_token_secret_arn,
        names.ENV_MCP_ALLOWED_HOSTS: ",".join(mcp_allowed_hosts),
        names.ENV_MCP_TIMEOUT_SECONDS: str(mcp_timeout_seconds),
        names.ENV_WORKFLOW: workflow,
        names.ENV_ARCHIVE_BUCKET: archive_bucket,
        names.ENV_MAX_ATTEMPTS: str(max_attempts),
        names.ENV_LEASE_SECONDS: str(lease_seconds),
        names.ENV_SECRETS_MAX_AGE_SECONDS: str(secrets_max_age_seconds),
        names.ENV_RETRY_BASE_SECONDS: str(retry_base_seconds),
    }
    if notify_url is not None:
        environment[names.ENV_NOTIFY_URL] = notify_url
    return environment


def reconciler_environment(
    *,
    table_name: str,
    work_queue_url: str,
    lease_seconds: int,
    pending_age_seconds: int = names.DEFAULT_RECONCILE_PENDING_AGE_SECONDS,
    effect_age_seconds: int = names.DEFAULT_RECONCILE_EFFECT_AGE_SECONDS,
) -> dict[str, str]:
    return {
        names.ENV_TABLE_NAME: table_name,
        names.ENV_WORK_QUEUE_URL: work_queue_url,
        names.ENV_LEASE_SECONDS: str(lease_seconds),
        names.ENV_RECONCILE_PENDING_AGE_SECONDS: str(pending_age_seconds),
        names.ENV_RECONCILE_EFFECT_AGE_SECONDS: str(effect_age_seconds),
    }
