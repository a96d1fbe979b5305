"""The reconciler's settings, read once from its Lambda environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from functions.core import env_names, settings_table
from functions.core.env_parsers import SettingsError, required

LEASE_SECONDS: Final = settings_table.WORKER_LEASE_SECONDS.env_integer()
RECEIVED_LOG_SHARDS: Final = settings_table.RECEIVED_LOG_SHARDS.env_integer()
PARALLELISM: Final = settings_table.RECONCILE_PARALLELISM.env_integer()
PENDING_AGE_SECONDS: Final = settings_table.RECONCILE_PENDING_AGE_SECONDS.env_integer()
EFFECT_AGE_SECONDS: Final = settings_table.RECONCILE_EFFECT_AGE_SECONDS.env_integer()
INBOX_RETENTION_DAYS: Final = settings_table.INBOX_RETENTION_DAYS.env_integer()
_DAY: Final = 24 * 3600


@dataclass(frozen=True, slots=True)
class Settings:
    table_name: str
    work_queue_url: str
    lease_seconds: int
    pending_age_seconds: int
    effect_age_seconds: int
    received_log_shards: int
    inbox_retention_days: int = settings_table.INBOX_RETENTION_DAYS.default
    parallelism: int = settings_table.RECONCILE_PARALLELISM.default

    @property
    def retention_seconds(self) -> int:
        return self.inbox_retention_days * _DAY

    @property
    def received_age_seconds(self) -> int:
        """How old a receipt gets before a run looks at it."""
        return settings_table.received_age_seconds(
            pending_age_seconds=self.pending_age_seconds, lease=self.lease_seconds
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read exactly the reconciler's variables.

        Raises:
            SettingsError: a variable is missing, out of range, or the effect age does
                not exceed the worker's lease (a live worker may hold an intent that long).
        """
        settings = cls(
            table_name=required(env, env_names.ENV_TABLE_NAME),
            work_queue_url=required(env, env_names.ENV_WORK_QUEUE_URL),
            lease_seconds=LEASE_SECONDS.read(env),
            pending_age_seconds=PENDING_AGE_SECONDS.read(env),
            effect_age_seconds=EFFECT_AGE_SECONDS.read(env),
            received_log_shards=RECEIVED_LOG_SHARDS.read(env),
            inbox_retention_days=INBOX_RETENTION_DAYS.read(env),
            parallelism=PARALLELISM.read(env),
        )
        if settings.effect_age_seconds <= settings.lease_seconds:
            raise SettingsError(
                f"{env_names.ENV_RECONCILE_EFFECT_AGE_SECONDS} must exceed "
                f"{env_names.ENV_LEASE_SECONDS}"
            )
        return settings
