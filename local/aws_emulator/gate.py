"""The request gate in front of moto: one request at a time, SQS long polls that do not
hold the lock, faults, the control path, only the stack's own callers, and connections
kept open (the package's docstring says why each)."""

from __future__ import annotations

import hmac
import io
import json
import logging
import re
import secrets
import socket
import string
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from local.aws_emulator.faults import FAULT_ANSWERS, FaultInjector
from local.aws_emulator.moto_patches import fast_path_users, install_patches

DYNAMODB_TARGET_PREFIX = "DynamoDB_20120810."
# The emulator's own controls (fault rate, delays; counts): a path no AWS API uses.
CONTROL_PATH = "/_relaylink-local/control"
SQS_RECEIVE = "AmazonSQS.ReceiveMessage"
# Requests after which a long poll asks again at once: they can make a message visible.
SQS_ARRIVALS = frozenset(
    f"AmazonSQS.{action}"
    for action in (
        "SendMessage",
        "SendMessageBatch",
        "ChangeMessageVisibility",
        "ChangeMessageVisibilityBatch",
    )
)
LONG_POLL_RECHECK_SECONDS = 0.2
HOLD_POLL_SECONDS = 0.02  # how often a held write looks for its caller's death
MAX_WAIT_TIME_SECONDS = 20  # SQS's limit; other values go to moto, which refuses them
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

# The child learns its key id here, not from its command line (which any user can list).
ACCESS_KEY_ENV = "RELAYLINK_EMULATOR_ACCESS_KEY_ID"
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
_REFUSED = json.dumps(
    {
        "__type": "UnrecognizedClientException",
        "message": "The security token included in the request is invalid.",
    }
).encode()


@dataclass(frozen=True, slots=True)
class EmulatorCredentials:
    """The key pair a local stack's callers sign with; only its key id is checked."""

    access_key_id: str
    secret_access_key: str

    @classmethod
    def generate(cls) -> EmulatorCredentials:
        """A fresh pair: ``LKIA`` and 28 random upper-case letters and digits (about 145
        bits), and a random secret key."""
        alphabet = string.ascii_uppercase + string.digits
        key_id = "LKIA" + "".join(secrets.choice(alphabet) for _ in range(28))
        return cls(access_key_id=key_id, secret_access_key=secrets.token_urlsafe(30))


def _signed_key_id(environ: dict[str, Any]) -> str | None:
    """The access key id a SigV4 request names (header or presigned query), or None."""
    found = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    if found is not None:
        return found.group(1)
    query = parse_qs(environ.get("QUERY_STRING", ""))
    credential = query.get("X-Amz-Credential", [""])[0]
    return credential.partition("/")[0] or None


