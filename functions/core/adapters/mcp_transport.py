"""The MCP SDK's HTTP transport, guarded: what may be sent where, and how much comes back.

Every HTTP request of an MCP session goes through :class:`GuardedTransport`, which adds
the bearer token only to the one origin that passed the :class:`HostPolicy`, lets no
redirect be followed, bounds the response size, and turns transport failures into an
answer the SDK handles, while recording what happened in an :class:`Exchange`. The SDK
reports every HTTP error as the same JSON-RPC error, so the recorded status is what
lets the fetcher tell 401 from 503.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import httpx2

from functions.core.host_policy import HostPolicy


class _ResultTooLarge(httpx2.StreamError):
    """Raised into the SDK when a response passes the byte cap (it handles StreamError)."""


class _StreamBroken(httpx2.StreamError):
    """A transport failure while reading a body, in a form the SDK handles."""


@dataclass
class Exchange:
    """What the transport saw for one call, or for opening one session."""

    status: int | None = None  # the last POST's HTTP status
    failure: str | None = None  # "timeout" or "connect", from the transport
    oversized: bool = False
    refused: bool = False  # a request to another origin was stopped
    redirected: bool = False  # the server answered a redirect (never followed)


# The exchange of the call in flight in this task. The SDK sends each request from its
# caller's context (it carries context variables across its internal streams), so calls
# that share a session concurrently each record into their own exchange; requests made
# outside a call (opening the session) record into the session's.
_CALL_EXCHANGE: ContextVar[Exchange | None] = ContextVar("mcp_call_exchange", default=None)


@contextmanager
def recording_into(exchange: Exchange) -> Iterator[Exchange]:
    """Record the requests this task sends, while the block runs, into ``exchange``."""
    token = _CALL_EXCHANGE.set(exchange)
    try:
        yield exchange
    finally:
        _CALL_EXCHANGE.reset(token)


@dataclass
class FetchCounts:
    """Totals over a fetcher's life, for metrics, tests and benchmarks."""

    http_requests: int = 0
    sessions_opened: int = 0


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, exchange: Exchange) -> None:
        self._inner = inner
        self._limit = limit
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        try:
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > self._limit:
                    self._exchange.oversized = True
                    raise _ResultTooLarge("response over the size cap")
                yield chunk
        except httpx2.TimeoutException:
            self._exchange.failure = "timeout"
            raise _StreamBroken("read timed out") from None
        except httpx2.TransportError:
            self._exchange.failure = "connect"
            raise _StreamBroken("connection failed") from None

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedTransport(httpx2.AsyncBaseTransport):
    """The SDK's HTTP client transport: token, origin lock, size cap, failure recording."""

    def __init__(
        self,
        *,
        inner: httpx2.AsyncBaseTransport,
        url: str,
        policy: HostPolicy,
        token: str,
        max_bytes: int,
        exchange: Exchange,
        counts: FetchCounts,
    ) -> None:
        self._inner = inner
        self._origin = _origin(httpx2.URL(url))
        self._policy = policy
        self._authorization = f"Bearer {token}"
        self._max_bytes = max_bytes
        self._exchange = exchange
        self._counts = counts
        self._redirect_status: int | None = None  # the server redirected once already

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        is_post = request.method == "POST"
        exchange = _CALL_EXCHANGE.get() or self._exchange
        refusal = self._refusal(request, exchange)
        if refusal is not None:
            return refusal
        request.headers["Authorization"] = self._authorization
        # The cap counts bytes on the wire: a compressed body could expand past it.
        request.headers["Accept-Encoding"] = "identity"
        self._counts.http_requests += 1
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TimeoutException:
            if is_post:
                exchange.failure = "timeout"
            return _stand_in(request, 504)
        except httpx2.TransportError:
            if is_post:
                exchange.failure = "connect"
            return _stand_in(request, 502)
        if response.is_redirect:
            # The SDK follows a redirect within the origin (up to 20 hops, each with the
            # token): an answer without its Location leaves it nothing to follow.
            await response.aclose()
            exchange.redirected = True
            self._redirect_status = response.status_code
            return _stand_in(request, response.status_code)
        if not is_post:
            return response  # a resumption GET; the SDK caps its events
        return await self._bounded(request, response, exchange)

    def _refusal(self, request: httpx2.Request, exchange: Exchange) -> httpx2.Response | None:
        """The answer to a request that must not reach the server, or None to send it."""
        # No redirect is followed (each hop would carry the token); this lock holds
        # even if that changes, and against any URL parser disagreeing with HostPolicy's.
        if _origin(request.url) != self._origin or not self._policy.allows(str(request.url)):
            exchange.refused = True
            return _stand_in(request, 421)
        if self._redirect_status is not None:
            # A server that redirected is not asked again in this session (the SDK
            # would fall back from its discovery to a legacy handshake, a second token).
            exchange.redirected = True
            return _stand_in(request, self._redirect_status)
        if request.method == "GET" and "last-event-id" not in request.headers:
            # The SDK opens a GET stream for server-initiated messages after a legacy
            # handshake. get_package needs none, and the spec lets a server refuse the
            # stream with 405: answering that here saves a request and an open connection
            # per session. (GETs that resume a response stream carry Last-Event-ID.)
            return _stand_in(request, 405)
        return None

    async def _bounded(
        self, request: httpx2.Request, response: httpx2.Response, exchange: Exchange
    ) -> httpx2.Response:
        """Record a POST's status and cap its body."""
        exchange.status = response.status_code
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        length = response.headers.get("content-length", "")
        if encoding not in ("", "identity") or (length.isdigit() and int(length) > self._max_bytes):
            await response.aclose()
            exchange.oversized = True
            return _stand_in(request, 502)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._max_bytes, exchange),  # type: ignore[arg-type]
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


def _stand_in(request: httpx2.Request, status: int) -> httpx2.Response:
    """A bodiless answer in place of a failure; the SDK turns it into an error for the call."""
    return httpx2.Response(status_code=status, request=request)
