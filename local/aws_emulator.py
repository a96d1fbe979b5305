"""AWS on loopback for the local stack: moto's server, one port, every service.

Three things are added in front of moto, all local-only:

* **One request at a time.** moto's backends are not thread-safe; DynamoDB is
  linearizable per item. A lock around each request gives the emulator that
  property, so two racing ``TransactWriteItems`` cannot both pass their conditions.
* **SQS long polling that does not hold that lock.** A ``ReceiveMessage`` with
  ``WaitTimeSeconds`` is asked of moto as a short poll, again after every request
  that can make a message visible (a send, a visibility change) and every
  :data:`LONG_POLL_RECHECK_SECONDS` (delays and visibility timeouts end by
  themselves), until a message comes, the wait ends or the caller hangs up. moto's
  own long poll would sleep inside the lock and stop every other request.
* **Fault injection.** At a settable rate, a DynamoDB request is answered with
  ``ThrottlingException`` (400) or ``InternalServerError`` (500) *before* moto sees
  it, so the caller learns of a failure that wrote nothing, as DynamoDB promises.
* **A transaction path that does not copy tables.** moto backs every
  ``TransactWriteItems`` up with a deep copy of each table it touches (stream
  records included), so each transaction costs time in proportion to the table.
  Transactions of ``Put``/``Delete``/``ConditionCheck`` only (the receiver's) are
  checked first and applied after, under the lock, which is atomic without a copy.
  ``docs/local.md`` has the measured effect.
* **Queries that do not sort the table.** moto sorts every item of a table before
  each ``Query`` (and then sorts the matches again); a ``Query`` here reads only the
  partition it names, or, on a global index, the items filed under the index
  partition it names (kept up to date by every write), unsorted, and moto sorts the
  matches as before. Same answers, same pages.
* **DynamoDB item answers written straight to JSON.** moto's response serializer
  walks every attribute of every item against the API's shapes; an answer to an item
  operation that is already plain JSON data (strings, numbers, lists, maps; no binary
  attribute) is written with the serializer's own framing, without the walk. Same
  bytes on the wire.
* **Stream records written straight to JSON.** The same for ``GetRecords``: each
  record's images went through that walk (about 1 ms a record); its one timestamp is
  written as the serializer writes it, in epoch seconds.
* **SQS without recounting the queue.** moto computes every attribute of a queue,
  its three approximate message counts included (each a pass over every message),
  whenever it reads one attribute: on every send, and for every message it receives.
  Here the counts are computed only for a ``GetQueueAttributes`` that asks for them.
* **Update and condition expressions checked once.** For every ``UpdateItem`` moto
  deep-copies the expression's parse tree and walks it with ten processors, three of
  which read only the expression, its names and the table's keys; and it parses each
  condition expression from its text on every request (twice for a conditional
  write). Here the copy is unpickled, those three checks run once per expression
  that passes them, the walk tests node types once per class, and a condition's
  syntax tree is kept per expression and names and given each request's values.
  Same answers, the same errors (a test replays valid and invalid requests both ways).
* **One size check per item built.** moto checks an item's size as each attribute
  goes in, measuring all the others every time; here once, when it is built (the
  last check is the largest; a refused item is built by moto again, so it fails as
  it would have).
* **Connections kept open.** werkzeug closes the connection after every answer, so
  each AWS call cost a new connection, a thread here and a socket in its caller;
  here a request's body is read whole before moto sees it, and the connection stays
  open for the caller's next request (see :func:`_keep_alive_handler`).
* **Per-request work done once.** For every request moto lists its own package
  directory on disk, lists its response class's methods, and parses an update
  expression twice; the emulator remembers each answer (they never change while it
  runs).

* **Only the stack's own callers.** Given an access key id (as the local stack's
  emulator always is: :class:`AwsEmulatorProcess` generates one per run and hands it to
  the child in its environment, never on its command line), the emulator answers 403
  to every request, its controls included, that is not SigV4-signed with that key id
  (``Credential=`` in the ``Authorization`` header or a presigned URL's query). Another
  user of the machine who finds the loopback port cannot read the stack's secrets.
  The key id is checked, not the signature: it is a random secret of its own, as
  unguessable as a token, and it never leaves loopback.

The emulator runs in its own process (``python -m local.aws_emulator``, started by
:class:`AwsEmulatorProcess`): moto serves one request at a time with the Python
interpreter lock to itself, and its callers (the stack's supervisor, a benchmark's
load) keep theirs. Faults are set, and the requests served per operation read, over
HTTP on :data:`CONTROL_PATH`, a path no AWS API uses, with the CPU time spent
answering them, per operation.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import datetime
import functools
import hmac
import importlib
import io
import json
import logging
import os
import random
import re
import secrets
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from local.child import Stop, announce_ready, exit_with_parent, install_stop_signals, quiet_exit

DYNAMODB_TARGET_PREFIX = "DynamoDB_20120810."
# The emulator's own controls (fault rate, delays; counts): a path no AWS API uses.
CONTROL_PATH = "/_relaylink-local/control"
READY_SECONDS = 60.0
STOP_SECONDS = 5.0
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
MAX_WAIT_TIME_SECONDS = 20  # SQS's limit; other values go to moto, which refuses them
# "" in the repository, "relaylink_receiver." when installed from the wheel.
_PREFIX = (__package__ or "local").removesuffix("local")
_FAULTS = {
    "throttling": (
        "400 Bad Request",
        "com.amazonaws.dynamodb.v20120810#ThrottlingException",
        "Rate of requests exceeds the allowed throughput.",
    ),
    "internal_error": (
        "500 Internal Server Error",
        "com.amazonaws.dynamodb.v20120810#InternalServerError",
        "Internal server error",
    ),
}

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


class FaultInjector:
    """Decides, with a seeded generator, which DynamoDB requests fail, and counts them."""

    def __init__(self, *, rate: float = 0.0, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._random = random.Random(seed)  # noqa: S311 (reproducible faults, not secrets)
        self._rate = rate
        self._counts: Counter[str] = Counter()
        self._delays: dict[str, list[tuple[float, str | None]]] = {}

    def delay_next(
        self, operation: str, seconds: float, *, count: int = 1, containing: str | None = None
    ) -> None:
        """Hold the next ``count`` DynamoDB ``operation`` requests ``seconds`` before moto
        sees them (a slow write: the caller may give up while the write still happens);
        with ``containing``, only requests whose JSON body contains that text (a key)."""
        with self._lock:
            self._delays.setdefault(operation, []).extend([(seconds, containing)] * count)

    def delays_pending(self, operation: str) -> bool:
        with self._lock:
            return bool(self._delays.get(operation))

    def delay_for(self, operation: str, body: bytes = b"") -> float:
        """The hold for this request (0: none), taking it from the pending ones."""
        with self._lock:
            pending = self._delays.get(operation, [])
            for index, (seconds, containing) in enumerate(pending):
                if containing is None or containing.encode() in body:
                    del pending[index]
                    return seconds
            return 0.0

    def set_rate(self, rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError("fault rate must be between 0 and 1")
        with self._lock:
            self._rate = rate

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def control(self, command: dict[str, Any]) -> None:
        """Apply one command sent to :data:`CONTROL_PATH` (see :class:`EmulatorControls`)."""
        if "rate" in command:
            self.set_rate(float(command["rate"]))
        if "delay" in command:
            delay = command["delay"]
            self.delay_next(
                str(delay["operation"]),
                float(delay["seconds"]),
                count=int(delay.get("count", 1)),
                containing=delay.get("containing"),
            )

    def pick(self) -> str | None:
        """The fault for the next DynamoDB request, or None to let it through."""
        with self._lock:
            if self._rate <= 0.0 or self._random.random() >= self._rate:
                return None
            kind = self._random.choice(sorted(_FAULTS))
            self._counts[kind] += 1
            return kind


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
            kind = self._faults.pick()
            if kind is not None:
                status, error_type, message = _FAULTS[kind]
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
        with self._lock:
            self._calls[_operation(environ)] += 1
            result = self._app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()

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
        with self._cpu_lock:
            cpu = dict(self._cpu)
        answer = {"counts": self._faults.counts(), "calls": calls, "cpu_seconds": cpu}
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
        _fast_path_users.append(self)
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
        if self in _fast_path_users:
            _fast_path_users.remove(self)
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


# moto's backends are process-wide: the faster paths are on only while an emulator
# runs, so that in-process moto tests (mock_aws) keep moto's own implementation.
_fast_path_users: list[object] = []


def install_patches() -> None:
    """Every faster path of the module doc (each patches once per process)."""
    install_fast_transactions()
    install_fast_queries()
    install_request_caches()
    install_fast_update_validation()
    install_fast_tree_walks()
    install_condition_templates()
    install_one_size_check_per_item()
    install_plain_dynamodb_answers()
    install_plain_stream_records()
    install_sqs_without_recounts()


@contextlib.contextmanager
def faster_paths() -> Iterator[None]:
    """The emulator's faster paths for in-process moto (``mock_aws``) in the block: a
    benchmark that seeds a large table measures our code, not moto's full scans."""
    install_patches()
    user = object()
    _fast_path_users.append(user)
    try:
        yield
    finally:
        _fast_path_users.remove(user)


