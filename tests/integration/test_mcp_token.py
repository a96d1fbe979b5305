"""SecretsManagerMcpToken against moto's Secrets Manager."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from functions.core.adapters.mcp_token import SecretsManagerMcpToken
from functions.core.errors import McpTokenUnavailable
from local.testkit.moto_world import REGION


@pytest.fixture
def secrets(moto_aws: None) -> Any:
    return boto3.client("secretsmanager", region_name=REGION)


def _secret(secrets: Any, value: str) -> str:
    return str(secrets.create_secret(Name="relaylink/mcp-token", SecretString=value)["ARN"])


def test_mcp_token_reads_the_raw_string(secrets: Any) -> None:
    arn = _secret(secrets, "rl_live_abc123\n")  # a trailing newline from a file is dropped
    assert SecretsManagerMcpToken(secret_arn=arn, max_age_seconds=60, client=secrets)() == (
        "rl_live_abc123"
    )


def test_mcp_token_is_cached_for_max_age(secrets: Any) -> None:
    arn = _secret(secrets, "first-token")
    cached = SecretsManagerMcpToken(secret_arn=arn, max_age_seconds=300, client=secrets)
    uncached = SecretsManagerMcpToken(secret_arn=arn, max_age_seconds=0, client=secrets)
    assert cached() == "first-token"
    assert uncached() == "first-token"
    secrets.put_secret_value(SecretId=arn, SecretString="rotated-token")
    assert cached() == "first-token"
    assert uncached() == "rotated-token"


def test_mcp_token_missing_secret_is_unavailable(secrets: Any) -> None:
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:absent-AbCdEf"
    with pytest.raises(McpTokenUnavailable) as caught:
        SecretsManagerMcpToken(secret_arn=arn, max_age_seconds=60, client=secrets)()
    assert caught.value.code == "mcp_token_unavailable"


@pytest.mark.parametrize("value", ["   ", "two words", "tab\tinside", "ümlaut"])
def test_mcp_token_malformed_value_is_refused_without_echo(secrets: Any, value: str) -> None:
    arn = _secret(secrets, value)
    with pytest.raises(McpTokenUnavailable) as caught:
        SecretsManagerMcpToken(secret_arn=arn, max_age_seconds=60, client=secrets)()
    assert str(caught.value) == "mcp_token_malformed"  # the code alone, never the value
