"""The port of the endpoint signing secrets (Secrets Manager in production)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from functions.core.signature import SigningSecret


class SigningSecretSource(Protocol):
    """The endpoint secrets the receiver currently knows (more than one during rotation)."""

    def current(self) -> Sequence[SigningSecret]:
        """The known secrets.

        Raises:
            SigningSecretsUnavailable: they cannot be fetched or are malformed.
        """
        ...
