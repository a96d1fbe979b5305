"""Signing secrets from Secrets Manager, cached per container with a bounded age.

The secret is a JSON list of ``whsec_`` strings (newest last is a convention, not a
rule): rotation adds a secret, waits until RelayLink signs with it, then removes
the old one. Powertools Parameters does the fetching and the age-bounded caching;
this module validates the list and keeps the decoded keys for as long as the
fetched value is unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.exceptions import (
    GetParameterError,
    TransformParameterError,
)

from functions.core.errors import SigningSecretsUnavailable
from functions.core.signature import SigningSecret

# A rotation needs two; a handful more is a mistake, and each costs one HMAC per request.
MAX_SECRETS: Final = 5


class SecretsManagerSigningSecrets:
    """:class:`functions.core.accept.SigningSecretSource` backed by one secret ARN."""

    def __init__(self, *, secret_arn: str, max_age_seconds: int, client: Any) -> None:
        """Args:
        secret_arn: the secret holding the JSON list.
        max_age_seconds: how long a fetched value is reused before fetching again.
        client: a boto3 Secrets Manager client (Powertools would otherwise make one).
        """
        self._arn = secret_arn
        self._max_age = max_age_seconds
        # Our own provider, not the module-level get_secret(): the same fetch and cache,
        # but with the client we configured, and a cache owned by this object.
        self._provider = SecretsProvider(boto3_client=client)
        self._lock = threading.Lock()
        self._raw: object = None
        self._parsed: tuple[SigningSecret, ...] = ()

    def current(self) -> Sequence[SigningSecret]:
        """The decoded secrets; fetched at most once per ``max_age_seconds``.

        Raises:
            SigningSecretsUnavailable: fetching failed, or the value is not a
                non-empty JSON list of at most ``MAX_SECRETS`` ``whsec_`` strings.
        """
        try:
            raw = self._provider.get(self._arn, max_age=self._max_age, transform="json")
        except (GetParameterError, TransformParameterError) as exc:
            raise SigningSecretsUnavailable() from exc
        with self._lock:
            if raw is not self._raw:
                self._parsed = _parse(raw)
                self._raw = raw
            return self._parsed


def _parse(raw: object) -> tuple[SigningSecret, ...]:
    """Decode the list; the error never carries the value."""
    malformed = SigningSecretsUnavailable("signing_secrets_malformed")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_SECRETS:
        raise malformed
    if not all(isinstance(text, str) for text in raw):
        raise malformed
    try:
        return tuple(SigningSecret.parse(text) for text in raw)
    except ValueError:
        raise malformed from None
