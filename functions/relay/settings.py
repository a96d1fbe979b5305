"""The relay's settings, read once from its Lambda environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from functions.core import env_names
from functions.core.env_parsers import required


@dataclass(frozen=True, slots=True)
class Settings:
    work_queue_url: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read exactly the relay's variables.

        Raises:
            SettingsError: a required variable is missing.
        """
        return cls(work_queue_url=required(env, env_names.ENV_WORK_QUEUE_URL))