@functools.cache  # patch once per process
def install_fast_transactions() -> None:
    """Replace moto's ``transact_write_items`` with a copy-free path (see module doc)."""
    from moto.dynamodb.comparisons import get_filter_expression  # noqa: PLC0415
    from moto.dynamodb.exceptions import (  # noqa: PLC0415
        ConditionalCheckFailed,
        MultipleTransactionsException,
        TransactionCanceledException,
    )
    from moto.dynamodb.models import DynamoDBBackend  # noqa: PLC0415

    copying = DynamoDBBackend.transact_write_items

    def check_then_apply(self: Any, transact_items: list[dict[str, Any]]) -> None:
        operations = [next(iter(item.items())) for item in transact_items if len(item) == 1]
        simple = (
            bool(_fast_path_users)
            and len(operations) == len(transact_items) <= 100
            and all(kind in ("Put", "Delete", "ConditionCheck") for kind, _ in operations)
        )
        if not simple:
            copying(self, transact_items)
            return
        keys: set[tuple[str, str]] = set()
        reasons: list[tuple[str | None, str | None, Any]] = []
        for kind, op in operations:
            table = self.get_table(op["TableName"])
            if kind == "Put":
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            marker = (op["TableName"], json.dumps(key, sort_keys=True))
            if marker in keys:
                raise MultipleTransactionsException()
            keys.add(marker)
            current = self.get_item(op["TableName"], key)
            condition = op.get("ConditionExpression")
            holds = condition is None or get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            ).expr(current)
            if holds:
                reasons.append((None, None, None))
                continue
            old = None
            if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                old = current.to_json()["Attributes"]
            reasons.append(("ConditionalCheckFailed", ConditionalCheckFailed().message, old))
        if any(code is not None for code, _, _ in reasons):
            raise TransactionCanceledException(reasons)
        for kind, op in operations:
            if kind == "Put":
                self.put_item(op["TableName"], op["Item"])
            elif kind == "Delete":
                self.delete_item(op["TableName"], op["Key"])

    DynamoDBBackend.transact_write_items = check_then_apply  # type: ignore[method-assign]


