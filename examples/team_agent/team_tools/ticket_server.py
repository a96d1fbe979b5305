"""The team's ticket system, stood in on loopback: one ticket per ``Idempotency-Key``.

``python -m team_tools.ticket_server --port 9000`` serves ``POST /tickets`` (a
repeated key opens nothing new), ``GET /tickets/<key>`` (200: that key's ticket is
there; 404: not) and ``GET /tickets``: ``{"posts": {key: POSTs}, "tickets": n,
"lookups": n}``, so a run can show every key was POSTed and ticketed once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import urllib.parse
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Tickets:
    """The POSTs per key, and the tickets opened (one per key); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.posts: Counter[str] = Counter()
        self.lookups = 0

    def post(self, key: str) -> bool:
        """Count a POST; True when it opened a ticket (a key not seen before)."""
        with self._lock:
            self.posts[key] += 1
            return self.posts[key] == 1

    def has(self, key: str) -> bool:
        with self._lock:
            self.lookups += 1
            return key in self.posts

    def view(self) -> dict[str, Any]:
        with self._lock:
            return {"posts": dict(self.posts), "tickets": len(self.posts), "lookups": self.lookups}


def serve(tickets: Tickets, *, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server for ``tickets`` (not yet serving: call ``serve_forever``)."""

    class Handler(BaseHTTPRequestHandler):
        # Headers and body go out in two sends: without this, the body waits for
        # the caller's delayed ACK (about 40 ms on Linux).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        def answer(self, status: int, payload: object) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            key = self.headers.get("Idempotency-Key")
            if not key:
                self.answer(400, {"error": "an Idempotency-Key header is required"})
                return
            opened = tickets.post(key)
            self.answer(201 if opened else 200, {"ticket": key, "opened": opened})

        def do_GET(self) -> None:
            path = urllib.parse.urlsplit(self.path).path.rstrip("/")
            if path.count("/") < 2:
                self.answer(200, tickets.view())
                return
            key = urllib.parse.unquote(path.rsplit("/", 1)[1])
            found = tickets.has(key)
            self.answer(200 if found else 404, {"ticket": key, "found": found})

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m team_tools.ticket_server")
    parser.add_argument("--port", type=int, default=9000)
    args = parser.parse_args(argv)
    server = serve(Tickets(), port=args.port)
    print(f"tickets on http://127.0.0.1:{server.server_address[1]}/tickets", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
