"""How long one exchange with an MCP server may take, from the one ``MCP_TIMEOUT_SECONDS``.

Standard library only: the worker's time budget per message is built from these
bounds, and infra checks at synth that the budget fits the worker's timeout.
"""

from __future__ import annotations

from typing import Final

# Connecting is quick or it is not happening; reading may wait on the server's work.
MAX_CONNECT_TIMEOUT_SECONDS: Final = 5.0


def connect_timeout(mcp_timeout_seconds: float) -> float:
    """Seconds to establish a connection: the MCP timeout, but never more than 5 s."""
    return min(float(mcp_timeout_seconds), MAX_CONNECT_TIMEOUT_SECONDS)


def open_time_bound(connect_timeout: float, read_timeout: float) -> float:
    """Longest the opening of a session may take.

    Auto mode probes ``server/discover`` and falls back to ``initialize`` on older
    servers: two round trips.
    """
    return 2 * (connect_timeout + read_timeout)


def call_time_bound(connect_timeout: float, read_timeout: float) -> float:
    """Longest one tool call may take (the SDK's read timeout bounds each wait in it)."""
    return connect_timeout + read_timeout


def fetch_time_bound(connect_timeout: float, read_timeout: float) -> float:
    """Longest one ``get_package`` may take: a session opened, then one call."""
    return open_time_bound(connect_timeout, read_timeout) + call_time_bound(
        connect_timeout, read_timeout
    )
