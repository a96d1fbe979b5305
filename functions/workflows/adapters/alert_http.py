"""The agent's alert POSTed to the configured ``alert_url`` (an ``AlertChannel``).

The JSON of :meth:`~functions.workflows.agent.Alert.payload` with ``Idempotency-Key:
<delivery_id>:alert`` and, with a signer, the Standard Webhooks signature headers
(:mod:`functions.core.adapters.webhook_signing`). Only the configured URL is ever
contacted (HTTPS, or plain HTTP to loopback when the local runtime allows it), with no
proxy and no redirects. One POST per call. What its answer proves
(:mod:`functions.core.adapters.http_effect`):

* 2xx: sent;
* the connection refused, or the host not found: nothing was sent ->
  :class:`~functions.core.errors.NotApplied` (``alert_unavailable``);
* 429 or 425: not processed -> ``NotApplied`` (``alert_throttled``); retried with back-off;
* any other 4xx: refused for good -> :class:`~functions.core.errors.Rejected`
  (``alert_rejected``): the delivery fails now, nothing left in doubt;
* 408, 409, any 5xx, a timeout or the connection lost once the request may have gone
  out: the endpoint may have taken the alert (a gateway's 502 or 504 often follows
  it) -> :class:`~functions.core.errors.TransientError` (``alert_unconfirmed``). The
  intent stays: with the default mode the next attempt reports the effect in doubt
  instead of posting again; declared keyed (:attr:`HttpAlerts.mode`, the setting
  ``alert_url_deduplicates``) it posts again with the same key;
* a redirect (never followed): the outcome is unknown and will not change ->
  :class:`~functions.core.errors.PermanentError` (``alert_redirected``).
"""

from __future__ import annotations

import urllib.request
from typing import TYPE_CHECKING, Final

from functions.core.adapters import http_effect
from functions.core.adapters.notifier_http import check_target, direct_opener, json_post
from functions.core.effects import EffectMode

if TYPE_CHECKING:
    from functions.core.adapters.webhook_signing import WebhookSigner
    from functions.workflows.agent import Alert

_EFFECT: Final = "alert"  # the prefix of every code this channel raises


class HttpAlerts:
    """POSTs alerts to one configured URL.

    Attributes:
        mode: The effect's outcome mode: ``keyed`` when the endpoint deduplicates on
            ``Idempotency-Key`` (``deduplicates=True``), else ``operator``.
    """

    def __init__(
        self,
        *,
        url: str,
        timeout_seconds: float,
        allow_insecure_loopback: bool = False,
        deduplicates: bool = False,
        signer: WebhookSigner | None = None,
    ) -> None:
        check_target(url, allow_insecure_loopback=allow_insecure_loopback)
        self._url = url
        self._timeout = timeout_seconds
        self._opener = direct_opener()
        self.mode = EffectMode.KEYED if deduplicates else EffectMode.OPERATOR
        self._signer = signer

    def send(self, alert: Alert, *, idempotency_key: str) -> None:
        request = self.request(alert, idempotency_key=idempotency_key)
        status = http_effect.send(self._opener, request, timeout=self._timeout, effect=_EFFECT)
        http_effect.settle(status, effect=_EFFECT)

    def request(self, alert: Alert, *, idempotency_key: str) -> urllib.request.Request:
        """The POST of ``alert``: its body and every header, built in one place."""
        return json_post(
            self._url, alert.payload(), idempotency_key=idempotency_key, signer=self._signer
        )
