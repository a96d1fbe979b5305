"""Fetch packages from RelayLink's MCP server (docs/contract.md, Packages over MCP).

The only module that imports ``mcp``.

One :class:`McpPackageFetcher` serves one batch. It opens at most one MCP session
per server URL and reuses it for every ``get_package`` of the batch, so a batch of
ten messages to one server costs one handshake, one tool listing (the SDK lists
tools once per session to validate results) and ten tool calls.

How the SDK is held:

* Every HTTP request goes through :class:`_GuardedTransport`, which adds the bearer
  token only to the one origin that passed the :class:`HostPolicy`, bounds the
  response size, and turns transport failures into an answer the SDK handles, while
  recording what happened. The SDK reports every HTTP error as the same JSON-RPC
  error, so the recorded status is what lets us tell 401 from 503.
* Each session lives in its own task of the fetcher's task group. The SDK keeps
  task groups open for a session's lifetime; if one of them fails, the failure stays
  in that task and the session is dropped, instead of cancelling the caller.
* Calls to one server are serialised: the recorded outcome then belongs to the
  call in flight.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self

import anyio
import anyio.abc
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import REQUEST_TIMEOUT, CallToolResult, Implementation, TextContent
from pydantic import ValidationError

from functions.core.adapters.mcp_token import is_valid_token
from functions.core.errors import (
    HostNotAllowed,
    InvalidPackage,
    McpAuthError,
    McpTokenUnavailable,
    PackageNotFound,
    ProcessingError,
    TransientError,
)
from functions.core.host_policy import HostPolicy
from functions.core.package import Package

TOOL_NAME: Final = "get_package"

# Error codes (stored as last_error): fixed strings, never the URL, token or response text.
CODE_UNAVAILABLE: Final = "mcp_unavailable"  # 5xx, connection refused or reset
CODE_TIMEOUT: Final = "mcp_timeout"
CODE_THROTTLED: Final = "mcp_throttled"  # HTTP 429
CODE_HTTP_ERROR: Final = "mcp_http_error"  # another 4xx (wrong path, session lost, ...)
CODE_PROTOCOL: Final = "mcp_protocol_error"  # a JSON-RPC error for our request
CODE_TOOL_ERROR: Final = "mcp_tool_error"  # a tool error other than "not found"
CODE_TOO_LARGE: Final = "mcp_result_too_large"
CODE_RESULT_INVALID: Final = "mcp_result_invalid"
CODE_PACKAGE_MISMATCH: Final = "mcp_package_mismatch"
CODE_REDIRECTED: Final = "mcp_origin_changed"

_CLIENT_INFO: Final = Implementation(name="relaylink-receiver", version="1")

# httpx2 logs every request's URL at INFO and the SDK logs session ids; neither belongs
# in our logs (STYLE: no URLs or credential-like values). Warnings still get through.
for _name in ("httpx2", "mcp.client.streamable_http"):
    logging.getLogger(_name).setLevel(logging.WARNING)


class _ResultTooLarge(httpx2.StreamError):
    """Raised into the SDK when a response passes the byte cap (it handles StreamError)."""


class _StreamBroken(httpx2.StreamError):
    """A transport failure while reading a body, in a form the SDK handles."""


@dataclass
class _Exchange:
    """What the transport saw for the call in flight (reset before each call)."""

    status: int | None = None  # the last POST's HTTP status
    failure: str | None = None  # "timeout" or "connect", from the transport
    oversized: bool = False
    refused: bool = False  # a request to another origin was stopped

    def reset(self) -> None:
        self.status = None
        self.failure = None
        self.oversized = False
        self.refused = False


@dataclass
class _Counts:
    """Totals over the fetcher's life, for metrics, tests and benchmarks."""

    http_requests: int = 0
    sessions_opened: int = 0


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, exchange: _Exchange) -> None:
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


