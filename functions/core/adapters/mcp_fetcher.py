"""Fetch packages from RelayLink's MCP server (docs/contract.md, Packages over MCP).

One :class:`McpPackageFetcher` serves one batch. It opens at most one MCP session
per server URL and reuses it for every ``get_package`` of the batch, so a batch of
ten messages to one server costs one handshake, one tool listing (the SDK lists
tools once per session to validate results) and ten tool calls. Calls of concurrent
messages share the session: the SDK multiplexes requests over it, and only opening
a session is done by one caller at a time per server.

The MCP SDK is imported only by these adapters, one concept each:

* :mod:`~functions.core.adapters.mcp_transport`: every HTTP request goes through a
  guarded transport (token to one origin only, size cap, failures recorded per call).
* :mod:`~functions.core.adapters.mcp_session`: each session lives in its own task of
  the fetcher's task group, so a failing session is dropped without cancelling the
  caller.
* :mod:`~functions.core.adapters.mcp_errors`: a failed exchange becomes one of our
  errors; :mod:`~functions.core.adapters.mcp_result`: a tool result becomes a package.

A server that fails at transport level (refused, reset, TLS, timeout) is not
contacted again by the same fetcher: its later calls fail at once with the same
error, and :meth:`McpPackageFetcher.unreachable` lets the batch hold back the
messages it has not started.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Final, Self, cast

import anyio
import anyio.abc
from mcp_types import RequestParamsMeta

from functions.core import tracing
from functions.core.adapters.mcp_errors import is_transport_failure, translate
from functions.core.adapters.mcp_result import package_from
from functions.core.adapters.mcp_session import McpSession
from functions.core.adapters.mcp_timing import call_time_bound, open_time_bound
from functions.core.adapters.mcp_token import is_valid_token
from functions.core.adapters.mcp_transport import Exchange, FetchCounts, recording_into
from functions.core.deadline import Deadline
from functions.core.errors import (
    InvalidPackage,
    McpTokenUnavailable,
    ProcessingError,
    TransientError,
)
from functions.core.host_policy import HostPolicy
from functions.core.package import Package

TOOL_NAME: Final = "get_package"
# Where a request carries W3C trace context (MCP 2026-07-28, ``_meta``): the server's
# spans join the delivery's trace. An older server ignores the key.
META_TRACEPARENT: Final = "traceparent"


def _trace_meta() -> RequestParamsMeta | None:
    """The fetch span's context for the request's ``_meta`` (None: untraced)."""
    traceparent = tracing.current_traceparent()
    if traceparent is None:
        return None
    # An open map (``extra_items=Any``) that mypy reads as closed.
    return cast("RequestParamsMeta", {META_TRACEPARENT: traceparent})


class McpPackageFetcher:
    """Fetches packages for one batch; use as ``async with McpPackageFetcher(...) as fetcher``.

    Sessions are opened on first use per ``mcp_url`` and closed when the block ends.
    A session whose call fails (5xx, timeout, connection loss, protocol error) is
    retired: calls already in flight on it finish, and the next call to that server
    opens a fresh one, unless the failure was at transport level (see
    :meth:`unreachable`).
    """

    def __init__(
        self,
        *,
        token: Callable[[], str],
        policy: HostPolicy,
        connect_timeout: float,
        read_timeout: float,
        max_result_bytes: int,
        deadline: Deadline | None = None,
    ) -> None:
        """Args:
        token: returns the bearer token (called once per session opened).
        policy: which URLs may receive the token.
        connect_timeout: seconds to establish a connection.
        read_timeout: seconds to wait for an answer, per request.
        max_result_bytes: cap on one HTTP response body (the tool result's envelope).
        deadline: no opening or call waits past it (the batch's end); None: no limit.
        """
        if connect_timeout <= 0 or read_timeout <= 0 or max_result_bytes <= 0:
            raise ValueError("timeouts and the size cap must be positive")
        self._token = token
        self._policy = policy
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_bytes = max_result_bytes
        self._deadline = deadline or Deadline.never()
        self._counts = FetchCounts()
        self._sessions: dict[str, McpSession] = {}  # the live session per server
        self._started: list[McpSession] = []  # every session, closed when the block ends
        self._calls: dict[McpSession, int] = {}  # calls in flight per session
        self._opening: dict[str, anyio.Lock] = {}
        self._unreachable: dict[str, str] = {}  # server -> the error code it failed with
        self._stack: AsyncExitStack | None = None
        self._tasks: anyio.abc.TaskGroup | None = None

    @property
    def http_requests(self) -> int:
        """HTTP requests sent to MCP servers so far (all sessions)."""
        return self._counts.http_requests

    @property
    def sessions_opened(self) -> int:
        return self._counts.sessions_opened

    def unreachable(self, mcp_url: str) -> bool:
        """Whether the server at ``mcp_url`` failed at transport level in this block."""
        return mcp_url in self._unreachable

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
        sessions, self._started, self._sessions = self._started, [], {}
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
                tool error other than "not found"; at once, without a request, when
                the server failed at transport level earlier in this block.
        """
        self._policy.check(mcp_url)
        if self._tasks is None:
            raise RuntimeError("use McpPackageFetcher inside `async with`")
        session = await self._session_for(mcp_url)
        return await self._call(session, package_id)

    async def _session_for(self, url: str) -> McpSession:
        # Concurrent first calls to one server wait for one session instead of each
        # opening their own.
        async with self._opening.setdefault(url, anyio.Lock()):
            code = self._unreachable.get(url)
            if code is not None:
                # Not contacted again in this block: it would wait or fail the same way.
                raise TransientError(code)
            session = self._sessions.get(url)
            if session is not None and session.alive:
                return session
            if session is not None:
                self._retire(session)
            token = self._token()
            if not is_valid_token(token):
                raise McpTokenUnavailable("mcp_token_malformed")
            session = McpSession(
                url=url,
                policy=self._policy,
                token=token,
                connect_timeout=self._connect_timeout,
                read_timeout=self._read_timeout,
                open_timeout=self._bounded(
                    open_time_bound(self._connect_timeout, self._read_timeout)
                ),
                max_bytes=self._max_bytes,
                counts=self._counts,
            )
            assert self._tasks is not None  # get_package checked it
            self._counts.sessions_opened += 1
            self._started.append(session)
            await self._tasks.start(session.run)
            if session.client is None:
                raise self._failed(url, session.open_error, session.exchange)
            self._sessions[url] = session
            return session

    async def _call(self, session: McpSession, package_id: str) -> Package:
        client = session.client
        assert client is not None  # _session_for returns live sessions only
        self._calls[session] = self._calls.get(session, 0) + 1
        try:
            with recording_into(Exchange()) as exchange:
                try:
                    # The SDK's own read timeout bounds each wait; this bounds the call.
                    with anyio.fail_after(
                        self._bounded(call_time_bound(self._connect_timeout, self._read_timeout))
                    ):
                        result = await client.call_tool(
                            TOOL_NAME, {"package_id": package_id}, meta=_trace_meta()
                        )
                # See translate for the exceptions the SDK raises here; anything else from
                # its transport layer is equally a failed exchange, never a crash of the batch.
                except Exception as exc:  # noqa: BLE001
                    error = self._failed(session.url, exc, exchange)
                    if not isinstance(error, InvalidPackage) or exchange.oversized:
                        self._retire(session)  # it may be broken: start afresh next time
                    raise error from None
        finally:
            self._calls[session] -= 1
            if not self._calls[session]:
                del self._calls[session]
                if self._sessions.get(session.url) is not session:
                    session.request_close()  # retired, and its last call is over
        return package_from(result, package_id)

    def _failed(self, url: str, exc: BaseException | None, exchange: Exchange) -> ProcessingError:
        """The error for a failed exchange; a transport failure marks the server unreachable."""
        error = translate(exc, exchange)
        if is_transport_failure(error, exchange):
            self._unreachable.setdefault(url, error.code)
        return error

    def _retire(self, session: McpSession) -> None:
        """No new calls on ``session``; it closes once the calls in flight on it are over."""
        if self._sessions.get(session.url) is session:
            del self._sessions[session.url]
        if session not in self._calls:
            session.request_close()

    def _bounded(self, seconds: float) -> float:
        """``seconds``, or less when the deadline comes sooner."""
        return max(0.0, min(seconds, self._deadline.remaining()))
