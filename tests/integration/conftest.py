"""Integration fixtures: a real MCP server (the official SDK's) and the Bedrock emulator
on 127.0.0.1, and a server there that accepts connections and never answers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from local.aws_emulator import AwsEmulator
from local.bedrock_emulator import RunningEmulator
from local.bedrock_emulator import start_in_thread as start_bedrock_emulator
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


@pytest.fixture(scope="module")
def _emulator_module() -> Iterator[RunningEmulator]:
    with start_bedrock_emulator() as running:
        yield running


@pytest.fixture
def emulator(_emulator_module: RunningEmulator) -> Iterator[RunningEmulator]:
    """The module's Bedrock emulator with no faults and zeroed counters."""
    _emulator_module.emulator.reset()
    yield _emulator_module
    _emulator_module.emulator.reset()


class BlackHole:
    """A loopback server that accepts every connection and never answers on any."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/mcp"

    @property
    def connections(self) -> int:
        return len(self._held)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            self._take(connection)

    def _take(self, connection: socket.socket) -> None:
        self._held.append(connection)  # held open, never read, never answered

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for connection in self._held:
            connection.close()
        self._listener.close()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    hole = BlackHole()
    yield hole
    hole.close()


@pytest.fixture(scope="module")
def aws_emulator() -> Iterator[AwsEmulator]:
    """The local stack's AWS emulator (moto's server behind its gate) in this process."""
    running = AwsEmulator()
    running.start()
    try:
        yield running
    finally:
        running.stop()
