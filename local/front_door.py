"""The front door: ``POST /relaylink`` on 127.0.0.1, into the real receiver handler.

Runs as its own process (``python -m local.front_door``) so that it can be killed
and restarted without touching the worker side. Each request becomes the API
Gateway HTTP API event the deployed API would produce (:mod:`local.api_gateway`);
the handler reads its settings from the environment, as in Lambda, and reaches
the emulator through ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any, Final
from urllib.parse import urlsplit

from infra.config import StackConfig
from local import api_gateway, lambda_logging
from local.child import (
    LambdaContext,
    Stop,
    announce_ready,
    exit_with_parent,
    install_stop_signals,
    quiet_exit,
)
from local.loopback_http import LoopbackHTTPServer

# API Gateway's own payload limit: larger requests never reach the function.
API_GATEWAY_MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
# Invocations at once. The process is one container whose handler's clients keep
# botocore's default 10 connections: a burst of hundreds at once made every request
# beyond them open a connection to the emulator and drop it after one call (a new
# thread there each time, and a warning here), which cost more CPU than the receipts.
# The rest wait for a free one, as requests wait for a Lambda environment.
CONCURRENT_INVOCATIONS = 10


class ReplayClock:
    """A clock that starts at a given epoch second, and runs or stands still."""

    def __init__(self, start: int, *, frozen: bool) -> None:
        self._start = start
        self._frozen = frozen
        self._started = time.monotonic()

    def now(self) -> int:
        if self._frozen:
            return self._start
        return self._start + int(time.monotonic() - self._started)


Invoke = Callable[[dict[str, Any], Any], dict[str, Any]]


class FrontDoor(BaseHTTPRequestHandler):
    """API Gateway for one function: set ``invoke`` and ``function_name`` in a subclass."""

    invoke: Invoke
    invocations: threading.BoundedSemaphore
    function_name = "receiver"
    remaining_ms = 8_000  # the receiver Lambda's timeout (infra/receiver.py)
    server_version = "relaylink-local"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length_text = self.headers.get("Content-Length", "0")
        try:
            length = int(length_text)
        except ValueError:
            length = -1
        if length < 0 or length > API_GATEWAY_MAX_PAYLOAD_BYTES:
            self.close_connection = True
            self._answer(api_gateway.TOO_LARGE)
            return
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        if self.command != api_gateway.ROUTE_METHOD or url.path != api_gateway.ROUTE_PATH:
            self._answer(api_gateway.NOT_FOUND)
            return
        event = api_gateway.http_api_event(
            method=self.command,
            path=url.path,
            query=url.query,
            headers=self.headers.items(),
            body=body,
            source_ip=self.client_address[0],
        )
        invoke = type(self).invoke
        with self.invocations:
            context = LambdaContext(self.function_name, remaining_ms=self.remaining_ms)
            result = invoke(event, context)
        self._answer(api_gateway.http_response(result))

    def _answer(self, response: api_gateway.HttpResponse) -> None:
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the access line would carry the path, which may hold a token."""


class _BurstServer(LoopbackHTTPServer):
    """Takes a burst's connections as API Gateway does, instead of refusing all but the
    listen backlog's default five: up to the stage's default burst (infra/config.py)."""

    request_queue_size = StackConfig().api_burst_limit


class _SharedPortServer(_BurstServer):
    """A front door with containers: a restarted one binds its port while a killed
    one's containers may still be on their way out. Only then, so that two stacks never
    share a port unnoticed."""

    allow_reuse_port = True


def _die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux): a container
    never outlives its front door, however the door was stopped."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before the call
        os._exit(0)


_PR_SET_PDEATHSIG: Final = 1


def _start_containers(server: _BurstServer, count: int) -> list[int]:
    """Fork ``count`` more containers that accept from the same listening socket, as
    API Gateway spreads a burst over Lambda environments; returns their pids. Forked
    before any thread starts, so each child is a clean copy."""
    pids: list[int] = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            _die_with_parent()
            with contextlib.suppress(Stop, KeyboardInterrupt):
                server.serve_forever()
            os._exit(0)
        pids.append(pid)
    return pids


def door_for(
    invoke: Invoke, *, name: str = "receiver", remaining_ms: int = FrontDoor.remaining_ms
) -> type[FrontDoor]:
    """The request handler class of a front door into ``invoke``."""
    return type(
        "Door",
        (FrontDoor,),
        {
            "invoke": staticmethod(invoke),
            "invocations": threading.BoundedSemaphore(CONCURRENT_INVOCATIONS),
            "function_name": name,
            "remaining_ms": remaining_ms,
        },
    )


def serve(
    invoke: Invoke,
    *,
    port: int,
    ready_file: str | None,
    name: str = "receiver",
    remaining_ms: int = FrontDoor.remaining_ms,
    containers: int = 1,
) -> None:
    """Serve ``POST /relaylink`` into ``invoke`` until SIGTERM/SIGINT, then exit quietly.

    ``containers`` processes serve at once (this one and forked copies), each running
    :data:`CONCURRENT_INVOCATIONS` invocations at once."""
    server_class = _SharedPortServer if containers > 1 else _BurstServer
    server = server_class(
        ("127.0.0.1", port), door_for(invoke, name=name, remaining_ms=remaining_ms)
    )
    server.daemon_threads = True
    children = _start_containers(server, containers - 1)
    exit_with_parent()
    serving = threading.Thread(target=server.serve_forever, name="front-door", daemon=True)
    serving.start()
    announce_ready(ready_file)
    with contextlib.suppress(Stop):
        serving.join()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    quiet_exit()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.front_door", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ready-file")
    parser.add_argument(
        "--clock-start",
        type=int,
        help="start the receiver's clock at this epoch second (to replay recorded requests)",
    )
    parser.add_argument(
        "--freeze-clock",
        action="store_true",
        help="stop the receiver's clock at its start (replaying boundary cases exactly)",
    )
    parser.add_argument(
        "--containers",
        type=int,
        default=1,
        help="receiver processes serving at once, as Lambda runs several environments",
    )
    args = parser.parse_args(argv)
    install_stop_signals()
    lambda_logging.install()  # as Lambda's runtime does, before it imports the handler
    from functions.receiver import handler  # noqa: PLC0415 (pay the cold start before serving)

    if args.clock_start is not None:
        from functions.receiver.settings import Settings  # noqa: PLC0415

        clock = ReplayClock(args.clock_start, frozen=args.freeze_clock)
        handler.container_deps.set(handler.build_deps(Settings.from_env(os.environ), clock=clock))

    serve(
        handler.lambda_handler,
        port=args.port,
        ready_file=args.ready_file,
        containers=args.containers,
    )
    return 0


if __name__ == "__main__":
    main()
