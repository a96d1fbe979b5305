"""The receiver's settings, read once from its Lambda environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from functions.core import env_names, settings_table
from functions.core.env_parsers import required, secret_arn

INBOX_RETENTION_DAYS: Final = settings_table.INBOX_RETENTION_DAYS.env_integer()
SECRETS_MAX_AGE_SECONDS: Final = settings_table.SECRETS_MAX_AGE_SECONDS.env_integer()
RECEIVED_LOG_SHARDS: Final = settings_table.RECEIVED_LOG_SHARDS.env_integer()
TRACE_SAMPLE_PERCENT: Final = settings_table.TRACE_SAMPLE_PERCENT.env_integer()


@dataclass(frozen=True, slots=True)
class Settings:
    """What the receiver needs from its environment (secrets by ARN, never by value)."""

    table_name: str
    signing_secrets_arn: str
    secrets_max_age_seconds: int = settings_table.SECRETS_MAX_AGE_SECONDS.default
    inbox_retention_days: int = settings_table.INBOX_RETENTION_DAYS.default
    received_log_shards: int = settings_table.RECEIVED_LOG_SHARDS.default
    trace_sample_percent: int = settings_table.TRACE_SAMPLE_PERCENT.default

    @property
    def retention_seconds(self) -> int:
        return self.inbox_retention_days * 24 * 3600

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read exactly the receiver's variables from ``env``.

        Raises:
            SettingsError: a required variable is missing or a value is out of range.
        """
        return cls(
            table_name=required(env, env_names.ENV_TABLE_NAME),
            signing_secrets_arn=secret_arn(env, env_names.ENV_SIGNING_SECRETS_ARN),
            secrets_max_age_seconds=SECRETS_MAX_AGE_SECONDS.read(env),
            inbox_retention_days=INBOX_RETENTION_DAYS.read(env),
            received_log_shards=RECEIVED_LOG_SHARDS.read(env),
            trace_sample_percent=TRACE_SAMPLE_PERCENT.read(env),
        )
