"""``python -m bench.baseline.server --port P``: the baseline receiver over HTTP.

The same shape as the local stack's front door (:mod:`local.front_door`): each POST
becomes the API Gateway HTTP API event and goes into the handler, so both receivers
are measured through the same kind of door.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import uuid
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from local import api_gateway
from local.child import Stop, announce_ready, install_stop_signals, quiet_exit


class Context:
    """A Lambda context whose invocation may last the RelayLink answer deadline."""

    function_name = "baseline"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:baseline"

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


class Door(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        event = api_gateway.http_api_event(
            method=self.command,
            path=url.path,
            query=url.query,
            headers=self.headers.items(),
            body=body,
            source_ip=self.client_address[0],
        )
        from bench.baseline.handler import lambda_handler  # noqa: PLC0415 (imported at start)

        response = api_gateway.http_response(lambda_handler(event, Context()))
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.baseline.server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    install_stop_signals()
    import bench.baseline.handler  # noqa: F401, PLC0415 (pay the cold start before serving)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Door)
    server.daemon_threads = True
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    announce_ready(args.ready_file)
    with contextlib.suppress(Stop):
        serving.join()
    quiet_exit()
    return 0


if __name__ == "__main__":
    main()
