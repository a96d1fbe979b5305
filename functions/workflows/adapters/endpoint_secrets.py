"""Our HTTP endpoints' secrets (the alert's, the notification's), read from Secrets
Manager on first use and kept for the container's life.

A workflow's factory touches no AWS, so an endpoint built from secrets is built on its
first POST: a failed read, or a value of the wrong form, means nothing was sent, so the
POST is :class:`~functions.core.errors.NotApplied` (the caller's code) and the delivery
is retried until the secret is readable and right. A successful build is kept for the
container's life; a changed secret reaches new containers. Each value is remembered by
the log redaction as soon as it is read, so no log line can show it.
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
    """A value built from secrets on its first use, then kept (thread-safe: a batch's
    messages post concurrently)."""

    def __init__(self, build: Callable[[], T], *, unavailable: str) -> None:
        """Args:
        build: reads the secrets and returns the value; raises ValueError (naming the
            setting, never the value) when it cannot.
        unavailable: the code of the ``NotApplied`` a failed build raises.
        """
        self._build = build
        self._unavailable = unavailable
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        """The value, built first if need be.

        Raises:
            NotApplied: the secrets could not be read or are malformed (nothing was sent).
        """
        with self._lock:
            if self._value is None:
                try:
                    self._value = self._build()
                except ValueError as exc:
                    raise NotApplied(self._unavailable) from exc
            return self._value
