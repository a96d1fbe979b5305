"""One HTTP request of an effect, and what its answer proves about the effect.

The HTTP effects (the notify workflow's POST, the agent's alert POST) share this
mapping, so that the ledger hears one story (docs/workflows.md, "What an answer
proves"). ``<effect>`` is the code's prefix, e.g. ``notify``:

=====================================================  =============================
answer                                                 outcome
=====================================================  =============================
2xx                                                    applied
connection refused, host not found (nothing sent)      not applied: ``NotApplied``
                                                       (``<effect>_unavailable``)
429 Too Many Requests, 425 Too Early (RFC 6585,        not applied: ``NotApplied``
RFC 8470: the request was not processed)               (``<effect>_throttled``)
any other 4xx (400, 401, 403, 404, 410, 413, 422...)   refused for good: ``Rejected``
                                                       (``<effect>_rejected``)
408, 409 (the key's first request still running),      unknown: ``TransientError``
any 5xx (a gateway's 502/504 may follow the action),   (``<effect>_unconfirmed``)
a timeout or a connection lost after sending
a redirect (3xx; never followed; a 303 may follow      unknown, and it will not change:
the action)                                            ``PermanentError``
                                                       (``<effect>_redirected``)
=====================================================  =============================

A 503 is unknown too: HTTP does not promise that a 503 changed nothing, and a gateway
answers it while its upstream may be acting.

The status alone says what happened; the answer's body is only diagnostics. At most
:data:`MAX_ANSWER_BYTES` of it are read (a 300 MiB answer must not take 300 MiB of a
256 MB worker), and a body that is longer, slow or cut off changes no outcome: a 2xx
stays applied.
"""

from __future__ import annotations

import http.client
import socket
import urllib.error
import urllib.request
from enum import StrEnum
from typing import Final

from functions.core.errors import NotApplied, PermanentError, Rejected, TransientError

# Failures to open a connection at all: the request cannot have been sent.
_NEVER_SENT: Final = (ConnectionRefusedError, socket.gaierror)
# Answers that mean "not processed, try later".
_NOT_PROCESSED: Final = frozenset({425, 429})
# 4xx answers whose outcome is unknown: the request timed out on the server's side, or
# (Idempotency-Key drafts) a request with this key is still being processed.
_UNDECIDED_4XX: Final = frozenset({408, 409})
# The most of an answer's body an effect reads before closing the connection.
MAX_ANSWER_BYTES: Final = 64 * 1024


class HttpOutcome(StrEnum):
    """What an HTTP status proves about the effect of the request it answers."""

    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    REJECTED = "rejected"
    UNKNOWN = "unknown"
    REDIRECTED = "redirected"


def outcome_of(status: int) -> HttpOutcome:
    """The row of the module's table for ``status``."""
    if 200 <= status < 300:
        return HttpOutcome.APPLIED
    if 300 <= status < 400:
        return HttpOutcome.REDIRECTED
    if status in _NOT_PROCESSED:
        return HttpOutcome.NOT_APPLIED
    if 400 <= status < 500 and status not in _UNDECIDED_4XX:
        return HttpOutcome.REJECTED
    return HttpOutcome.UNKNOWN


def settle(status: int, *, effect: str) -> None:
    """Return if ``status`` says applied; else raise what it proves (the table's codes).

    Raises:
        NotApplied: ``<effect>_throttled``.
        Rejected: ``<effect>_rejected``.
        PermanentError: ``<effect>_redirected`` (the outcome stays unknown).
        TransientError: ``<effect>_unconfirmed``.
    """
    outcome = outcome_of(status)
    if outcome is HttpOutcome.APPLIED:
        return
    if outcome is HttpOutcome.NOT_APPLIED:
        raise NotApplied(f"{effect}_throttled")
    if outcome is HttpOutcome.REJECTED:
        raise Rejected(f"{effect}_rejected")
    if outcome is HttpOutcome.REDIRECTED:
        raise PermanentError(f"{effect}_redirected")
    raise TransientError(f"{effect}_unconfirmed")


def send(
    opener: urllib.request.OpenerDirector,
    request: urllib.request.Request,
    *,
    timeout: float,
    effect: str,
) -> int:
    """Send ``request`` once; its answer's status (at most ``MAX_ANSWER_BYTES`` of the
    body are read, then dropped).

    Raises:
        NotApplied: ``<effect>_unavailable``: the connection never opened.
        TransientError: ``<effect>_unconfirmed``: a timeout, a reset or a garbled answer
            once the request may have gone out.
    """
    try:
        with opener.open(request, timeout=timeout) as response:
            status = int(response.status)
            _read_bounded(response)
            return status
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)
    except urllib.error.URLError as exc:
        # urllib wraps what fails while connecting and sending; only a connection that
        # never opened is certain to have sent nothing.
        if isinstance(exc.reason, _NEVER_SENT):
            raise NotApplied(f"{effect}_unavailable") from exc
        raise TransientError(f"{effect}_unconfirmed") from exc
    except (OSError, http.client.HTTPException) as exc:
        # A timeout, a reset or a garbled answer while waiting for the response.
        raise TransientError(f"{effect}_unconfirmed") from exc


def _read_bounded(response: http.client.HTTPResponse) -> None:
    """Read at most ``MAX_ANSWER_BYTES`` of the body; closing drops the rest unread."""
    try:
        response.read(MAX_ANSWER_BYTES)
    except (OSError, http.client.HTTPException):
        return  # the status has been received: a body cut off or slow changes nothing