# During a Query: (the table, the partition it names or None, an index's key conditions).
_query_scope: contextvars.ContextVar[tuple[Any, Any, list[tuple[str, Any]]] | None] = (
    contextvars.ContextVar("query_scope", default=None)
)


def _has(item: Any, key: tuple[str, Any]) -> bool:
    """Whether the item's attribute ``key[0]`` is ``key[1]`` (a moto ``DynamoType``)."""
    value = item.attrs.get(key[0])
    return value is not None and bool(value == key[1])


_ItemKey = tuple[Any, Any]  # an item's (hash, range) key in moto's table (range None: none)


class _IndexEntries:
    """A table's items by the value of each global index's partition key attribute.

    Built at the first index query, then kept: every write to the table (moto's
    ``put_item``/``delete_item`` of the table, the backend's in-place ``update_item``)
    marks its key, and the next index query files each marked item again as it is
    then. So a query reads the one index partition it names, not the whole table.
    """

    def __init__(self, table: Any) -> None:
        self.attributes = sorted(
            {
                key["AttributeName"]
                for index in table.global_indexes
                for key in index.schema
                if key["KeyType"] == "HASH"
            }
        )
        self.keys: dict[tuple[str, Any], dict[_ItemKey, None]] = {}
        self.filed: dict[_ItemKey, list[tuple[str, Any]]] = {}
        self.marked: set[_ItemKey] = set()
        for item in _every_item(table):
            self._file((item.hash_key, item.range_key), item)

    def _file(self, key: _ItemKey, item: Any) -> None:
        values = [(name, item.attrs[name]) for name in self.attributes if name in item.attrs]
        for value in values:
            self.keys.setdefault(value, {})[key] = None
        if values:
            self.filed[key] = values

    def items(self, table: Any, attribute: str, value: Any) -> list[Any]:
        for key in self.marked:
            for old in self.filed.pop(key, []):
                self.keys.get(old, {}).pop(key, None)
            item = _table_item(table, key)
            if item is not None:
                self._file(key, item)
        self.marked.clear()
        found = (_table_item(table, key) for key in self.keys.get((attribute, value), {}))
        return [item for item in found if item is not None]


_index_entries: weakref.WeakKeyDictionary[Any, _IndexEntries] = weakref.WeakKeyDictionary()


def _every_item(table: Any) -> Iterator[Any]:
    for partition in table.items.values():
        if table.range_key_attr is None:
            yield partition
        else:
            yield from partition.values()


