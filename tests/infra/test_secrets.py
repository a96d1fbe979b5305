"""Existing secrets named by ARN are used as they are; none is created."""

from __future__ import annotations

import json

from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
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


def test_an_existing_secret_without_a_key_is_read_without_kms() -> None:
    stack = Stack(App(), "Secrets")
    config = StackConfig.from_context(
        {"mcp_allowed_hosts": ["a.example"], "signing_secrets_arn": SIGNING}
    )
    secrets = Secrets(stack, "Secrets", config=config)
    reader = iam.Role(stack, "Reader", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    secrets.signing_secrets.grant_read(reader)
    assert secrets.signing_secrets.key_arn is None
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    assert "kms:" not in json.dumps(policy)
    assert SIGNING in json.dumps(policy)
