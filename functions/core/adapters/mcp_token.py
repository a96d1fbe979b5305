"""The RelayLink API token for the MCP server, from Secrets Manager by ARN.

The secret's value is the raw token string. Powertools Parameters fetches it and
keeps it for ``max_age_seconds``, so a rotated token reaches warm containers
within that time without a fetch per batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.exceptions import (
    GetParameterError,
    TransformParameterError,
)

from functions.core import redaction
from functions.core.errors import McpTokenUnavailable

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager.client import SecretsManagerClient

# A bearer token is a visible-ASCII word (RFC 6750 b64token); longer is surely wrong.
MAX_TOKEN_LENGTH: Final = 4096


class SecretsManagerMcpToken:
    """A ``Callable[[], str]`` token source for :class:`McpPackageFetcher`."""

    def __init__(
        self, *, secret_arn: str, max_age_seconds: int, client: SecretsManagerClient | None = None
    ) -> None:
        """Args:
        secret_arn: the secret holding the token.
        max_age_seconds: how long a fetched value is reused before fetching again.
        client: a boto3 Secrets Manager client (Powertools makes one if None).
        """
        self._arn = secret_arn
        self._max_age = max_age_seconds
        self._provider = SecretsProvider(boto3_client=client)

    def __call__(self) -> str:
        """The current token.

        Raises:
            McpTokenUnavailable: fetching failed, or the value is not one
                visible-ASCII word (the error never carries the value).
        """
        try:
            raw = self._provider.get(self._arn, max_age=self._max_age)
        except (GetParameterError, TransformParameterError) as exc:
            raise McpTokenUnavailable() from exc
        # A trailing newline is the usual artefact of `aws secretsmanager ... file://token`.
        token = raw.strip() if isinstance(raw, str) else ""
        # Masked in any log line from now on: a token has no shape to recognise it by.
        redaction.remember_secret(token)
        if not is_valid_token(token):
            raise McpTokenUnavailable("mcp_token_malformed")
        return token


def is_valid_token(token: str) -> bool:
    """Whether ``token`` can go into an ``Authorization: Bearer`` header as it is."""
    return (
        0 < len(token) <= MAX_TOKEN_LENGTH
        and token.isascii()
        and all("!" <= ch <= "~" for ch in token)
    )