def _table_item(table: Any, key: _ItemKey) -> Any:
    partition = table.items.get(key[0])
    if partition is None or table.range_key_attr is None:
        return partition
    return partition.get(key[1])


def _mark(table: Any, key: _ItemKey) -> None:
    entries = _index_entries.get(table)
    if entries is not None:
        entries.marked.add(key)


@functools.cache  # patch once per process
def install_index_marks() -> None:
    """Mark each written key in its table's :class:`_IndexEntries` (when it has them)."""
    from moto.dynamodb.exceptions import MockValidationException  # noqa: PLC0415
    from moto.dynamodb.models import DynamoDBBackend  # noqa: PLC0415
    from moto.dynamodb.models.table import Table  # noqa: PLC0415

    moto_put = Table.put_item
    moto_delete = Table.delete_item
    moto_update = DynamoDBBackend.update_item

    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = moto_put(self, *args, **kwargs)
        _mark(self, (item.hash_key, item.range_key))
        return item

    def delete_item(self: Any, hash_key: Any, range_key: Any = None) -> Any:
        _mark(self, (hash_key, range_key))
        return moto_delete(self, hash_key, range_key)

    def update_item(self: Any, table_name: str, key: Any, *args: Any, **kwargs: Any) -> Any:
        table = self.tables.get(table_name)
        item_key = None
        if table is not None and table in _index_entries:
            with contextlib.suppress(MockValidationException):  # moto refuses it below
                item_key = self.get_keys_value(table, key)
        try:
            return moto_update(self, table_name, key, *args, **kwargs)
        finally:  # moto updates in place: even a refused update is filed again
            if item_key is not None:
                _mark(table, item_key)

    Table.put_item = put_item  # type: ignore[method-assign]
    Table.delete_item = delete_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


@functools.cache  # patch once per process
def install_fast_queries() -> None:
    """Make moto's ``Query`` read without sorting the table (see module doc).

    moto's ``Table.query`` gathers candidates from ``all_items()``, which sorts the
    whole table, then checks and sorts the candidates itself. During a query (and only
    while an emulator runs) ``all_items()`` of that table returns, unsorted, the
    partition it names, or on a global index the items filed under the query's index
    partition key value (:class:`_IndexEntries`; moto checks them again); the scan and
    everything else keep the sorted list.
    """
    from moto.dynamodb.models.table import Table  # noqa: PLC0415

    install_index_marks()
    sorted_items = Table.all_items
    moto_query = Table.query

    def all_items(self: Any) -> list[Any]:
        scope = _query_scope.get()
        if scope is None or scope[0] is not self:
            return sorted_items(self)
        _, partition_key, index_keys = scope
        if partition_key is None and index_keys and self.global_indexes:
            entries = _index_entries.get(self)
            if entries is None:
                entries = _index_entries[self] = _IndexEntries(self)
            attribute, value = index_keys[0]
            if attribute in entries.attributes:
                return entries.items(self, attribute, value)
        partitions = self.items.values()
        if partition_key is not None:
            partitions = [self.items[partition_key]] if partition_key in self.items else []
        if self.range_key_attr is None:
            items = list(partitions)
        else:
            items = [item for partition in partitions for item in partition.values()]
        return [item for item in items if all(_has(item, key) for key in index_keys)]

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        if not _fast_path_users:
            return moto_query(self, hash_key, *args, **kwargs)
        # Positional as moto's backend calls it: index_name is the 8th argument.
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        index_keys = list(kwargs.get("hash_key_conditions") or []) if index_name else []
        scope = (self, None if index_name else hash_key, index_keys)
        token = _query_scope.set(scope)
        try:
            return moto_query(self, hash_key, *args, **kwargs)
        finally:
            _query_scope.reset(token)

    Table.all_items = all_items  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]


@functools.cache  # patch once per process
def install_request_caches() -> None:
    """Remember what moto recomputes on every request (see module doc).

    For the emulator's process only (``main``, or an in-process emulator's start):
    the answers are pure functions of their arguments, so the cache changes no
    answer; an update expression's parse tree is only read by moto's callers (its
    validator works on a deep copy).
    """
    # Typed Any: moto's stubs do not export these names.
    backends: Any = importlib.import_module("moto.backends")
    responses: Any = importlib.import_module("moto.core.responses")
    parser: Any = importlib.import_module("moto.dynamodb.parsing.expressions")

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    responses.method_names_from_class = functools.cache(responses.method_names_from_class)
    parse = functools.lru_cache(maxsize=256)(parser.UpdateExpressionParser.make)
    parser.UpdateExpressionParser.make = staticmethod(parse)


