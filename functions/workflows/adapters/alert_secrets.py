"""The alert endpoint's secrets, read from Secrets Manager on the first alert and again
once they are ``secrets_max_age_seconds`` old.

A chat-style webhook URL carries its credential in its path, so it is kept in a
secret (``alert_url_secret_arn``) rather than in the template and the worker's
environment; the signing secret (``alert_signing_secret_arn``) is a secret anyway. The
worker's role may read exactly these secrets. They are read on the first alert
(:mod:`functions.workflows.adapters.endpoint_secrets`): until they are readable and
right, an alert is :class:`~functions.core.errors.NotApplied`
(``alert_secret_unavailable``) and the delivery is retried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from functions.core.effects import EffectMode
from functions.workflows.adapters.endpoint_secrets import BuiltOnFirstUse

if TYPE_CHECKING:
    from functions.core.clock import Clock
    from functions.workflows.adapters.alert_http import HttpAlerts
    from functions.workflows.agent import Alert


class SecretBackedAlerts:
    """An ``AlertChannel`` whose HTTP channel is built from secrets on its first alert."""

    def __init__(
        self,
        build: Callable[[], HttpAlerts],
        *,
        mode: EffectMode,
        max_age_seconds: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        """Args:
        build: reads the secrets and returns the channel; raises ValueError (naming
            the setting, never the value) when it cannot.
        mode: how an unknown outcome is settled: the built channel's mode, known
            before the secrets are read.
        max_age_seconds: how long a built channel is used before the secrets are read
            again (None, or no ``clock``: for the container's life).
        clock: what its age is read from.
        """
        self._channel = BuiltOnFirstUse(
            build,
            unavailable="alert_secret_unavailable",
            max_age_seconds=max_age_seconds,
            clock=clock,
        )
        self.mode = mode

    def send(self, alert: Alert, *, idempotency_key: str) -> None:
        """Send over the channel, building it first if need be.

        Raises:
            NotApplied: ``alert_secret_unavailable``: the secrets could not be read or
                are malformed (nothing was sent); or what the channel raises.
        """
        self._channel.get().send(alert, idempotency_key=idempotency_key)
