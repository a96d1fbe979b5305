"""The agent's alert POSTed to the configured ``alert_url`` (an ``AlertChannel``).

The JSON of :meth:`~functions.workflows.agent.Alert.payload` with ``Idempotency-Key:
<delivery_id>:alert`` and, with a signer, the Standard Webhooks signature headers
(:mod:`functions.workflows.adapters.alert_signing`). Only the configured URL is ever
contacted (HTTPS, or plain HTTP to loopback when the local runtime allows it), with no
proxy and no redirects.
What a POST can end in:

* a 2xx answer: sent;
* any other answer (a refused redirect, 4xx, 5xx): the endpoint answered without
  taking the alert -> :class:`~functions.core.errors.NotApplied` (``alert_rejected``).
  An endpoint that did act before failing sees the retry's same idempotency key;
* the connection refused, or the host not found: nothing was sent -> ``NotApplied``
  (``alert_unavailable``);
* a timeout, or the connection lost, once the request may have gone out: the outcome
  is unknown -> :class:`~functions.core.errors.TransientError` (``alert_unconfirmed``);
  the next attempt reports the effect in doubt instead of posting again.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

from functions.core.adapters.notifier_http import IDEMPOTENCY_HEADER, check_target, direct_opener
from functions.core.errors import NotApplied, TransientError

if TYPE_CHECKING:
    from functions.workflows.adapters.alert_signing import AlertSigner
    from functions.workflows.agent import Alert

# Failures to open a connection at all: the request cannot have been sent.
_NEVER_SENT = (ConnectionRefusedError, socket.gaierror)


class HttpAlerts:
    """POSTs alerts to one configured URL."""

    def __init__(
        self,
        *,
        url: str,
        timeout_seconds: float,
        allow_insecure_loopback: bool = False,
        signer: AlertSigner | None = None,
    ) -> None:
        check_target(url, allow_insecure_loopback=allow_insecure_loopback)
        self._url = url
        self._timeout = timeout_seconds
        self._opener = direct_opener()
        self._signer = signer

    def send(self, alert: Alert, *, idempotency_key: str) -> None:
        body = json.dumps(alert.payload(), separators=(",", ":"), sort_keys=True).encode()
        headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: idempotency_key}
        if self._signer is not None:
            headers |= self._signer.headers(idempotency_key, body)
        request = urllib.request.Request(  # noqa: S310 (scheme checked in check_target)
            self._url, data=body, method="POST", headers=headers
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                response.read()
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            exc.close()
            status = int(exc.code)
        except urllib.error.URLError as exc:
            # urllib wraps what fails while connecting and sending; only a connection
            # that never opened is certain to have sent nothing.
            if isinstance(exc.reason, _NEVER_SENT):
                raise NotApplied("alert_unavailable") from exc
            raise TransientError("alert_unconfirmed") from exc
        except (OSError, http.client.HTTPException) as exc:
            # A timeout, a reset or a garbled answer while waiting for the response.
            raise TransientError("alert_unconfirmed") from exc
        if not 200 <= status < 300:
            raise NotApplied("alert_rejected")