# Update expressions whose expression-only checks passed: (the parse tree's pickle, the
# attribute names, the table's key attributes).
_checked_updates: set[tuple[bytes, tuple[tuple[str, str], ...], tuple[str, ...]]] = set()
MAX_REMEMBERED_EXPRESSIONS = 256
ITEM_SIZE_LIMIT = 405000  # moto's (DynamoDB's 400 KB, as moto measures it)


@functools.cache  # patch once per process
def install_fast_update_validation() -> None:
    """Validate an ``UpdateItem``'s expression without moto's repeated work (see module doc).

    moto's validator deep-copies the cached parse tree, then walks it with ten
    processors. Here the copy is unpickled from the tree's pickle (made once per tree;
    the cached tree is never changed, see :func:`install_request_caches`); the three
    processors that read only the expression, its attribute names and the table's key
    attributes (action counts, overlapping paths, key attributes) run once for each
    combination that passes them (they change nothing, they raise or not); the other
    seven run as before, on every request.
    """
    import pickle  # noqa: PLC0415

    # Typed Any: moto's stubs do not export these names.
    validators: Any = importlib.import_module("moto.dynamodb.parsing.validators")
    nodes: Any = importlib.import_module("moto.dynamodb.parsing.ast_nodes")
    expression_only = (
        validators.ActionCountValidator,
        validators.OverlappingPathsValidator,
        validators.UpdateHashRangeKeyValidator,
    )
    moto_copy = validators.deepcopy
    moto_init = validators.Validator.__init__
    moto_validate = validators.Validator.validate
    pickled: dict[int, tuple[Any, bytes]] = {}  # id(tree) -> (tree, its pickle)

    def pickle_of(tree: Any) -> bytes:
        entry = pickled.get(id(tree))
        if entry is None or entry[0] is not tree:
            if len(pickled) >= MAX_REMEMBERED_EXPRESSIONS:
                pickled.clear()
            entry = pickled[id(tree)] = (tree, pickle.dumps(tree, pickle.HIGHEST_PROTOCOL))
        return entry[1]

    def copy(value: Any, memo: Any = None) -> Any:
        # The validator's copy of a whole parse tree; anything else as moto copies it.
        if _fast_path_users and type(value) is nodes.UpdateExpression:
            return pickle.loads(pickle_of(value))  # noqa: S301 (our own pickle of moto's tree)
        return moto_copy(value, memo)

    def init(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
        moto_init(self, expression, *args, **kwargs)
        self.relaylink_tree = expression

    def validate(self: Any) -> Any:
        tree = getattr(self, "relaylink_tree", None)
        if not _fast_path_users or type(tree) is not nodes.UpdateExpression:
            return moto_validate(self)
        key = (
            pickle_of(tree),
            tuple(sorted((self.expression_attribute_names or {}).items())),
            tuple(self.table.table_key_attrs),
        )
        checked = key in _checked_updates
        node = self.node_to_validate
        for processor in self.processors:
            if not (checked and isinstance(processor, expression_only)):
                node = processor.traverse(node)
        if not checked:
            if len(_checked_updates) >= MAX_REMEMBERED_EXPRESSIONS:
                _checked_updates.clear()
            _checked_updates.add(key)
        return node

    validators.deepcopy = copy
    validators.Validator.__init__ = init
    validators.Validator.validate = validate


@functools.cache  # patch once per process
def install_fast_tree_walks() -> None:
    """moto's ``traverse_node_recursively``, with its two type tests (each through
    ``ABCMeta``) answered once per node class and processor class: every processor's
    node classes are the keys of a literal map (see module doc)."""
    # Typed Any: moto's stubs do not export these names.
    nodes: Any = importlib.import_module("moto.dynamodb.parsing.ast_nodes")
    traverser = nodes.DepthFirstTraverser
    moto_traverse = traverser.traverse_node_recursively
    is_node: dict[type, bool] = {}
    wanted: dict[tuple[type, type], bool] = {}

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        if not _fast_path_users:
            return moto_traverse(self, node, child_id)
        kind = type(node)
        if kind not in is_node:
            is_node[kind] = isinstance(node, nodes.Node)
        if not is_node[kind]:
            return node
        parent_node = node.parent
        if node.children is not None:
            for i, child_node in enumerate(node.children):
                self.pre_processing_of_child(node, i)
                self.traverse_node_recursively(child_node, i)
        pair = (type(self), kind)
        if pair not in wanted:
            wanted[pair] = isinstance(node, self.nodes_to_be_processed())
        if wanted[pair]:
            node = self.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
        return node

    traverser.traverse_node_recursively = traverse_node_recursively


@functools.cache  # patch once per process
def install_condition_templates() -> None:
    """Parse a condition expression once per expression and attribute names (see
    module doc).

    moto parses a condition (or filter) expression on every request, twice for a
    conditional write, and writes each ``:value``'s value into its syntax tree as it
    reads the text. The tree of the first successful parse is kept (its nodes are
    tuples, never changed); a later request with the same expression and names gets a
    copy with its own values, then moto's own last step makes the condition. A request
    whose values the copy cannot take (a missing value) is parsed by moto from scratch,
    so it fails exactly as it would have.
    """
    # Typed Any: moto's stubs do not export these names.
    comparisons: Any = importlib.import_module("moto.dynamodb.comparisons")
    parser_class = comparisons.ConditionExpressionParser
    value_kind = parser_class.Kind.EXPRESSION_ATTRIBUTE_VALUE
    moto_parse = parser_class.parse
    trees: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}

    def with_values(parser: Any, node: Any) -> Any:
        if node.kind == value_kind:
            return node._replace(value=parser._lookup_expression_attribute_value(node.text))
        if not node.children:
            return node
        return node._replace(children=[with_values(parser, child) for child in node.children])

    def parse(self: Any) -> Any:
        if not _fast_path_users or not self.condition_expression:
            return moto_parse(self)
        key = (
            self.condition_expression,
            tuple(sorted((self.expression_attribute_names or {}).items())),
        )
        tree = trees.get(key)
        if tree is None:
            make_op = self._make_op_condition
            roots: list[Any] = []

            def first_is_root(node: Any) -> Any:
                if not roots:
                    roots.append(node)
                return make_op(node)

            self._make_op_condition = first_is_root  # moto's last step, given the tree
            try:
                op = moto_parse(self)
            finally:
                del self._make_op_condition
            if len(trees) >= MAX_REMEMBERED_EXPRESSIONS:
                trees.clear()
            trees[key] = roots[0]
            return op
        try:
            node = with_values(self, tree)
        except Exception:  # noqa: BLE001 (moto's parse raises what it would have)
            return moto_parse(self)
        self.expr_attr_names_found.extend(self._find_literals(node))
        self.expr_attr_values_found.extend(self._find_expr_attr_values(node))
        return self._make_op_condition(node)

    parser_class.parse = parse


