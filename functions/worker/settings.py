"""The worker's settings, read once from its Lambda environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from functions.core import env_keys, process, setting_defaults
from functions.core.settings_env import (
    BoundedInteger,
    boolean,
    host_list,
    optional,
    required,
    secret_arn,
    string_map,
)
from functions.core.shared_settings import LEASE_SECONDS, SECRETS_MAX_AGE_SECONDS

MCP_TIMEOUT_SECONDS: Final = BoundedInteger(
    env_keys.ENV_MCP_TIMEOUT_SECONDS,
    default=setting_defaults.DEFAULT_MCP_TIMEOUT_SECONDS,
    low=1,
    high=120,
)
MAX_ATTEMPTS: Final = BoundedInteger(
    env_keys.ENV_MAX_ATTEMPTS, default=setting_defaults.DEFAULT_MAX_ATTEMPTS, low=1, high=100
)
RETRY_BASE_SECONDS: Final = BoundedInteger(
    env_keys.ENV_RETRY_BASE_SECONDS, default=process.RETRY_BASE_SECONDS, low=1, high=900
)


@dataclass(frozen=True, slots=True)
class Settings:
    """What the worker needs (the MCP token by ARN, never by value)."""

    table_name: str
    work_queue_url: str
    dead_letter_queue_url: str
    mcp_token_secret_arn: str
    mcp_allowed_hosts: tuple[str, ...]
    mcp_allow_insecure_loopback: bool
    mcp_timeout_seconds: int
    workflow: str
    notify_url: str | None
    archive_bucket: str | None
    max_attempts: int
    lease_seconds: int
    secrets_max_age_seconds: int
    retry_base_seconds: int = process.RETRY_BASE_SECONDS
    workflow_settings: Mapping[str, str] = field(default_factory=dict)
    alert_topic_arn: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read exactly the worker's variables.

        ``WORKER_MAX_ATTEMPTS`` must equal the work queue's redrive ``maxReceiveCount``
        (infra sets both from one value).

        Raises:
            SettingsError: a required variable is missing or a value is out of range.
        """
        return cls(
            table_name=required(env, env_keys.ENV_TABLE_NAME),
            work_queue_url=required(env, env_keys.ENV_WORK_QUEUE_URL),
            dead_letter_queue_url=required(env, env_keys.ENV_DEAD_LETTER_QUEUE_URL),
            mcp_token_secret_arn=secret_arn(env, env_keys.ENV_MCP_TOKEN_SECRET_ARN),
            mcp_allowed_hosts=host_list(env, env_keys.ENV_MCP_ALLOWED_HOSTS),
            mcp_allow_insecure_loopback=boolean(env, env_keys.ENV_MCP_ALLOW_INSECURE_LOOPBACK),
            mcp_timeout_seconds=MCP_TIMEOUT_SECONDS.read(env),
            workflow=optional(env, env_keys.ENV_WORKFLOW) or setting_defaults.DEFAULT_WORKFLOW,
            notify_url=optional(env, env_keys.ENV_NOTIFY_URL),
            archive_bucket=optional(env, env_keys.ENV_ARCHIVE_BUCKET),
            max_attempts=MAX_ATTEMPTS.read(env),
            lease_seconds=LEASE_SECONDS.read(env),
            secrets_max_age_seconds=SECRETS_MAX_AGE_SECONDS.read(env),
            retry_base_seconds=RETRY_BASE_SECONDS.read(env),
            workflow_settings=string_map(env, env_keys.ENV_WORKFLOW_SETTINGS),
            alert_topic_arn=optional(env, env_keys.ENV_ALERT_TOPIC_ARN),
        )