class _Gate:
    """WSGI middleware: the caller's key first, then faults, then moto under one lock."""

    def __init__(
        self, app: WsgiApp, faults: FaultInjector, access_key_id: str | None = None
    ) -> None:
        self._app = app
        self._faults = faults
        self._access_key_id = access_key_id
        self._lock = threading.Lock()
        self._calls: Counter[str] = Counter()  # requests moto served, per operation
        # CPU seconds of the threads that answered them (WSGI call to answer), per operation.
        self._cpu: dict[str, float] = {}
        self._cpu_lock = threading.Lock()  # not moto's: a tally must not wait for a request
        # Seconds requests waited for the lock, and held it, per operation: what one
        # request at a time costs the others (tallied under the lock itself).
        self._lock_waited: dict[str, float] = {}
        self._lock_held: dict[str, float] = {}
        # Counts requests that can make an SQS message visible; long polls wait on it.
        self._arrivals = threading.Condition()
        self._arrived = 0

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if not self._admits(environ):
            start_response(
                "403 Forbidden",
                [
                    ("Content-Type", "application/x-amz-json-1.0"),
                    ("Content-Length", str(len(_REFUSED))),
                    ("x-amzn-RequestId", uuid.uuid4().hex),
                ],
            )
            return [_REFUSED]
        if environ.get("PATH_INFO") == CONTROL_PATH:
            return self._control(environ, start_response)
        began = time.thread_time()
        try:
            return self._answer(environ, start_response)
        finally:
            spent = time.thread_time() - began
            with self._cpu_lock:
                operation = _operation(environ)
                self._cpu[operation] = self._cpu.get(operation, 0.0) + spent

    def _admits(self, environ: dict[str, Any]) -> bool:
        if self._access_key_id is None:
            return True
        given = _signed_key_id(environ)
        return given is not None and hmac.compare_digest(
            given.encode(), self._access_key_id.encode()
        )

    def _answer(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target.startswith(DYNAMODB_TARGET_PREFIX):
            operation = target.removeprefix(DYNAMODB_TARGET_PREFIX)
            body = b""
            if self._faults.delays_pending(operation):
                body = _read_body(environ)
            delay = self._faults.delay_for(operation, body)
            if delay:
                time.sleep(delay)  # outside the lock: other requests go on
            held = self._faults.hold_for(operation, body)
            if held and _caller_died_within(environ, held):
                # A process killed before its write left: nothing is applied. The
                # answer goes nowhere; it only ends the request.
                return _json_answer(start_response, "500 Internal Server Error", {})
            kind = self._faults.pick()
            if kind is None and self._faults.loses(operation, body):
                self._serve(environ, lambda *_: lambda _data: None)  # applied, answer dropped
                kind = "internal_error"
            if kind is not None:
                status, error_type, message = FAULT_ANSWERS[kind]
                body = json.dumps({"__type": error_type, "message": message}).encode()
                start_response(
                    status,
                    [
                        ("Content-Type", "application/x-amz-json-1.0"),
                        ("Content-Length", str(len(body))),
                        ("x-amzn-RequestId", uuid.uuid4().hex),
                    ],
                )
                return [body]
        if target == SQS_RECEIVE:
            body = _read_body(environ)
            wait = _long_poll_seconds(body)
            if wait:
                return self._long_poll(environ, start_response, body, wait)
        answer = self._serve(environ, start_response)
        if target in SQS_ARRIVALS:
            with self._arrivals:
                self._arrived += 1
                self._arrivals.notify_all()
        return answer

    def _serve(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        operation = _operation(environ)
        asked = time.perf_counter()
        with self._lock:
            acquired = time.perf_counter()
            self._calls[operation] += 1
            result = self._app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
                self._lock_waited[operation] = (
                    self._lock_waited.get(operation, 0.0) + acquired - asked
                )
                self._lock_held[operation] = (
                    self._lock_held.get(operation, 0.0) + time.perf_counter() - acquired
                )

    def _long_poll(
        self, environ: dict[str, Any], start_response: StartResponse, body: bytes, wait: int
    ) -> list[bytes]:
        request = json.loads(body)
        request["WaitTimeSeconds"] = 0
        short_poll = json.dumps(request).encode()
        deadline = time.monotonic() + wait
        answered: list[Any] = []  # status and headers of the last attempt

        def keep(status: str, headers: list[tuple[str, str]], *_: Any) -> Callable[..., None]:
            answered[:] = [status, headers]
            return lambda _data: None

        while True:
            with self._arrivals:
                seen = self._arrived
            attempt = {
                **environ,
                "wsgi.input": io.BytesIO(short_poll),
                "CONTENT_LENGTH": str(len(short_poll)),
            }
            answer = self._serve(attempt, keep)
            remaining = deadline - time.monotonic()
            if (
                remaining <= 0
                or not str(answered[0]).startswith("200")
                or _has_messages(answer[0])
                or _hung_up(environ)
            ):
                start_response(*answered)
                return answer
            with self._arrivals:
                if self._arrived == seen:
                    self._arrivals.wait(min(remaining, LONG_POLL_RECHECK_SECONDS))

    def _control(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        if environ.get("REQUEST_METHOD") == "POST":
            try:
                self._faults.control(json.loads(_read_body(environ) or b"{}"))
            except (ValueError, KeyError, TypeError) as exc:
                return _json_answer(start_response, "400 Bad Request", {"error": str(exc)})
        with self._lock:
            calls = dict(self._calls)
            lock = {"waited": dict(self._lock_waited), "held": dict(self._lock_held)}
        with self._cpu_lock:
            cpu = dict(self._cpu)
        answer = {
            "counts": self._faults.counts(),
            "calls": calls,
            "cpu_seconds": cpu,
            "lock_seconds": lock,
        }
        return _json_answer(start_response, "200 OK", answer)


def _long_poll_seconds(body: bytes) -> int:
    """A valid ``WaitTimeSeconds`` above 0 in a JSON ``ReceiveMessage``; else 0."""
    try:
        wait = json.loads(body).get("WaitTimeSeconds", 0)
    except (ValueError, AttributeError):
        return 0
    return wait if isinstance(wait, int) and 0 < wait <= MAX_WAIT_TIME_SECONDS else 0


def _has_messages(body: bytes) -> bool:
    try:
        return bool(json.loads(body).get("Messages"))
    except (ValueError, AttributeError):
        return True  # not an answer to wait on: hand it over


def _hung_up(environ: dict[str, Any]) -> bool:
    """Whether the caller closed its connection (a killed worker): the poll ends, so
    that no message is received for nobody. A waiting caller sends nothing, so a
    readable socket that peeks empty is closed."""
    connection: socket.socket | None = environ.get("werkzeug.socket")
    if connection is None:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _caller_died_within(environ: dict[str, Any], seconds: float) -> bool:
    """Wait (outside the lock) until the caller hangs up or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _hung_up(environ):
            return True
        time.sleep(HOLD_POLL_SECONDS)
    return False


def _operation(environ: dict[str, Any]) -> str:
    """``DynamoDB_20120810.Query`` -> ``Query``; a REST call (S3) -> ``s3 PUT``."""
    target: str = environ.get("HTTP_X_AMZ_TARGET", "")
    if target:
        return target.rpartition(".")[2]
    return f"s3 {environ.get('REQUEST_METHOD', '')}"


def _json_answer(start_response: StartResponse, status: str, payload: object) -> list[bytes]:
    body = json.dumps(payload).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def _read_body(environ: dict[str, Any]) -> bytes:
    """The request's body, put back so that moto reads it too."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body: bytes = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


class AwsEmulator:
    """moto's server in a thread of this process, behind :class:`_Gate`."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        access_key_id: str | None = None,
    ) -> None:
        """``access_key_id``: the only key id admitted (None: any caller, for a test's
        emulator in its own process)."""
        self.faults = FaultInjector(seed=seed)
        self._access_key_id = access_key_id
        self._host = host
        self._port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._ended: socket.socket | None = None  # see _keep_alive_handler

    @property
    def endpoint_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the emulator is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        from moto.moto_server.werkzeug_app import (  # noqa: PLC0415 (heavy; local only)
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )

        install_patches()
        fast_path_users.append(self)
        # werkzeug logs one line per request, on stderr: noise for the stack's user.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._ended, other_end = socket.socketpair()
        other_end.close()
        app = _Gate(
            DomainDispatcherApplication(create_backend_app), self.faults, self._access_key_id
        )
        self._server = make_server(
            self._host,
            self._port,
            app,
            threaded=True,
            request_handler=_keep_alive_handler(MotoRequestHandler, self._ended),
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="aws-emulator", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self in fast_path_users:
            fast_path_users.remove(self)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._ended is not None:
            self._ended.close()
        self._server = None
        self._thread = None
        self._ended = None


def _keep_alive_handler(
    handler: type[WSGIRequestHandler], ended: socket.socket
) -> type[WSGIRequestHandler]:
    """``handler`` (werkzeug's, as moto customises it) keeping HTTP/1.1 connections open.

    werkzeug answers every request with ``Connection: close`` and then reads whatever
    else the caller sends (waiting up to 10 ms for it), because the standard library's
    server cannot skip a body the application left unread; so every AWS call paid for
    a new connection, a new thread here and a new socket in its caller. This handler
    reads each body whole before the application sees it (from memory then), so that
    the stream stands at the next request line when the answer is out; werkzeug's
    after-answer read then finds an empty stream on ``ended`` (a socket whose other end
    is closed: at its end at once), and the connection stays open unless the caller
    asked to close it.
    """

    class KeepAlive(handler):  # type: ignore[misc,valid-type]
        peer: socket.socket
        connection: socket.socket
        rfile: io.BufferedIOBase

        def setup(self) -> None:
            super().setup()
            # An answer goes out in two writes (head, then body); on an open connection
            # Nagle's algorithm would hold the body until the caller acknowledges the
            # head, which it delays by 40 ms. A closed connection flushed it at once.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def run_wsgi(self) -> None:
            self.peer = self.connection
            if self.close_connection:  # werkzeug's read after the answer harms nothing
                super().run_wsgi()
                return
            stream = self.rfile
            self.connection = ended
            try:
                super().run_wsgi()  # its make_environ leaves an empty stream in rfile
            finally:
                self.connection = self.peer
                self.rfile = stream

        def make_environ(self) -> dict[str, Any]:
            environ: dict[str, Any] = super().make_environ()
            environ["werkzeug.socket"] = self.peer  # a long poll watches it for a hang-up
            if environ.get("wsgi.input_terminated"):  # chunked: read to its last chunk
                environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read())
            else:
                _read_body(environ)
            if not self.close_connection:
                self.rfile = io.BytesIO()  # what werkzeug reads after the answer: nothing
            return environ

        def send_header(self, keyword: str, value: str) -> None:
            # werkzeug's "Connection: close" on every answer; the caller's wish stands.
            if keyword.lower() == "connection" and not self.close_connection:
                return
            super().send_header(keyword, value)

    return KeepAlive