class _GuardedTransport(httpx2.AsyncBaseTransport):
    """The SDK's HTTP client transport: token, origin lock, size cap, failure recording."""

    def __init__(
        self,
        *,
        inner: httpx2.AsyncBaseTransport,
        url: str,
        policy: HostPolicy,
        token: str,
        max_bytes: int,
        exchange: _Exchange,
        counts: _Counts,
    ) -> None:
        self._inner = inner
        self._origin = _origin(httpx2.URL(url))
        self._policy = policy
        self._authorization = f"Bearer {token}"
        self._max_bytes = max_bytes
        self._exchange = exchange
        self._counts = counts

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        is_post = request.method == "POST"
        # The SDK follows redirects only within the origin; this lock holds even if
        # that changes, and against any URL parser disagreeing with HostPolicy's.
        if _origin(request.url) != self._origin or not self._policy.allows(str(request.url)):
            self._exchange.refused = True
            return _stand_in(request, 421)
        if request.method == "GET" and "last-event-id" not in request.headers:
            # The SDK opens a GET stream for server-initiated messages after a legacy
            # handshake. get_package needs none, and the spec lets a server refuse the
            # stream with 405: answering that here saves a request and an open connection
            # per session. (GETs that resume a response stream carry Last-Event-ID.)
            return _stand_in(request, 405)
        request.headers["Authorization"] = self._authorization
        # The cap counts bytes on the wire: a compressed body could expand past it.
        request.headers["Accept-Encoding"] = "identity"
        self._counts.http_requests += 1
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TimeoutException:
            if is_post:
                self._exchange.failure = "timeout"
            return _stand_in(request, 504)
        except httpx2.TransportError:
            if is_post:
                self._exchange.failure = "connect"
            return _stand_in(request, 502)
        if not is_post:
            return response  # a resumption GET; the SDK caps its events
        return await self._bounded(request, response)

    async def _bounded(self, request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
        """Record a POST's status and cap its body."""
        self._exchange.status = response.status_code
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        length = response.headers.get("content-length", "")
        if encoding not in ("", "identity") or (length.isdigit() and int(length) > self._max_bytes):
            await response.aclose()
            self._exchange.oversized = True
            return _stand_in(request, 502)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._max_bytes, self._exchange),  # type: ignore[arg-type]
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


def _stand_in(request: httpx2.Request, status: int) -> httpx2.Response:
    """A bodiless answer in place of a failure; the SDK turns it into an error for the call."""
    return httpx2.Response(status_code=status, request=request)


