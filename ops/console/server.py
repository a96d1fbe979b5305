"""Serve a :class:`~ops.console.routes.Console` on 127.0.0.1 with the standard library.

The adapter only parses (path, query, headers, a small urlencoded form) and writes
the answer with headers that keep the token where it is: no referrer, no framing,
scripts and styles from the console itself only, nothing cached.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from local.loopback_http import LoopbackHTTPServer
from ops.console.routes import Console, Request, Response, internal_error

LOOPBACK: Final = "127.0.0.1"
_MAX_FORM_BYTES: Final = 16 * 1024
_SECURITY_HEADERS: Final = (
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
        " img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
)


def _handler_for(console: Console) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "relaylink-console"
        sys_version = ""

        def do_GET(self) -> None:
            self._answer(self._safely(lambda: console.handle(self._request("GET", {}))))

        def do_HEAD(self) -> None:
            response = self._safely(lambda: console.handle(self._request("HEAD", {})))
            self._answer(response, body=False)

        def do_POST(self) -> None:
            self._answer(self._safely(self._post))

        def _post(self) -> Response:
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            if not 0 <= length <= _MAX_FORM_BYTES:
                return Response.json(413, {"error": "form_too_large"})
            text = self.rfile.read(length).decode("utf-8", errors="replace")
            return console.handle(self._request("POST", dict(parse_qsl(text))))

        def _safely(self, answer: Callable[[], Response]) -> Response:
            try:
                return answer()
            # A request the parsing fails on gets a 500 too, never a dropped connection.
            except Exception as exc:  # noqa: BLE001
                return internal_error(exc)

        def _request(self, method: str, form: dict[str, str]) -> Request:
            url = urlsplit(self.path)
            return Request(
                method=method,
                path=url.path,
                query=dict(parse_qsl(url.query)),
                headers={k.lower(): v for k, v in self.headers.items()},
                form=form,
            )

        def _answer(self, response: Response, *, body: bool = True) -> None:
            payload = response.body.encode("utf-8")
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in _SECURITY_HEADERS:
                self.send_header(name, value)
            self.end_headers()
            if body:
                self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            # The request line holds the token: the console logs no request.
            return

    return Handler


def bind(console: Console, port: int = 0) -> LoopbackHTTPServer:
    """A server bound to 127.0.0.1:``port`` (0: a free port); the console learns its port."""
    server = LoopbackHTTPServer((LOOPBACK, port), _handler_for(console))
    console.port = server.server_address[1]
    return server