@functools.cache  # patch once per process
def install_one_size_check_per_item() -> None:
    """Build an item checking its size once, not once per attribute (see module doc).

    moto's item dict checks, as each attribute goes in, that the attributes already in
    plus the new one stay under DynamoDB's limit, each time measuring every one of them:
    quadratic in the attributes. Sizes are never negative, so while an item is built
    the last check is the largest: it alone decides. An item whose attributes moto
    refuses (too large, or a value it cannot read) is built by moto's own code, so it
    fails exactly as it would have.
    """
    # Typed Any: moto's stubs do not export these names.
    types: Any = importlib.import_module("moto.dynamodb.models.dynamo_type")
    utilities: Any = importlib.import_module("moto.dynamodb.models.utilities")
    item_class, limited, dynamo_type = types.Item, types.LimitedSizeDict, types.DynamoType
    moto_init = item_class.__init__

    def size_of(value: Any) -> int:  # as LimitedSizeDict measures keys and values
        return int(value.size() if type(value) is dynamo_type else utilities.bytesize(str(value)))

    def init(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        if not _fast_path_users:
            moto_init(self, hash_key, range_key, attrs)
            return
        built = limited.__new__(limited)
        dict.__init__(built)
        try:
            for key, value in attrs.items():
                dict.__setitem__(built, key, dynamo_type(value))
            fits = sum(size_of(k) + size_of(v) for k, v in built.items()) <= ITEM_SIZE_LIMIT
        except Exception:  # noqa: BLE001 (moto's own build raises what it would have)
            fits = False
        if not fits:
            moto_init(self, hash_key, range_key, attrs)
            return
        self.hash_key = hash_key
        self.range_key = range_key
        self.attrs = built

    item_class.__init__ = init


# The item operations whose answers may skip the serializer's walk.
PLAIN_ANSWERS = frozenset(
    {
        "BatchGetItem",
        "BatchWriteItem",
        "DeleteItem",
        "GetItem",
        "PutItem",
        "Query",
        "Scan",
        "TransactGetItems",
        "TransactWriteItems",
        "UpdateItem",
    }
)
_BINARY_TYPES = frozenset({"B", "BS"})


class _NotPlain(Exception):
    """A value the serializer must convert (bytes, a date, an object, a binary attribute)."""


def _plain(value: Any, timestamp: Callable[[Any], Any] | None = None) -> Any:
    """``value`` as JSON data, maps without None members (as the serializer drops them);
    with ``timestamp``, a ``datetime`` becomes what it returns.

    Raises:
        _NotPlain: it holds anything else.
    """
    if isinstance(value, dict):
        if _BINARY_TYPES.intersection(value):
            raise _NotPlain
        return {str(k): _plain(v, timestamp) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v, timestamp) for v in value]
    if isinstance(value, str | bool | int | float):
        return value
    if timestamp is not None and isinstance(value, datetime.datetime):
        return timestamp(value)
    raise _NotPlain


