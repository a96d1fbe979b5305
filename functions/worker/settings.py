"""The worker's settings, read once from its Lambda environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from functions.core import env_names, settings_table
from functions.core.adapters import mcp_timing
from functions.core.env_parsers import (
    boolean,
    host_list,
    optional,
    required,
    secret_arn,
    string_map,
)

MCP_TIMEOUT_SECONDS: Final = settings_table.MCP_TIMEOUT_SECONDS.env_integer()
MAX_ATTEMPTS: Final = settings_table.WORKER_MAX_ATTEMPTS.env_integer()
RETRY_BASE_SECONDS: Final = settings_table.WORKER_RETRY_BASE_SECONDS.env_integer()
RETRY_HORIZON_SECONDS: Final = settings_table.WORKER_RETRY_HORIZON_HOURS.env_integer()
BATCH_CONCURRENCY: Final = settings_table.WORKER_BATCH_CONCURRENCY.env_integer()
WORKFLOW_SECONDS: Final = settings_table.WORKER_WORKFLOW_SECONDS.env_integer()
LEASE_SECONDS: Final = settings_table.WORKER_LEASE_SECONDS.env_integer()
RECEIVED_LOG_SHARDS: Final = settings_table.RECEIVED_LOG_SHARDS.env_integer()
SECRETS_MAX_AGE_SECONDS: Final = settings_table.SECRETS_MAX_AGE_SECONDS.env_integer()
# Kept back from the end of an invocation: recording the last outcomes and answering.
DEADLINE_MARGIN_SECONDS: Final = 5.0


def message_seconds(*, mcp_timeout_seconds: int, workflow_seconds: int) -> float:
    """The time a message needs once started: the longest fetch, then its workflow."""
    connect = mcp_timing.connect_timeout(mcp_timeout_seconds)
    return mcp_timing.fetch_time_bound(connect, float(mcp_timeout_seconds)) + workflow_seconds


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
    retry_base_seconds: int = settings_table.WORKER_RETRY_BASE_SECONDS.default
    retry_horizon_seconds: int = settings_table.WORKER_RETRY_HORIZON_HOURS.env_default
    workflow_settings: Mapping[str, str] = field(default_factory=dict)
    alert_topic_arn: str | None = None
    batch_concurrency: int = BATCH_CONCURRENCY.default
    workflow_seconds: int = settings_table.WORKER_WORKFLOW_SECONDS.default
    # The completed listing's keys follow it (table_layout.listing_keys).
    received_log_shards: int = settings_table.RECEIVED_LOG_SHARDS.default

    @property
    def message_seconds(self) -> float:
        """How much time must be left in the invocation to start a message."""
        return message_seconds(
            mcp_timeout_seconds=self.mcp_timeout_seconds, workflow_seconds=self.workflow_seconds
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read exactly the worker's variables.

        The work queue's redrive ``maxReceiveCount`` must exceed the receives that
        ``WORKER_MAX_ATTEMPTS``, ``WORKER_RETRY_HORIZON_SECONDS`` and
        ``WORKER_RETRY_BASE_SECONDS`` allow (infra derives it from the same values).

        Raises:
            SettingsError: a required variable is missing or a value is out of range.
        """
        return cls(
            table_name=required(env, env_names.ENV_TABLE_NAME),
            work_queue_url=required(env, env_names.ENV_WORK_QUEUE_URL),
            dead_letter_queue_url=required(env, env_names.ENV_DEAD_LETTER_QUEUE_URL),
            mcp_token_secret_arn=secret_arn(env, env_names.ENV_MCP_TOKEN_SECRET_ARN),
            mcp_allowed_hosts=host_list(env, env_names.ENV_MCP_ALLOWED_HOSTS),
            mcp_allow_insecure_loopback=boolean(env, env_names.ENV_MCP_ALLOW_INSECURE_LOOPBACK),
            mcp_timeout_seconds=MCP_TIMEOUT_SECONDS.read(env),
            workflow=optional(env, env_names.ENV_WORKFLOW) or settings_table.WORKFLOW.default,
            notify_url=optional(env, env_names.ENV_NOTIFY_URL),
            archive_bucket=optional(env, env_names.ENV_ARCHIVE_BUCKET),
            max_attempts=MAX_ATTEMPTS.read(env),
            lease_seconds=LEASE_SECONDS.read(env),
            secrets_max_age_seconds=SECRETS_MAX_AGE_SECONDS.read(env),
            retry_base_seconds=RETRY_BASE_SECONDS.read(env),
            retry_horizon_seconds=RETRY_HORIZON_SECONDS.read(env),
            workflow_settings=string_map(env, env_names.ENV_WORKFLOW_SETTINGS),
            alert_topic_arn=optional(env, env_names.ENV_ALERT_TOPIC_ARN),
            batch_concurrency=BATCH_CONCURRENCY.read(env),
            workflow_seconds=WORKFLOW_SECONDS.read(env),
            received_log_shards=RECEIVED_LOG_SHARDS.read(env),
        )
