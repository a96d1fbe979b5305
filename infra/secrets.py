"""The two secrets: RelayLink's signing secrets (receiver) and its API token (worker).

Either the deployer names existing secrets by ARN (context ``signing_secrets_arn`` /
``mcp_token_secret_arn``, with ``*_kms_key_arn`` when a customer managed key encrypts
one), or the stack creates them with placeholders that fail
closed: the receiver refuses an empty signing-secret list (every delivery gets 503
``signing_secrets_malformed``, which RelayLink retries for three days, and the API 5xx
alarm fires), and the MCP server refuses a random token (counted and alarmed as an
MCP auth failure). docs/deploy.md says how to set the real values.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy, SecretValue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from functions.core import metric_names
from infra.config import StackConfig
from infra.nag import acknowledge

_SIGNING_NO_ROTATION = (
    "The value is issued by RelayLink and only RelayLink can issue a new one, so no "
    "rotation Lambda can produce it; rotation is the documented manual procedure "
    "(docs/deploy.md), made safe by the receiver accepting any secret of a list."
)
_MCP_NO_ROTATION = (
    "The token is issued by RelayLink and only RelayLink can issue a new one, so no "
    "rotation Lambda can produce it; rotation is the documented manual procedure "
    "(docs/deploy.md): put the new token, then revoke the old one in RelayLink."
)


@dataclass(frozen=True, slots=True)
class ReadableSecret:
    """A secret and, when a customer managed key encrypts it, that key's ARN.

    Attributes:
        secret: The secret (created by the stack, or the deployer's own).
        key_arn: Its customer managed KMS key, or None for the AWS managed key.
    """

    secret: secretsmanager.ISecret
    key_arn: str | None = None

    @property
    def secret_arn(self) -> str:
        return self.secret.secret_arn

    def grant_read(self, grantee: iam.IGrantable) -> None:
        """Allow reading the secret and, if it has a customer managed key, decrypting
        with that key only on Secrets Manager's behalf (``kms:ViaService``)."""
        self.secret.grant_read(grantee)
        if self.key_arn is None:
            return
        # The role's own policy: an imported key's policy cannot be changed here, and
        # CDK's grant through an imported key is dropped without a word. The key's
        # region is the secret's (StackConfig checks it).
        region = self.key_arn.split(":")[3]
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["kms:Decrypt"],
            resource_arns=[self.key_arn],
            conditions={
                "StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}
            },
        )


class Secrets(Construct):
    """Signing secrets (a JSON list of ``whsec_`` strings) and the MCP bearer token.

    Attributes:
        signing_secrets: Read by the receiver.
        mcp_token: Read by the worker.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        super().__init__(scope, construct_id)
        if config.signing_secrets_arn is not None:
            self.signing_secrets = ReadableSecret(
                secretsmanager.Secret.from_secret_complete_arn(
                    self, "SigningSecrets", config.signing_secrets_arn
                ),
                key_arn=config.signing_secrets_kms_key_arn,
            )
        else:
            created = secretsmanager.Secret(
                self,
                "SigningSecrets",
                description=f"{metric_names.SERVICE}: RelayLink signing secrets, a JSON list of "
                "whsec_ strings",
                # Not a secret: the empty list, which the receiver refuses (fails closed).
                secret_string_value=SecretValue.unsafe_plain_text("[]"),
                removal_policy=RemovalPolicy.RETAIN,
            )
            acknowledge(created, "AwsSolutions-SMG4", _SIGNING_NO_ROTATION)
            self.signing_secrets = ReadableSecret(created)
        if config.mcp_token_secret_arn is not None:
            self.mcp_token = ReadableSecret(
                secretsmanager.Secret.from_secret_complete_arn(
                    self, "McpToken", config.mcp_token_secret_arn
                ),
                key_arn=config.mcp_token_kms_key_arn,
            )
        else:
            token = secretsmanager.Secret(
                self,
                "McpToken",
                description=f"{metric_names.SERVICE}: RelayLink API token for the MCP server",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    exclude_punctuation=True, password_length=40
                ),
                removal_policy=RemovalPolicy.RETAIN,
            )
            acknowledge(token, "AwsSolutions-SMG4", _MCP_NO_ROTATION)
            self.mcp_token = ReadableSecret(token)