class _Session:
    """One MCP session to one server, held open in its own task."""

    def __init__(
        self,
        *,
        url: str,
        policy: HostPolicy,
        token: str,
        connect_timeout: float,
        read_timeout: float,
        max_bytes: int,
        counts: _Counts,
    ) -> None:
        self.url = url
        self.exchange = _Exchange()
        self.client: Client | None = None
        self.open_error: BaseException | None = None
        self._transport = _GuardedTransport(
            inner=httpx2.AsyncHTTPTransport(),
            url=url,
            policy=policy,
            token=token,
            max_bytes=max_bytes,
            exchange=self.exchange,
            counts=counts,
        )
        self._timeout = httpx2.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
        )
        self._read_timeout = read_timeout
        # Auto mode probes server/discover and falls back to initialize on older servers.
        self._open_deadline = 2 * (connect_timeout + read_timeout)
        self._max_bytes = max_bytes
        self._close = anyio.Event()
        self._closed = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Open the session, report, hold it until :meth:`close`; contain every failure."""
        started = False
        # One scope around the whole life: its deadline bounds the opening and is lifted
        # once open (a scope exited while the SDK's task groups are still open would
        # corrupt anyio's scope stack).
        opening = anyio.CancelScope(deadline=anyio.current_time() + self._open_deadline)
        try:
            with opening:
                async with (
                    httpx2.AsyncClient(
                        transport=self._transport, timeout=self._timeout, follow_redirects=False
                    ) as http,
                    Client(
                        streamable_http_client(
                            self.url, http_client=http, max_sse_event_size=self._max_bytes
                        ),
                        read_timeout_seconds=self._read_timeout,
                        client_info=_CLIENT_INFO,
                        cache=None,  # a package must come from the server every time
                    ) as client,
                ):
                    opening.deadline = math.inf
                    self.client = client
                    started = True
                    task_status.started()
                    await self._close.wait()
                    self.client = None
            if opening.cancelled_caught and not started:
                self.open_error = TimeoutError()
        # The SDK's task groups can end with any exception (ExceptionGroup included);
        # this task exists to keep them from the caller, which maps `open_error`.
        except Exception as exc:  # noqa: BLE001
            self.open_error = exc
        finally:
            self.client = None
            self._closed.set()
            if not started:
                task_status.started()

    @property
    def alive(self) -> bool:
        return self.client is not None and not self._close.is_set()

    def request_close(self) -> None:
        self._close.set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        self.request_close()
        await self.wait_closed()


class McpPackageFetcher:
    """Fetches packages for one batch; use as ``async with McpPackageFetcher(...) as fetcher``.

    Sessions are opened on first use per ``mcp_url`` and closed when the block ends.
    A session that fails (5xx, timeout, connection loss, protocol error) is dropped;
    the next call to that server opens a fresh one.
    """

    def __init__(
        self,
        *,
        token: Callable[[], str],
        policy: HostPolicy,
        connect_timeout: float,
        read_timeout: float,
        max_result_bytes: int,
    ) -> None:
        """Args:
        token: returns the bearer token (called once per session opened).
        policy: which URLs may receive the token.
        connect_timeout: seconds to establish a connection.
        read_timeout: seconds to wait for an answer, per request.
        max_result_bytes: cap on one HTTP response body (the tool result's envelope).
        """
        if connect_timeout <= 0 or read_timeout <= 0 or max_result_bytes <= 0:
            raise ValueError("timeouts and the size cap must be positive")
        self._token = token
        self._policy = policy
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_bytes = max_result_bytes
        self._counts = _Counts()
        self._sessions: dict[str, _Session] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._stack: AsyncExitStack | None = None
        self._tasks: anyio.abc.TaskGroup | None = None

    @property
    def http_requests(self) -> int:
        """HTTP requests sent to MCP servers so far (all sessions)."""
        return self._counts.http_requests

    @property
    def sessions_opened(self) -> int:
        return self._counts.sessions_opened

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError("McpPackageFetcher is already entered")
        stack = AsyncExitStack()
        self._tasks = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.request_close()  # all at once: each may send a DELETE
        stack, self._stack, self._tasks = self._stack, None, None
        try:
            for session in sessions:
                await session.wait_closed()
        finally:
            if stack is not None:
                # The task group holds only our session tasks. The caller's exception is
                # not handed to it: anyio would wrap it in an ExceptionGroup, and the
                # caller's `except PackageNotFound` would no longer match.
                await stack.__aexit__(None, None, None)

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        """Call ``get_package`` on the server at ``mcp_url``.

        Raises:
            HostNotAllowed: ``mcp_url`` fails the policy (nothing was sent anywhere).
            PackageNotFound: the server says the package does not exist.
            InvalidPackage: the result is not a package, is another package, or is
                over the size cap.
            McpAuthError: HTTP 401 or 403.
            McpTokenUnavailable: the token source failed or gave a malformed token.
            TransientError: 5xx, 429, timeout, connection failure, protocol error, or a
                tool error other than "not found".
        """
        self._policy.check(mcp_url)
        if self._tasks is None:
            raise RuntimeError("use McpPackageFetcher inside `async with`")
        # One call at a time per server: the transport's record then belongs to the
        # call in flight, and concurrent first calls share one session.
        lock = self._locks.setdefault(mcp_url, anyio.Lock())
        async with lock:
            session = await self._session_for(mcp_url)
            return await self._call(session, package_id)

    async def _session_for(self, url: str) -> _Session:
        session = self._sessions.get(url)
        if session is not None and session.alive:
            return session
        if session is not None:
            await self._drop(session)
        token = self._token()
        if not is_valid_token(token):
            raise McpTokenUnavailable("mcp_token_malformed")
        session = _Session(
            url=url,
            policy=self._policy,
            token=token,
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            max_bytes=self._max_bytes,
            counts=self._counts,
        )
        assert self._tasks is not None  # get_package checked it
        self._counts.sessions_opened += 1
        await self._tasks.start(session.run)
        if session.client is None:
            raise _translate(session.open_error, session.exchange)
        self._sessions[url] = session
        return session

    async def _drop(self, session: _Session) -> None:
        if self._sessions.get(session.url) is session:
            del self._sessions[session.url]
        await session.close()

    async def _call(self, session: _Session, package_id: str) -> Package:
        client = session.client
        assert client is not None  # _session_for returns live sessions only
        session.exchange.reset()
        try:
            # The SDK's own read timeout bounds each wait; this bounds the whole call.
            with anyio.fail_after(self._connect_timeout + self._read_timeout):
                result = await client.call_tool(TOOL_NAME, {"package_id": package_id})
        # See _translate for the exceptions the SDK raises here; anything else from
        # its transport layer is equally a failed exchange, never a crash of the batch.
        except Exception as exc:  # noqa: BLE001
            error = _translate(exc, session.exchange)
            if not isinstance(error, InvalidPackage) or session.exchange.oversized:
                await self._drop(session)  # the session may be broken: start afresh next time
            raise error from None
        return _package_from(result, package_id)


def _translate(exc: BaseException | None, exchange: _Exchange) -> ProcessingError:  # noqa: PLR0911 (one ordered list of rules)
    """Map a failed exchange to our vocabulary; what the transport saw comes first.

    The SDK reports every HTTP error status as one JSON-RPC error, so the status the
    transport recorded decides between auth, throttling and unavailability.
    """
    status = exchange.status
    if exchange.refused:
        return HostNotAllowed(CODE_REDIRECTED)
    if exchange.oversized:
        return InvalidPackage(CODE_TOO_LARGE)
    if status in (401, 403):
        return McpAuthError()
    if status == 429:
        return TransientError(CODE_THROTTLED)
    if status is not None and status >= 500:
        return TransientError(CODE_UNAVAILABLE)
    if (
        exchange.failure == "timeout"
        or isinstance(exc, TimeoutError)
        or (isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT)
    ):
        return TransientError(CODE_TIMEOUT)
    if exchange.failure == "connect":
        return TransientError(CODE_UNAVAILABLE)
    if status is not None and status >= 400:
        return TransientError(CODE_HTTP_ERROR)
    if isinstance(exc, ValidationError | RuntimeError):
        # pydantic: the result does not fit the protocol's shape. RuntimeError: the SDK
        # found structured content that fails the tool's declared output schema.
        return InvalidPackage(CODE_RESULT_INVALID)
    if isinstance(exc, MCPError):
        return TransientError(CODE_PROTOCOL)
    return TransientError(CODE_UNAVAILABLE)


def _package_from(result: CallToolResult, package_id: str) -> Package:
    """Structured content first, else the first text block that holds a JSON object."""
    if result.is_error:
        message = " ".join(block.text for block in result.content if isinstance(block, TextContent))
        if "not found" in message.lower():
            raise PackageNotFound()
        # The contract promises permanence only for "not found". Any other tool error
        # is the server failing on its side, which docs/contract.md says may be transient;
        # retrying costs a bounded number of attempts, giving up could lose a package.
        raise TransientError(CODE_TOOL_ERROR)
    data: Any = result.structured_content
    if data is None:
        data = _json_text(result)
    package = Package.from_mapping(data)
    if package.package_id != package_id:
        raise InvalidPackage(CODE_PACKAGE_MISMATCH)
    return package


def _json_text(result: CallToolResult) -> object:
    for block in result.content:
        if isinstance(block, TextContent):
            try:
                data: object = json.loads(block.text)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
    raise InvalidPackage(CODE_RESULT_INVALID)
