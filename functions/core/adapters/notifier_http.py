"""The notification effect over HTTP: POST with an idempotency key, GET to check it.

The target is the configured ``NOTIFY_URL`` (or the URL in ``notify_secret_arn``'s
secret) only, never a URL from a delivery or a package: HTTPS, or plain HTTP to a
loopback host when the local runtime allows it. Redirects and proxies are refused so
that a request cannot be sent elsewhere. With a signer, the POST carries the Standard
Webhooks signature headers (:mod:`functions.core.adapters.webhook_signing`), as the
agent's alert does; the lookup GET carries no body and no signature.

One POST per call. What its answer proves (:mod:`functions.core.adapters.http_effect`):

* 2xx: notified;
* the connection refused, or the host not found: nothing was sent ->
  :class:`~functions.core.errors.NotApplied` (``notify_unavailable``);
* 429 or 425: not processed -> ``NotApplied`` (``notify_throttled``);
* any other 4xx: refused for good -> :class:`~functions.core.errors.Rejected`
  (``notify_rejected``): the delivery fails now, and the effect is not left in doubt;
* 408, 409, any 5xx, a timeout, the connection lost after sending: unknown ->
  :class:`~functions.core.errors.TransientError` (``notify_unconfirmed``). The next
  attempt settles it with :meth:`HttpNotifier.was_applied` (the ``checked`` mode), or,
  when the endpoint deduplicates on the key, posts again with the same key (``keyed``);
* a redirect (never followed): unknown for good ->
  :class:`~functions.core.errors.PermanentError` (``notify_redirected``).

The lookup ``GET <NOTIFY_URL>/<key>``: 200 applied, 404 not applied, anything else
(or no answer) -> ``TransientError`` (``notify_unavailable``), asked again next time.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from functions.core.adapters import http_effect
from functions.core.errors import TransientError

if TYPE_CHECKING:
    from functions.core.adapters.webhook_signing import WebhookSigner

IDEMPOTENCY_HEADER = "Idempotency-Key"
_EFFECT: Final = "notify"  # the prefix of every code the notifier raises


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a redirect is an answer (an HTTPError), never a new target


@functools.cache
def direct_opener() -> urllib.request.OpenerDirector:
    """An opener that uses no proxy and follows no redirect: requests go where we say.

    One per process, shared: its handlers keep no state between requests (as
    ``urlopen``'s global opener does), so each adapter need not build its own.
    """
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_target(url: str, *, allow_insecure_loopback: bool) -> None:
    """Refuse a notification URL that is not HTTPS (or allowed loopback HTTP).

    Raises:
        ValueError: At cold start, so that a bad setting fails loudly.
    """
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if not host:
        raise ValueError("notification URL has no host")
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and allow_insecure_loopback and _is_loopback(host):
        return
    raise ValueError("notification URL must be https (http only to loopback, when allowed)")


def json_post(
    url: str,
    payload: Mapping[str, object],
    *,
    idempotency_key: str,
    signer: WebhookSigner | None,
) -> urllib.request.Request:
    """An effect's POST: compact sorted JSON, its key and, with a signer, its signature."""
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: idempotency_key}
    if signer is not None:
        headers |= signer.headers(idempotency_key, body)
    return urllib.request.Request(  # noqa: S310 (the caller checked the URL: check_target)
        url, data=body, method="POST", headers=headers
    )


class HttpNotifier:
    """POSTs JSON to one configured URL and checks keys at ``<url>/<key>``."""

    def __init__(
        self,
        *,
        url: str,
        timeout_seconds: float,
        allow_insecure_loopback: bool = False,
        signer: WebhookSigner | None = None,
    ) -> None:
        check_target(url, allow_insecure_loopback=allow_insecure_loopback)
        self._url = url.rstrip("/")
        self._timeout = timeout_seconds
        self._opener = direct_opener()
        self._signer = signer

    def notify(self, payload: Mapping[str, object], *, idempotency_key: str) -> None:
        """POST the notification once; raise what a failure proves (the module's list)."""
        request = self.request(payload, idempotency_key=idempotency_key)
        status = http_effect.send(self._opener, request, timeout=self._timeout, effect=_EFFECT)
        http_effect.settle(status, effect=_EFFECT)

    def request(
        self, payload: Mapping[str, object], *, idempotency_key: str
    ) -> urllib.request.Request:
        """The POST of ``payload``: its body and every header, built in one place."""
        return json_post(self._url, payload, idempotency_key=idempotency_key, signer=self._signer)

    def was_applied(self, idempotency_key: str) -> bool:
        """The reconcile check: 200 means applied, 404 means not applied."""
        url = f"{self._url}/{urllib.parse.quote(idempotency_key, safe='')}"
        request = urllib.request.Request(url, method="GET")  # noqa: S310 (checked)
        try:
            status = http_effect.send(self._opener, request, timeout=self._timeout, effect=_EFFECT)
        except TransientError as exc:  # (NotApplied too): a lookup changes nothing
            raise TransientError("notify_unavailable") from exc
        if status == 200:
            return True
        if status == 404:
            return False
        raise TransientError("notify_unavailable")
