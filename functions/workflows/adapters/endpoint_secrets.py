"""Our HTTP endpoints' secrets (the alert's, the notification's), read from Secrets
Manager on first use and read again once they are ``secrets_max_age_seconds`` old.

A workflow's factory touches no AWS, so an endpoint built from secrets is built on its
first POST: a failed read, or a value of the wrong form, means nothing was sent, so the
POST is :class:`~functions.core.errors.NotApplied` (the caller's code) and the delivery
is retried until the secret is readable and right. A successful build is kept for the
secrets' maximum age, as the MCP token and the signing secrets are: a rotated key or URL
reaches warm containers within it, instead of an endpoint that has dropped the old key
refusing every POST until the container is replaced. A build that fails once the old
one has aged is the same ``NotApplied`` (the old value is not used past its age). Each
value is remembered by the log redaction as soon as it is read, so no log line can
show it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import redaction
from functions.core.errors import NotApplied

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager.client import SecretsManagerClient

    from functions.core.clock import Clock

MAX_VALUE_CHARS: Final = 4096
T = TypeVar("T")


def secret_text(client: SecretsManagerClient, secret_arn: str, *, name: str) -> str:
    """The secret's string value, stripped.

    Args:
        client: a Secrets Manager client.
        secret_arn: the secret.
        name: the setting that names it, for the error message.

    Raises:
        ValueError: the secret cannot be read or holds no usable text (the message
            names the setting, never the value).
    """
    try:
        value = client.get_secret_value(SecretId=secret_arn).get("SecretString")
    except (ClientError, BotoCoreError) as exc:
        raise ValueError(f"{name}: the secret cannot be read ({type(exc).__name__})") from None
    text = value.strip() if isinstance(value, str) else ""
    if text:
        redaction.remember_secret(text)
    if not 0 < len(text) <= MAX_VALUE_CHARS:
        raise ValueError(f"{name}: the secret holds no text of at most {MAX_VALUE_CHARS} chars")
    return text


class BuiltOnFirstUse(Generic[T]):
    """A value built from secrets on its first use, then kept until it is
    ``max_age_seconds`` old (thread-safe: a batch's messages post concurrently)."""

    def __init__(
        self,
        build: Callable[[], T],
        *,
        unavailable: str,
        max_age_seconds: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        """Args:
        build: reads the secrets and returns the value; raises ValueError (naming the
            setting, never the value) when it cannot.
        unavailable: the code of the ``NotApplied`` a failed build raises.
        max_age_seconds: how long a built value is used before it is built again
            (None, or no ``clock``: for the container's life).
        clock: what the value's age is read from.
        """
        self._build = build
        self._unavailable = unavailable
        self._max_age = max_age_seconds
        self._clock = clock
        self._value: T | None = None
        self._built_at = 0
        self._lock = threading.Lock()

    def get(self) -> T:
        """The value, built first if need be (never built, or aged).

        Raises:
            NotApplied: the secrets could not be read or are malformed (nothing was sent).
        """
        with self._lock:
            now = self._clock.now() if self._clock is not None else 0
            if self._value is None or self._aged(now):
                try:
                    self._value = self._build()
                except ValueError as exc:  # an aged value stays aged: never used again
                    raise NotApplied(self._unavailable) from exc
                self._built_at = now
            return self._value

    def _aged(self, now: int) -> bool:
        return self._max_age is not None and now - self._built_at >= self._max_age
