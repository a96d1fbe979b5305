"""The reconciler's settings, read once from its Lambda environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from functions.core import env_keys, setting_defaults
from functions.core.settings_env import BoundedInteger, SettingsError, required
from functions.core.shared_settings import (
    INBOX_RETENTION_DAYS,
    LEASE_SECONDS,
    RECEIVED_LOG_SHARDS,
)

_DAY = 24 * 3600

PENDING_AGE_SECONDS: Final = BoundedInteger(
    env_keys.ENV_RECONCILE_PENDING_AGE_SECONDS,
    default=setting_defaults.DEFAULT_RECONCILE_PENDING_AGE_SECONDS,
    low=60,
    high=_DAY,
)
EFFECT_AGE_SECONDS: Final = BoundedInteger(
    env_keys.ENV_RECONCILE_EFFECT_AGE_SECONDS,
    default=setting_defaults.DEFAULT_RECONCILE_EFFECT_AGE_SECONDS,
    low=60,
    high=7 * _DAY,
)


@dataclass(frozen=True, slots=True)
class Settings:
    table_name: str
    work_queue_url: str
    lease_seconds: int
    pending_age_seconds: int
    effect_age_seconds: int
    received_log_shards: int
    inbox_retention_days: int = setting_defaults.DEFAULT_INBOX_RETENTION_DAYS

    @property
    def retention_seconds(self) -> int:
        return self.inbox_retention_days * _DAY

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read exactly the reconciler's variables.

        Raises:
            SettingsError: a variable is missing, out of range, or the effect age does
                not exceed the worker's lease (a live worker may hold an intent that long).
        """
        settings = cls(
            table_name=required(env, env_keys.ENV_TABLE_NAME),
            work_queue_url=required(env, env_keys.ENV_WORK_QUEUE_URL),
            lease_seconds=LEASE_SECONDS.read(env),
            pending_age_seconds=PENDING_AGE_SECONDS.read(env),
            effect_age_seconds=EFFECT_AGE_SECONDS.read(env),
            received_log_shards=RECEIVED_LOG_SHARDS.read(env),
            inbox_retention_days=INBOX_RETENTION_DAYS.read(env),
        )
        if settings.effect_age_seconds <= settings.lease_seconds:
            raise SettingsError(
                f"{env_keys.ENV_RECONCILE_EFFECT_AGE_SECONDS} must exceed "
                f"{env_keys.ENV_LEASE_SECONDS}"
            )
        return settings
