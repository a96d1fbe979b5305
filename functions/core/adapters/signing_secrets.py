"""Signing secrets from Secrets Manager, cached per container with a bounded age.

The secret is a JSON list of ``whsec_`` strings (newest last is a convention, not a
rule): rotation adds a secret, waits until RelayLink signs with it, then removes
the old one. A fetched value is reused for ``max_age_seconds``, then fetched again;
the decoded keys are kept for as long as the fetched value is unchanged.

One ``GetSecretValue`` call and a timestamp: this module does the fetching and
caching itself rather than through Powertools Parameters, whose import brings in
boto3 and every Parameters provider (about 35 ms of the receiver's cold start,
docs/benchmarks.md). The behaviour is the same: a failed fetch or a value that is
not JSON is not cached (the next request fetches again), a JSON value is cached
whether or not it is a valid list.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from functions.core import redaction
from functions.core.clock import Clock, SystemClock
from functions.core.errors import SigningSecretsUnavailable
from functions.core.signature import SECRET_PREFIX, SigningSecret

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager.client import SecretsManagerClient

# A rotation needs two; a handful more is a mistake, and each costs one HMAC per request.
MAX_SECRETS: Final = 5
_NOTHING: Final = object()  # no value (JSON null is a value, and a malformed one)


class SecretsManagerSigningSecrets:
    """:class:`functions.core.ports.secrets.SigningSecretSource` backed by one secret ARN."""

    def __init__(
        self,
        *,
        secret_arn: str,
        max_age_seconds: int,
        client: SecretsManagerClient,
        clock: Clock | None = None,
    ) -> None:
        """Args:
        secret_arn: the secret holding the JSON list.
        max_age_seconds: how long a fetched value is reused before fetching again.
        client: a boto3 (or botocore) Secrets Manager client.
        clock: what the value's age is measured with (the handler passes its own).
        """
        self._arn = secret_arn
        self._max_age = max_age_seconds
        self._client = client
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        # The decoded value and the clock's time it was fetched at; None: nothing yet.
        self._fetched: tuple[object, int] | None = None
        self._raw: object = _NOTHING  # the value self._parsed was decoded from
        self._parsed: tuple[SigningSecret, ...] = ()

    def current(self) -> Sequence[SigningSecret]:
        """The decoded secrets; fetched at most once per ``max_age_seconds``.

        Raises:
            SigningSecretsUnavailable: fetching failed, or the value is not a
                non-empty JSON list of at most ``MAX_SECRETS`` ``whsec_`` strings.
        """
        raw = self._cached()
        if raw is _NOTHING:
            raw = self._fetch()
        with self._lock:
            if raw is not self._raw:
                self._parsed = _parse(raw)
                self._raw = raw
            return self._parsed

    def _cached(self) -> object:
        """The cached value while it is younger than the max age, else ``_NOTHING``."""
        with self._lock:
            fetched = self._fetched
        if fetched is not None and self._clock.now() - fetched[1] < self._max_age:
            return fetched[0]
        return _NOTHING

    def _fetch(self) -> object:
        """Fetch and JSON-decode the value, and cache it (outside the lock: a fetch
        must not hold up requests that could still use the cached value)."""
        try:
            answer = self._client.get_secret_value(SecretId=self._arn)
            text = answer["SecretString"] if "SecretString" in answer else answer["SecretBinary"]
        except Exception as exc:  # any failure to fetch means: unavailable, retry later
            raise SigningSecretsUnavailable() from exc
        _remember(text)
        try:
            value: object = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise SigningSecretsUnavailable() from exc
        if isinstance(value, list):
            for item in value:
                _remember(item)
        with self._lock:
            self._fetched = (value, self._clock.now())
        return value


def _remember(value: object) -> None:
    """A fetched value is a secret, whatever its shape: masked in any log line, and so
    is a secret's key part without its prefix."""
    if isinstance(value, str):
        redaction.remember_secret(value)
        redaction.remember_secret(value.removeprefix(SECRET_PREFIX))


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
