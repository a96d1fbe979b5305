"""Integration fixtures: a real MCP server (the official SDK's) on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.mcp_server import RunningServer, start_in_thread

MCP_TEST_TOKEN = "test-mcp-token"


@pytest.fixture(scope="session")
def _mcp_server_session() -> Iterator[RunningServer]:
    server = start_in_thread(token=MCP_TEST_TOKEN)
    yield server
    server.stop()


@pytest.fixture
def mcp_server(_mcp_server_session: RunningServer) -> Iterator[RunningServer]:
    """The demo MCP server with no latency, no failures and zeroed counters.

    Yields a handle with ``url``, ``token``, ``requests`` (HTTP requests received),
    ``controls`` (more counters) and the setters ``set_latency_ms``,
    ``set_failure_rate`` and ``set_legacy_only``; what a test sets is undone
    afterwards. The server is shared by the whole session.
    """
    server = _mcp_server_session
    server.set_latency_ms(0)
    server.set_failure_rate(0.0, seed=0)
    server.set_legacy_only(False)
    server.controls.reset_counters()
    yield server
    server.set_latency_ms(0)
    server.set_failure_rate(0.0, seed=0)
    server.set_legacy_only(False)
