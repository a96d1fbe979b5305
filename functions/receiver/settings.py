"""The receiver's settings, read once from its Lambda environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from functions.core import names

# RelayLink retries for up to 3 days (docs/contract.md, Retries and timing): an inbox
# item that expired earlier would let a late retry be accepted a second time.
MIN_RETENTION_DAYS: Final = 4
MAX_SECRETS_AGE_SECONDS: Final = 3600


class SettingsError(ValueError):
    """The environment is incomplete or malformed; the message names the variable."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the receiver needs from its environment (secrets by ARN, never by value)."""

    table_name: str
    signing_secrets_arn: str
    secrets_max_age_seconds: int = names.DEFAULT_SECRETS_MAX_AGE_SECONDS
    inbox_retention_days: int = names.DEFAULT_INBOX_RETENTION_DAYS

    @property
    def retention_seconds(self) -> int:
        return self.inbox_retention_days * 24 * 3600

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read exactly the receiver's variables from ``env``.

        Raises:
            SettingsError: a required variable is missing or a value is out of range.
        """
        table_name = _required(env, names.ENV_TABLE_NAME)
        arn = _required(env, names.ENV_SIGNING_SECRETS_ARN)
        if not arn.startswith("arn:"):
            raise SettingsError(f"{names.ENV_SIGNING_SECRETS_ARN} must be a secret ARN")
        return cls(
            table_name=table_name,
            signing_secrets_arn=arn,
            secrets_max_age_seconds=_integer(
                env,
                names.ENV_SECRETS_MAX_AGE_SECONDS,
                default=names.DEFAULT_SECRETS_MAX_AGE_SECONDS,
                low=1,
                high=MAX_SECRETS_AGE_SECONDS,
            ),
            inbox_retention_days=_integer(
                env,
                names.ENV_INBOX_RETENTION_DAYS,
                default=names.DEFAULT_INBOX_RETENTION_DAYS,
                low=MIN_RETENTION_DAYS,
                high=3650,
            ),
        )


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise SettingsError(f"{name} is required and not set")
    return value


def _integer(env: Mapping[str, str], name: str, *, default: int, low: int, high: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"{name} must be an integer") from None
    if not low <= value <= high:
        raise SettingsError(f"{name} must be between {low} and {high}")
    return value
