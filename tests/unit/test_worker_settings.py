from __future__ import annotations

import pytest

from functions.core import env_names, settings_table
from functions.core.env_parsers import SettingsError
from functions.core.event_source_limits import WORKER_BATCH_SIZE
from functions.core.retry_policy import MAX_RETRY_HORIZON_SECONDS, RETRY_BASE_SECONDS
from functions.worker.settings import Settings

BASE_ENV = {
    env_names.ENV_TABLE_NAME: "t",
    env_names.ENV_WORK_QUEUE_URL: "https://sqs/q",
    env_names.ENV_DEAD_LETTER_QUEUE_URL: "https://sqs/dlq",
    env_names.ENV_MCP_TOKEN_SECRET_ARN: "arn:aws:secretsmanager:us-east-1:1:secret:t",
    env_names.ENV_MCP_ALLOWED_HOSTS: "*.relaylink.example",
}


def test_retry_base_defaults_to_the_production_back_off() -> None:
    assert Settings.from_env(BASE_ENV).retry_base_seconds == RETRY_BASE_SECONDS


def test_retry_base_is_read_and_bounded() -> None:
    env = {**BASE_ENV, env_names.ENV_RETRY_BASE_SECONDS: "1"}
    assert Settings.from_env(env).retry_base_seconds == 1
    with pytest.raises(SettingsError, match=env_names.ENV_RETRY_BASE_SECONDS):
        Settings.from_env({**BASE_ENV, env_names.ENV_RETRY_BASE_SECONDS: "0"})


def test_retry_horizon_defaults_to_a_day_and_is_bounded_by_relaylinks_own() -> None:
    settings = Settings.from_env(BASE_ENV)
    assert settings.retry_horizon_seconds == settings_table.WORKER_RETRY_HORIZON_HOURS.env_default
    assert settings.retry_horizon_seconds == 24 * 3600
    env = {**BASE_ENV, env_names.ENV_RETRY_HORIZON_SECONDS: str(MAX_RETRY_HORIZON_SECONDS)}
    assert Settings.from_env(env).retry_horizon_seconds == 3 * 24 * 3600
    too_long = {**BASE_ENV, env_names.ENV_RETRY_HORIZON_SECONDS: str(3 * 24 * 3600 + 1)}
    with pytest.raises(SettingsError, match=env_names.ENV_RETRY_HORIZON_SECONDS):
        Settings.from_env(too_long)


def test_batch_concurrency_defaults_to_the_whole_batch_and_is_bounded_by_it() -> None:
    assert Settings.from_env(BASE_ENV).batch_concurrency == WORKER_BATCH_SIZE
    assert (
        Settings.from_env({**BASE_ENV, env_names.ENV_BATCH_CONCURRENCY: "3"}).batch_concurrency == 3
    )
    for bad in ("0", str(WORKER_BATCH_SIZE + 1)):
        with pytest.raises(SettingsError, match=env_names.ENV_BATCH_CONCURRENCY):
            Settings.from_env({**BASE_ENV, env_names.ENV_BATCH_CONCURRENCY: bad})


def test_a_message_needs_the_longest_fetch_plus_the_workflow_allowance() -> None:
    settings = Settings.from_env(
        {
            **BASE_ENV,
            env_names.ENV_MCP_TIMEOUT_SECONDS: "10",
            env_names.ENV_WORKFLOW_SECONDS: "60",
        }
    )
    # connect 5 s, read 10 s: opening (two round trips) 30 s, the call 15 s.
    assert settings.message_seconds == 30 + 15 + 60


def test_workflow_settings_are_a_json_object_of_strings() -> None:
    assert Settings.from_env(BASE_ENV).workflow_settings == {}
    env = {**BASE_ENV, env_names.ENV_WORKFLOW_SETTINGS: '{"model_id": "m", "max_tokens": "64"}'}
    assert Settings.from_env(env).workflow_settings == {"model_id": "m", "max_tokens": "64"}
    for bad in ('{"max_tokens": 64}', "[]", "{not json"):
        with pytest.raises(SettingsError, match=env_names.ENV_WORKFLOW_SETTINGS):
            Settings.from_env({**BASE_ENV, env_names.ENV_WORKFLOW_SETTINGS: bad})


def test_alert_topic_is_optional() -> None:
    assert Settings.from_env(BASE_ENV).alert_topic_arn is None
    topic = "arn:aws:sns:us-east-1:123456789012:alerts"
    env = {**BASE_ENV, env_names.ENV_ALERT_TOPIC_ARN: topic}
    assert Settings.from_env(env).alert_topic_arn == topic
