"""Fetch packages from RelayLink's MCP server (docs/contract.md, Packages over MCP).

One :class:`McpPackageFetcher` serves one batch. It opens at most one MCP session
per server URL and reuses it for every ``get_package`` of the batch, so a batch of
ten messages to one server costs one handshake, one tool listing (the SDK lists
tools once per session to validate results) and ten tool calls.

The MCP SDK is imported only by these adapters, one concept each:

* :mod:`~functions.core.adapters.mcp_transport`: every HTTP request goes through a
  guarded transport (token to one origin only, size cap, failures recorded).
* :mod:`~functions.core.adapters.mcp_session`: each session lives in its own task of
  the fetcher's task group, so a failing session is dropped without cancelling the
  caller.
* :mod:`~functions.core.adapters.mcp_errors`: a failed exchange becomes one of our
  errors; :mod:`~functions.core.adapters.mcp_result`: a tool result becomes a package.

Calls to one server are serialised: the recorded outcome then belongs to the call in
flight.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Final, Self

import anyio
import anyio.abc

from functions.core.adapters.mcp_errors import translate
from functions.core.adapters.mcp_result import package_from
from functions.core.adapters.mcp_session import McpSession
from functions.core.adapters.mcp_token import is_valid_token
from functions.core.adapters.mcp_transport import FetchCounts
from functions.core.errors import InvalidPackage, McpTokenUnavailable
from functions.core.host_policy import HostPolicy
from functions.core.package import Package

TOOL_NAME: Final = "get_package"


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
        self._counts = FetchCounts()
        self._sessions: dict[str, McpSession] = {}
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

    async def _session_for(self, url: str) -> McpSession:
        session = self._sessions.get(url)
        if session is not None and session.alive:
            return session
        if session is not None:
            await self._drop(session)
        token = self._token()
        if not is_valid_token(token):
            raise McpTokenUnavailable("mcp_token_malformed")
        session = McpSession(
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
            raise translate(session.open_error, session.exchange)
        self._sessions[url] = session
        return session

    async def _drop(self, session: McpSession) -> None:
        if self._sessions.get(session.url) is session:
            del self._sessions[session.url]
        await session.close()

    async def _call(self, session: McpSession, package_id: str) -> Package:
        client = session.client
        assert client is not None  # _session_for returns live sessions only
        session.exchange.reset()
        try:
            # The SDK's own read timeout bounds each wait; this bounds the whole call.
            with anyio.fail_after(self._connect_timeout + self._read_timeout):
                result = await client.call_tool(TOOL_NAME, {"package_id": package_id})
        # See translate for the exceptions the SDK raises here; anything else from
        # its transport layer is equally a failed exchange, never a crash of the batch.
        except Exception as exc:  # noqa: BLE001
            error = translate(exc, session.exchange)
            if not isinstance(error, InvalidPackage) or session.exchange.oversized:
                await self._drop(session)  # the session may be broken: start afresh next time
            raise error from None
        return package_from(result, package_id)
