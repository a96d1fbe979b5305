"""The signing-secrets adapter against moto: what is cached, for how long, and errors."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from functions.core.adapters.signing_secrets import SecretsManagerSigningSecrets
from functions.core.errors import SigningSecretsUnavailable
from local.testkit import builders
from local.testkit.aws_calls import AwsCalls
from local.testkit.clock import FakeClock

MAX_AGE = 60


def _source(value: str, clock: FakeClock) -> tuple[Any, str, AwsCalls, Any]:
    operator = boto3.client("secretsmanager", region_name="us-east-1")
    arn = operator.create_secret(Name="relaylink-signing-unit", SecretString=value)["ARN"]
    client = boto3.client("secretsmanager", region_name="us-east-1")
    calls = AwsCalls()
    calls.watch(client)
    source = SecretsManagerSigningSecrets(
        secret_arn=arn, max_age_seconds=MAX_AGE, client=client, clock=clock
    )
    return source, arn, calls, operator


def test_value_is_fetched_once_per_max_age(moto_aws: None) -> None:
    clock = FakeClock(1_000)
    source, arn, calls, operator = _source(f'["{builders.SECRET}"]', clock)

    first = source.current()
    operator.put_secret_value(SecretId=arn, SecretString=f'["{builders.OTHER_SECRET}"]')
    clock.value += MAX_AGE - 1
    assert source.current() is first  # decoded once, reused while the value is unchanged
    assert calls.count("secretsmanager") == 1

    clock.value += 1
    assert source.current() != first
    assert calls.count("secretsmanager") == 2


def test_value_that_is_not_json_is_fetched_again(moto_aws: None) -> None:
    source, arn, calls, operator = _source("not json", FakeClock(1_000))

    with pytest.raises(SigningSecretsUnavailable) as raised:
        source.current()
    assert raised.value.code == "signing_secrets_unavailable"
    operator.put_secret_value(SecretId=arn, SecretString=f'["{builders.SECRET}"]')
    assert len(source.current()) == 1  # no wait for the max age: nothing was cached
    assert calls.count("secretsmanager") == 2


@pytest.mark.parametrize("value", ["null", "[]", '{"a": 1}'])
def test_json_that_is_not_a_secret_list_is_malformed_and_cached(moto_aws: None, value: str) -> None:
    source, _arn, calls, _operator = _source(value, FakeClock(1_000))

    for _ in range(2):
        with pytest.raises(SigningSecretsUnavailable) as raised:
            source.current()
        assert raised.value.code == "signing_secrets_malformed"
    assert calls.count("secretsmanager") == 1
