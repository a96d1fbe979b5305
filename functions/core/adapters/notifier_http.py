"""The notification effect over HTTP: POST with an idempotency key, GET to check it.

The target is the configured ``NOTIFY_URL`` only (never a URL from a delivery or a
package): HTTPS, or plain HTTP to a loopback host when the local runtime allows it.
Redirects and proxies are refused so that a request cannot be sent elsewhere.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from functions.core.errors import PermanentError, TransientError

IDEMPOTENCY_HEADER = "Idempotency-Key"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a redirect is an answer (an HTTPError), never a new target


def direct_opener() -> urllib.request.OpenerDirector:
    """An opener that uses no proxy and follows no redirect: requests go where we say."""
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


class HttpNotifier:
    """POSTs JSON to one configured URL and checks keys at ``<url>/<key>``."""

    def __init__(
        self, *, url: str, timeout_seconds: float, allow_insecure_loopback: bool = False
    ) -> None:
        check_target(url, allow_insecure_loopback=allow_insecure_loopback)
        self._url = url.rstrip("/")
        self._timeout = timeout_seconds
        self._opener = direct_opener()

    def notify(self, payload: Mapping[str, object], *, idempotency_key: str) -> None:
        """Send the notification once (the receiver side deduplicates on the key)."""
        request = urllib.request.Request(  # noqa: S310 (scheme checked in check_target)
            self._url,
            data=json.dumps(payload, separators=(",", ":"), sort_keys=True).encode(),
            method="POST",
            headers={"Content-Type": "application/json", IDEMPOTENCY_HEADER: idempotency_key},
        )
        status = self._send(request)
        if 200 <= status < 300:
            return
        if status in (408, 425, 429) or status >= 500:
            raise TransientError("notify_unavailable")
        raise PermanentError("notify_rejected")

    def was_applied(self, idempotency_key: str) -> bool:
        """The reconcile check: 200 means applied, 404 means not applied."""
        url = f"{self._url}/{urllib.parse.quote(idempotency_key, safe='')}"
        status = self._send(urllib.request.Request(url, method="GET"))  # noqa: S310 (checked)
        if status == 200:
            return True
        if status == 404:
            return False
        raise TransientError("notify_unavailable")

    def _send(self, request: urllib.request.Request) -> int:
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                response.read()
                return int(response.status)
        except urllib.error.HTTPError as exc:
            exc.close()
            return int(exc.code)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            # Connection refused, reset, DNS, timeout: the outcome is unknown to us.
            raise TransientError("notify_unavailable") from exc
