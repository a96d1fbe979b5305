"""Existing secrets named by ARN are used as they are; none is created."""

from __future__ import annotations

from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.config import StackConfig
from infra.secrets import Secrets

SIGNING = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/signing-AbC123"
TOKEN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/token-XyZ789"


def test_existing_secret_arns_are_imported_not_created() -> None:
    stack = Stack(App(), "Secrets")
    config = StackConfig.from_context(
        {
            "mcp_allowed_hosts": ["*.relaylink.example"],
            "signing_secrets_arn": SIGNING,
            "mcp_token_secret_arn": TOKEN,
        }
    )
    secrets = Secrets(stack, "Secrets", config=config)
    Template.from_stack(stack).resource_count_is("AWS::SecretsManager::Secret", 0)
    assert secrets.signing_secrets.secret_arn == SIGNING
    assert secrets.mcp_token.secret_arn == TOKEN


def test_missing_arns_create_both_secrets() -> None:
    stack = Stack(App(), "Secrets")
    Secrets(stack, "Secrets", config=StackConfig.from_context({"mcp_allowed_hosts": ["a.example"]}))
    Template.from_stack(stack).resource_count_is("AWS::SecretsManager::Secret", 2)
