"""The alert endpoint's secrets, read from Secrets Manager once per container.

A chat-style webhook URL carries its credential in its path, so it is kept in a
secret (``alert_url_secret_arn``) rather than in the template and the worker's
environment; the signing secret (``alert_signing_secret_arn``) is a secret anyway. The
worker's role may read exactly these secrets. Each value is remembered by the log
redaction as soon as it is read, so no log line can show it.

They are read on the first alert, not at cold start (a workflow's factory touches no
AWS): a failed read, or a value of the wrong form, means nothing was sent, so the
alert is :class:`~functions.core.errors.NotApplied` (``alert_secret_unavailable``) and
the delivery is retried, until the secret is readable and right. A successful read is
kept for the container's life; a changed secret reaches new containers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import redaction
from functions.core.effects import EffectMode
from functions.core.errors import NotApplied

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager.client import SecretsManagerClient

    from functions.workflows.adapters.alert_http import HttpAlerts
    from functions.workflows.agent import Alert

MAX_VALUE_CHARS: Final = 4096


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


class SecretBackedAlerts:
    """An ``AlertChannel`` whose HTTP channel is built from secrets on its first alert."""

    def __init__(self, build: Callable[[], HttpAlerts], *, mode: EffectMode) -> None:
        """Args:
        build: reads the secrets and returns the channel; raises ValueError (naming
            the setting, never the value) when it cannot.
        mode: how an unknown outcome is settled: the built channel's mode, known
            before the secrets are read.
        """
        self._build = build
        self.mode = mode
        self._channel: HttpAlerts | None = None
        self._lock = threading.Lock()  # a batch's messages alert concurrently

    def send(self, alert: Alert, *, idempotency_key: str) -> None:
        """Send over the channel, building it first if need be.

        Raises:
            NotApplied: ``alert_secret_unavailable``: the secrets could not be read or
                are malformed (nothing was sent); or what the channel raises.
        """
        with self._lock:
            if self._channel is None:
                try:
                    self._channel = self._build()
                except ValueError as exc:
                    raise NotApplied("alert_secret_unavailable") from exc
            channel = self._channel
        channel.send(alert, idempotency_key=idempotency_key)
