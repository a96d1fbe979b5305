"""The one settings reader: typed values from an environment, errors that name the variable."""

from __future__ import annotations

import pytest

from functions.core import env_names, settings_table
from functions.core.env_parsers import BoundedInteger, SettingsError, secret_arn
from functions.receiver.settings import Settings as ReceiverSettings

AGE = BoundedInteger("AGE", default=30, low=10, high=60)


def test_bounded_integer_defaults_when_unset_and_reads_within_range() -> None:
    assert AGE.read({}) == 30
    assert AGE.read({"AGE": " 10 "}) == 10


@pytest.mark.parametrize("text", ["9", "61", "ten"])
def test_bounded_integer_refuses_out_of_range_or_malformed(text: str) -> None:
    with pytest.raises(SettingsError, match="AGE"):
        AGE.read({"AGE": text})


def test_secret_arn_is_required_and_must_be_an_arn() -> None:
    assert secret_arn({"S": "arn:aws:secretsmanager:x"}, "S") == "arn:aws:secretsmanager:x"
    with pytest.raises(SettingsError, match="S is required"):
        secret_arn({}, "S")
    with pytest.raises(SettingsError, match="S must be a secret ARN"):
        secret_arn({"S": "whsec_not-a-reference"}, "S")


def test_receiver_settings_raise_the_one_settings_error() -> None:
    env = {env_names.ENV_TABLE_NAME: "t", env_names.ENV_SIGNING_SECRETS_ARN: "arn:aws:x"}
    assert (
        ReceiverSettings.from_env(env).inbox_retention_days
        == settings_table.INBOX_RETENTION_DAYS.default
    )
    with pytest.raises(SettingsError, match=env_names.ENV_INBOX_RETENTION_DAYS):
        ReceiverSettings.from_env({**env, env_names.ENV_INBOX_RETENTION_DAYS: "3"})
