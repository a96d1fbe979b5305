"""The local stack's loopback HTTP server: a killed caller's reset is not reported."""

from __future__ import annotations

import http.client
import socket
import struct
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from local.loopback_http import LoopbackHTTPServer
from tests.polling import poll


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        raise ValueError("a bug in the handler")

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Recording(LoopbackHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Failing)
        self.errors: list[type[BaseException]] = []

    def handle_error(self, request: object, client_address: object) -> None:
        super().handle_error(request, client_address)
        if (error := sys.exc_info()[1]) is not None:
            self.errors.append(type(error))


@pytest.fixture
def server() -> Iterator[_Recording]:
    running = _Recording()
    threading.Thread(target=running.serve_forever, daemon=True).start()
    yield running
    running.shutdown()
    running.server_close()


def test_a_caller_reset_mid_request_is_not_reported(
    server: _Recording, capfd: pytest.CaptureFixture[str]
) -> None:
    caller = socket.create_connection(("127.0.0.1", server.server_port))
    caller.sendall(b"GET / HTTP/1.1\r\nHost: x")  # the request line, then the caller dies
    caller.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    caller.close()  # SO_LINGER 0: a reset, as a killed process's socket
    poll(lambda: server.errors, bool, deadline_seconds=10)
    assert issubclass(server.errors[0], ConnectionError)
    assert "Traceback" not in capfd.readouterr().err


def test_any_other_error_is_still_reported(
    server: _Recording, capfd: pytest.CaptureFixture[str]
) -> None:
    with socket.create_connection(("127.0.0.1", server.server_port)) as caller:
        caller.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        poll(lambda: server.errors, bool, deadline_seconds=10)
    assert server.errors == [ValueError]
    err = capfd.readouterr().err
    assert "Traceback" in err and "a bug in the handler" in err


class _ReportingNoDelay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = str(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()  # headers and body in two sends, as http.server answers
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_answers_go_out_without_waiting_for_the_callers_ack() -> None:
    """Nagle's algorithm held every answer's body until the caller's delayed ACK."""
    running = LoopbackHTTPServer(("127.0.0.1", 0), _ReportingNoDelay)
    threading.Thread(target=running.serve_forever, daemon=True).start()
    caller = http.client.HTTPConnection("127.0.0.1", running.server_port, timeout=10)
    try:
        caller.request("GET", "/")
        answer = caller.getresponse()
        nodelay = answer.read()
    finally:
        caller.close()
        running.shutdown()
        running.server_close()
    assert answer.status == 200
    assert nodelay == b"1"  # the accepted socket has TCP_NODELAY set
