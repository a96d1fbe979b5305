"""The notify endpoint kept in one Secrets Manager secret (``notify_secret_arn``).

The secret's value is a JSON object with ``url`` (the endpoint, for one whose URL
carries a credential), ``signing_secret`` (``whsec_...``: every POST is signed with the
Standard Webhooks headers, :mod:`functions.core.adapters.webhook_signing`), or both.
One secret, so that the URL and its key are granted, rotated and audited together; a
plain ``NOTIFY_URL`` still serves as the URL when the secret holds only a key.

It is read on the first notification or lookup
(:mod:`functions.workflows.adapters.endpoint_secrets`), and again once it is
``secrets_max_age_seconds`` old (a rotated key reaches warm containers): a failed read
or a malformed value sends nothing (``notify_secret_unavailable``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from functions.core import redaction
from functions.core.errors import NotApplied, TransientError
from functions.workflows.adapters.endpoint_secrets import BuiltOnFirstUse

if TYPE_CHECKING:
    from functions.core.adapters.notifier_http import HttpNotifier
    from functions.core.clock import Clock

URL_FIELD: Final = "url"
SIGNING_FIELD: Final = "signing_secret"
CODE_UNAVAILABLE: Final = "notify_secret_unavailable"


@dataclass(frozen=True, slots=True)
class NotifyEndpoint:
    """What the secret holds; ``repr`` shows neither value."""

    url: str | None = field(default=None, repr=False)
    signing_secret: str | None = field(default=None, repr=False)


def parse_endpoint(text: str, *, name: str) -> NotifyEndpoint:
    """The endpoint in a secret's value; each value is masked in logs from now on.

    Raises:
        ValueError: not a JSON object of ``url`` and/or ``signing_secret`` strings (the
            message names the setting and the fields, never a value).
    """
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"{name}: the secret is not a JSON object") from None
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{name}: the secret holds no {URL_FIELD} or {SIGNING_FIELD}")
    if unknown := sorted(str(key) for key in set(value) - {URL_FIELD, SIGNING_FIELD}):
        raise ValueError(f"{name}: the secret holds fields not known: {unknown}")
    return NotifyEndpoint(
        url=_text(value, URL_FIELD, name), signing_secret=_text(value, SIGNING_FIELD, name)
    )


def _text(value: Mapping[str, object], key: str, name: str) -> str | None:
    text = value.get(key)
    if text is None:
        return None
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{name}: the secret's {key} is not a non-empty string")
    redaction.remember_secret(text.strip())
    return text.strip()


class SecretBackedNotifier:
    """A ``Notifier`` whose HTTP notifier is built from the secret on its first use."""

    def __init__(
        self,
        build: Callable[[], HttpNotifier],
        *,
        max_age_seconds: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        """Args:
        build: reads the secret and returns the notifier; raises ValueError (naming the
            setting, never a value) when it cannot.
        max_age_seconds: how long a built notifier is used before the secret is read
            again (None, or no ``clock``: for the container's life).
        clock: what its age is read from.
        """
        self._notifier = BuiltOnFirstUse(
            build, unavailable=CODE_UNAVAILABLE, max_age_seconds=max_age_seconds, clock=clock
        )

    def notify(self, payload: Mapping[str, object], *, idempotency_key: str) -> None:
        """POST through the notifier, building it first if need be.

        Raises:
            NotApplied: ``notify_secret_unavailable`` (nothing was sent); or what the
                notifier raises.
        """
        self._notifier.get().notify(payload, idempotency_key=idempotency_key)

    def was_applied(self, idempotency_key: str) -> bool:
        """The notifier's lookup.

        Raises:
            TransientError: ``notify_secret_unavailable``: the lookup cannot be asked yet.
        """
        try:
            notifier = self._notifier.get()
        except NotApplied as exc:  # a lookup changes nothing: ask again next time
            raise TransientError(CODE_UNAVAILABLE) from exc
        return notifier.was_applied(idempotency_key)