def _framed(context: Any, result: Any, plain: Any) -> tuple[Any, Any, Any]:
    """The answer moto's serializer would give ``result``, from its JSON data ``plain``:
    the serializer's own framing (status, content type, body) without its walk."""
    # Typed Any: moto's stubs do not export these names.
    serialize: Any = importlib.import_module("moto.core.serialize")
    settings: Any = importlib.import_module("moto.settings")
    operation = context.operation_model
    serializer = context.serializer_class(
        operation_model=operation,
        pretty_print=settings.PRETTIFY_RESPONSES,
        value_picker=serialize.XFormedAttributePicker(),
    )
    answer = serializer._serialized_result_to_response(
        serializer._create_default_response(), result, operation.output_shape, plain
    )
    return answer["status_code"], answer["headers"], answer["body"]


@functools.cache  # patch once per process
def install_plain_dynamodb_answers() -> None:
    """Write plain DynamoDB item answers without the serializer's walk (see module doc)."""
    # Typed Any: moto's stubs do not export these names.
    responses: Any = importlib.import_module("moto.dynamodb.responses")
    moto_answer = responses.DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        operation = context.operation_model
        if not _fast_path_users or str(operation.name) not in PLAIN_ANSWERS:
            return moto_answer(self, context)
        try:
            plain = _plain(self.result)
        except _NotPlain:
            return moto_answer(self, context)
        return _framed(context, self.result, plain)

    responses.DynamoResult.execute_result = execute_result


@functools.cache  # patch once per process
def install_plain_stream_records() -> None:
    """Write ``GetRecords`` answers without the serializer's walk (see module doc).

    A stream record is plain JSON data but for its ``ApproximateCreationDateTime``, which
    becomes epoch seconds as the serializer writes it (the JSON protocols' default
    format; the shape sets no other).
    """
    # Typed Any: moto's stubs do not export these names.
    core: Any = importlib.import_module("moto.core.responses")
    streams: Any = importlib.import_module("moto.dynamodbstreams.responses")
    serialize: Any = importlib.import_module("moto.core.serialize")
    unix_seconds = serialize.TimestampSerializer._timestamp_unixtimestamp
    moto_get_records = streams.DynamoDBStreamsHandler.get_records

    class PlainRecords(core.ActionResult):  # type: ignore[misc]
        def execute_result(self, context: Any) -> Any:
            if not _fast_path_users:
                return super().execute_result(context)
            try:
                plain = _plain(self.result, unix_seconds)
            except _NotPlain:
                return super().execute_result(context)
            return _framed(context, self.result, plain)

    def get_records(self: Any) -> Any:
        return PlainRecords(moto_get_records(self).result)

    streams.DynamoDBStreamsHandler.get_records = get_records


_counts_wanted: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "counts_wanted", default=False
)


@functools.cache  # patch once per process
def install_sqs_without_recounts() -> None:
    """Compute a queue's approximate counts only when asked for (see module doc)."""
    # Typed Any: moto's stubs do not export these names.
    models: Any = importlib.import_module("moto.sqs.models")
    queue_class, backend_class = models.Queue, models.SQSBackend
    without_counts = [
        name for name in queue_class.BASE_ATTRIBUTES if not name.startswith("Approximate")
    ]
    moto_attributes = queue_class.attributes.fget
    moto_get_attributes = backend_class.get_queue_attributes

    def attributes(self: Any) -> dict[str, Any]:
        if _counts_wanted.get() or not _fast_path_users:
            return dict(moto_attributes(self))
        self.BASE_ATTRIBUTES = without_counts  # this queue, this request (under the lock)
        try:
            return dict(moto_attributes(self))
        finally:
            del self.BASE_ATTRIBUTES

    def get_queue_attributes(self: Any, queue_name: str, names: list[str]) -> Any:
        wanted = any(name == "All" or name.startswith("Approximate") for name in names or ())
        token = _counts_wanted.set(wanted)
        try:
            return moto_get_attributes(self, queue_name, names)
        finally:
            _counts_wanted.reset(token)

    queue_class.attributes = property(attributes)
    backend_class.get_queue_attributes = get_queue_attributes


