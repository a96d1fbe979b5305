"""Deploy-time settings: parsed from CDK context, refusing what would misbehave."""

from __future__ import annotations

from typing import Any

import pytest

from functions.core import setting_defaults
from infra.config import ConfigError, StackConfig

VALID: dict[str, Any] = {"mcp_allowed_hosts": ["*.relaylink.example"]}
ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/signing-AbC123"


def test_defaults_come_from_the_shared_names() -> None:
    config = StackConfig.from_context(VALID)
    assert config.inbox_retention_days == setting_defaults.DEFAULT_INBOX_RETENTION_DAYS
    assert config.worker_max_attempts == setting_defaults.DEFAULT_MAX_ATTEMPTS
    assert config.workflow == setting_defaults.DEFAULT_WORKFLOW
    assert config.alarm_email is None and config.notify_url is None


def test_command_line_strings_are_parsed() -> None:
    config = StackConfig.from_context(
        {
            "mcp_allowed_hosts": "mcp.relaylink.example, *.backup.example",
            "worker_max_concurrency": "12",
            "log_level": "debug",
            "alarm_email": "ops@example.com",
            "signing_secrets_arn": ARN,
            "notify_url": "",
        }
    )
    assert config.mcp_allowed_hosts == ("mcp.relaylink.example", "*.backup.example")
    assert config.worker_max_concurrency == 12
    assert config.log_level == "DEBUG"
    assert config.signing_secrets_arn == ARN
    assert config.notify_url is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mcp_allowed_hosts", []),
        ("mcp_allowed_hosts", ["https://mcp.example"]),
        ("stage", "Prod"),
        ("worker_max_concurrency", 1),  # the SQS event source needs at least 2
        ("worker_max_attempts", 0),
        ("inbox_retention_days", 3),  # shorter than RelayLink's 3-day retry horizon + 1
        ("log_level", "LOUD"),
        ("log_retention_days", 10),
        ("alarm_email", "not-an-address"),
        ("signing_secrets_arn", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x"),
        ("notify_url", "http://hooks.example.com"),
        ("workflow", "no_attribute"),
        ("api_burst_limit", 10),  # below the default rate limit of 50
        ("worker_max_concurrency", True),
    ],
)
def test_bad_values_fail_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key):
        StackConfig.from_context(VALID | {key: value})
