"""Each Lambda's environment holds exactly the keys its settings read (STYLE principle 6)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

import pytest

from functions.core import env_names, settings_table
from tests.infra.conftest import Synthesized, resolved

# Powertools reads these itself, outside our settings.
POWERTOOLS_KEYS = {
    env_names.ENV_POWERTOOLS_SERVICE_NAME,
    env_names.ENV_POWERTOOLS_METRICS_NAMESPACE,
    env_names.ENV_POWERTOOLS_LOG_LEVEL,
    env_names.ENV_POWERTOOLS_TRACE_DISABLED,
}
# Read by a settings object but deliberately never set by the stack: its default (false)
# is the only production value; it exists for the local runtime and the tests.
NEVER_SET_IN_AWS = {env_names.ENV_MCP_ALLOW_INSECURE_LOOPBACK}


class RecordingEnv(Mapping[str, str]):
    """A read-only environment that remembers every key looked up, present or not."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        # Iterating would "read" everything and make the check meaningless.
        raise AssertionError("settings must look keys up by name, not iterate the environment")

    def __len__(self) -> int:
        return len(self._values)


@pytest.mark.parametrize("function", ["receiver", "relay", "worker", "reconciler"])
def test_environment_is_exactly_what_the_settings_read(
    synthesized: Synthesized, function: str
) -> None:
    environment = synthesized.environment(function)
    settings_module = importlib.import_module(f"functions.{function}.settings")
    env = RecordingEnv(resolved(environment))

    settings_module.Settings.from_env(env)

    provided = set(environment) - POWERTOOLS_KEYS
    assert provided - env.read == set(), "set by the stack but never read"
    assert env.read - provided - NEVER_SET_IN_AWS == set(), "read but not set by the stack"
    assert set(environment) >= POWERTOOLS_KEYS


@pytest.mark.parametrize("function", ["receiver", "relay", "worker", "reconciler"])
def test_the_settings_table_names_the_functions_that_read_each_variable(
    synthesized: Synthesized, function: str
) -> None:
    settings_module = importlib.import_module(f"functions.{function}.settings")
    env = RecordingEnv(resolved(synthesized.environment(function)))
    settings_module.Settings.from_env(env)
    table_variables = {s.env for s in settings_table.SETTINGS if s.env is not None}
    readers = {s.env for s in settings_table.SETTINGS if function in s.readers}
    assert env.read & table_variables == readers
