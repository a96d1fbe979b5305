"""A notification receiver for the local runtime and tests: it counts every application.

``POST <path>`` (or ``<path>/``) with an ``Idempotency-Key`` header applies the
notification once more for that key: the sink deliberately does *not* deduplicate,
because the count per key is how tests prove that the worker never repeated the
effect. ``GET <path>/<key>`` answers 200 (applied) or 404 (not) for the worker's
reconcile check; ``GET <path>`` returns ``{key: count}``.

Faults for tests: ``fail_next(n, status)`` answers the next ``n`` POSTs with
``status`` without applying them; ``fail_next(n, status, applied=True)`` applies
them first, as an endpoint behind a gateway that times out after it acted (502, 504).
``NotifySink(deduplicates=True)`` is an endpoint that honours the key: a POST whose
key it already applied answers 200 and changes nothing.

``NotifySinkServer(signing_secret="whsec_...")`` verifies every POST's Standard Webhooks
signature (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``) as any such
receiver would, with the very check the receiver applies to RelayLink
(:mod:`functions.core.signature`): a POST without a valid one is answered 401 and
counted in ``unsigned``, never applied.

Run it alone with ``python -m local.notify_sink --port 8766``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any, Final

from functions.core.signature import SignatureRejected, SigningSecret, read_headers, verify
from local.loopback_http import LoopbackHTTPServer

NOTIFY_PATH: Final = "/notify"
KEY_HEADER: Final = "Idempotency-Key"
_MAX_BODY: Final = 64 * 1024


class NotifySink:
    """The sink's state; thread-safe (the server handles requests in threads)."""

    def __init__(self, *, deduplicates: bool = False, signing_secret: str | None = None) -> None:
        self._lock = threading.Lock()
        self._keys = [] if signing_secret is None else [SigningSecret.parse(signing_secret)]
        self.unsigned = 0  # POSTs refused for want of a valid signature
        self._applied: Counter[str] = Counter()
        self._bodies: dict[str, Any] = {}
        self._fail_next = 0
        self._fail_status = 503
        self._fail_applied = False
        self.deduplicates = deduplicates
        self.requests = 0
        self.posts: Counter[str] = Counter()  # every POST per key, applied or not
        self.lookups: Counter[str] = Counter()  # every reconcile check (GET) per key

    def reset(self, *, deduplicates: bool = False) -> None:
        """Forget every application and fault (a server shared by several tests)."""
        with self._lock:
            self._applied.clear()
            self._bodies.clear()
            self.posts.clear()
            self.lookups.clear()
            self.unsigned = 0
            self._fail_next, self.requests = 0, 0
            self.deduplicates = deduplicates

    def fail_next(self, count: int, status: int = 503, *, applied: bool = False) -> None:
        with self._lock:
            self._fail_next, self._fail_status, self._fail_applied = count, status, applied

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._applied)

    def body(self, key: str) -> Any:
        with self._lock:
            return self._bodies.get(key)

    def apply(self, key: str, body: Any) -> int:
        with self._lock:
            self.requests += 1
            self.posts[key] += 1
            failing = self._fail_next > 0
            if failing:
                self._fail_next -= 1
            acts = not failing or self._fail_applied
            if acts and not (self.deduplicates and self._applied[key]):
                self._applied[key] += 1
                self._bodies[key] = body
            return self._fail_status if failing else 200

    @property
    def verifies(self) -> bool:
        """Whether this sink checks signatures (it was given a signing secret)."""
        return bool(self._keys)

    def signed(self, headers: Any, body: bytes) -> bool:
        """Whether ``body`` carries a valid signature (always, for a sink without a key)."""
        if not self._keys:
            return True
        try:
            signed = read_headers(
                delivery_id=headers.get("webhook-id"),
                timestamp=headers.get("webhook-timestamp"),
                signature=headers.get("webhook-signature"),
                now=int(time.time()),
            )
            verify(signed, body, self._keys)
        except SignatureRejected:
            with self._lock:
                self.unsigned += 1
            return False
        return True

    def was_applied(self, key: str) -> bool:
        with self._lock:
            self.requests += 1
            self.lookups[key] += 1
            return self._applied[key] > 0


def _handler(sink: NotifySink, path: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: tests run many requests

        def _answer(self, status: int, payload: Any = None) -> None:
            data = json.dumps(payload if payload is not None else {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.path.rstrip("/") != path:
                self._answer(404)
                return
            key = self.headers.get(KEY_HEADER, "")
            length = int(self.headers.get("Content-Length") or 0)
            if not key or length > _MAX_BODY:
                self._answer(400)
                return
            raw = self.rfile.read(length)
            if not sink.signed(self.headers, raw):
                self._answer(401)
                return
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                self._answer(400)
                return
            self._answer(sink.apply(key, body))

        def do_GET(self) -> None:
            if self.path.rstrip("/") == path:
                self._answer(200, sink.counts())
                return
            prefix = path + "/"
            if not self.path.startswith(prefix):
                self._answer(404)
                return
            key = urllib.parse.unquote(self.path[len(prefix) :])
            self._answer(200 if sink.was_applied(key) else 404)

    return Handler


class NotifySinkServer:
    """The sink on 127.0.0.1 in a background thread; ``with NotifySinkServer() as s:``."""

    def __init__(
        self,
        *,
        port: int = 0,
        path: str = NOTIFY_PATH,
        deduplicates: bool = False,
        signing_secret: str | None = None,
    ) -> None:
        self.sink = NotifySink(deduplicates=deduplicates, signing_secret=signing_secret)
        self._server = LoopbackHTTPServer(("127.0.0.1", port), _handler(self.sink, path))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.path = path

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The ``NOTIFY_URL`` to configure."""
        return f"http://127.0.0.1:{self.port}{self.path}"

    @property
    def effects_url(self) -> str:
        """``GET`` it for ``{key: count}``."""
        return self.url

    def start(self) -> NotifySinkServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (the CLI)."""
        try:
            self._server.serve_forever()
        finally:
            self._server.server_close()

    def __enter__(self) -> NotifySinkServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--path", default=NOTIFY_PATH)
    args = parser.parse_args(argv)
    server = NotifySinkServer(port=args.port, path=args.path)
    print(f"notify sink on {server.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
