"""The receiver's settings, read once from its Lambda environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from functions.core import env_keys, setting_defaults, table_layout
from functions.core.settings_env import required, secret_arn
from functions.core.shared_settings import (
    INBOX_RETENTION_DAYS,
    RECEIVED_LOG_SHARDS,
    SECRETS_MAX_AGE_SECONDS,
)


@dataclass(frozen=True, slots=True)
class Settings:
    """What the receiver needs from its environment (secrets by ARN, never by value)."""

    table_name: str
    signing_secrets_arn: str
    secrets_max_age_seconds: int = setting_defaults.DEFAULT_SECRETS_MAX_AGE_SECONDS
    inbox_retention_days: int = setting_defaults.DEFAULT_INBOX_RETENTION_DAYS
    received_log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS

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
            table_name=required(env, env_keys.ENV_TABLE_NAME),
            signing_secrets_arn=secret_arn(env, env_keys.ENV_SIGNING_SECRETS_ARN),
            secrets_max_age_seconds=SECRETS_MAX_AGE_SECONDS.read(env),
            inbox_retention_days=INBOX_RETENTION_DAYS.read(env),
            received_log_shards=RECEIVED_LOG_SHARDS.read(env),
        )