class EmulatorControls:
    """An emulator in another process, over :data:`CONTROL_PATH`: its fault injector's
    ``set_rate``/``delay_next``/``counts`` (as :class:`FaultInjector`'s), and ``calls``."""

    def __init__(self, endpoint_url: str, access_key_id: str | None = None) -> None:
        self._url = endpoint_url + CONTROL_PATH
        self._headers = (
            {"Authorization": f"AWS4-HMAC-SHA256 Credential={access_key_id}/control"}
            if access_key_id
            else {}
        )

    def set_rate(self, rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError("fault rate must be between 0 and 1")
        self._send({"rate": rate})

    def delay_next(
        self, operation: str, seconds: float, *, count: int = 1, containing: str | None = None
    ) -> None:
        delay = {"operation": operation, "seconds": seconds, "count": count}
        self._send({"delay": {**delay, "containing": containing}})

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = self._send(None)["counts"]
        return counts

    def calls(self) -> dict[str, int]:
        """Requests moto has served, per operation (``Query``, ``SendMessage``, ...)."""
        calls: dict[str, int] = self._send(None)["calls"]
        return calls

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds spent answering requests, per operation (see :meth:`calls`): from
        the WSGI call to its answer, so HTTP parsing and writing are left out."""
        cpu: dict[str, float] = self._send(None)["cpu_seconds"]
        return cpu

    def _send(self, command: dict[str, Any] | None) -> dict[str, Any]:
        data = None if command is None else json.dumps(command).encode()
        request = urllib.request.Request(  # noqa: S310 (loopback only)
            self._url, data=data, headers=self._headers
        )
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            answered: dict[str, Any] = json.load(answer)
        return answered


class AwsEmulatorProcess:
    """The emulator in a child process of its own; stops with its parent.

    ``start()`` returns once it serves; ``faults`` controls it; ``pid`` and
    ``cpu_seconds()`` are for the benchmarks' accounting.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        log_file: Path | None = None,
        credentials: EmulatorCredentials | None = None,
    ) -> None:
        """``credentials``: what its callers sign with (None: a fresh pair); it admits
        no other key id."""
        self.credentials = credentials or EmulatorCredentials.generate()
        self._seed = seed
        self._log_file = log_file
        self._process: subprocess.Popen[bytes] | None = None
        self._port = 0
        self.faults = EmulatorControls("http://127.0.0.1:0")

    @property
    def endpoint_url(self) -> str:
        if self._process is None:
            raise RuntimeError("the emulator is not running")
        return f"http://127.0.0.1:{self._port}"

    @property
    def pid(self) -> int:
        return self._process.pid if self._process is not None else 0

    def start(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self._port = int(probe.getsockname()[1])
        ready = Path(tempfile.mkdtemp(prefix="relaylink-aws-")) / "ready"
        log = self._log_file.open("ab") if self._log_file else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    f"{_PREFIX}local.aws_emulator",
                    "--port",
                    str(self._port),
                    "--seed",
                    str(self._seed),
                    "--ready-file",
                    str(ready),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, ACCESS_KEY_ENV: self.credentials.access_key_id},
                start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor only
            )
        finally:
            if not isinstance(log, int):
                log.close()
        deadline = time.monotonic() + READY_SECONDS
        while not ready.exists():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the AWS emulator did not start")
            time.sleep(0.02)
        ready.unlink()
        ready.parent.rmdir()
        self.faults = EmulatorControls(self.endpoint_url, self.credentials.access_key_id)

    def calls(self) -> dict[str, int]:
        """Requests moto has served, per operation."""
        return self.faults.calls()

    def cpu_seconds(self) -> float:
        """User + system CPU time the emulator process has used so far."""
        return process_cpu_seconds(self.pid)

    def cpu_seconds_by_operation(self) -> dict[str, float]:
        """CPU time spent answering requests so far, per operation (the rest of
        :meth:`cpu_seconds` is its HTTP server's)."""
        return self.faults.cpu_seconds()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux ``/proc``; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # After the command: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.aws_emulator", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    install_stop_signals()
    exit_with_parent()
    access_key_id = os.environ.pop(ACCESS_KEY_ENV, None) or None
    emulator = AwsEmulator(port=args.port, seed=args.seed, access_key_id=access_key_id)
    emulator.start()
    announce_ready(args.ready_file)
    with contextlib.suppress(Stop):
        while True:
            time.sleep(3600)
    quiet_exit()
    return 0


if __name__ == "__main__":
    main()
