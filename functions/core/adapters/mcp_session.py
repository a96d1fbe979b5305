"""One MCP session to one server, held open in its own task.

The SDK keeps task groups open for a session's lifetime; if one of them fails, the
failure stays in the session's task and the session is dropped, instead of cancelling
the caller. Its HTTP goes through the guarded transport
(:mod:`functions.core.adapters.mcp_transport`).
"""

from __future__ import annotations

import functools
import math
import ssl
from typing import Final

import anyio
import anyio.abc
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from functions.core.adapters.mcp_transport import Exchange, FetchCounts, GuardedTransport
from functions.core.host_policy import HostPolicy

_CLIENT_INFO: Final = Implementation(name="relaylink-receiver", version="1")


@functools.cache
def _tls() -> ssl.SSLContext:
    """The container's one TLS context (httpx's default: certifi's CA bundle).

    Loading the CA bundle costs tens of milliseconds of CPU; a new transport per
    session would pay it for every batch (docs/benchmarks.md, figure 8).
    """
    return httpx2.create_ssl_context()


class McpSession:
    """One MCP session to one server, held open in its own task."""

    def __init__(
        self,
        *,
        url: str,
        policy: HostPolicy,
        token: str,
        connect_timeout: float,
        read_timeout: float,
        open_timeout: float,
        max_bytes: int,
        counts: FetchCounts,
    ) -> None:
        self.url = url
        self.exchange = Exchange()
        self.client: Client | None = None
        self.open_error: BaseException | None = None
        self._transport = GuardedTransport(
            inner=httpx2.AsyncHTTPTransport(verify=_tls()),
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
        self._open_timeout = open_timeout
        self._max_bytes = max_bytes
        self._close = anyio.Event()
        self._closed = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Open the session, report, hold it until :meth:`close`; contain every failure."""
        started = False
        # One scope around the whole life: its deadline bounds the opening and is lifted
        # once open (a scope exited while the SDK's task groups are still open would
        # corrupt anyio's scope stack).
        opening = anyio.CancelScope(deadline=anyio.current_time() + self._open_timeout)
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
