"""AWS on loopback for the local stack: moto's server, one port, every service.

Three things are added in front of moto, all local-only:

* **One request at a time.** moto's backends are not thread-safe; DynamoDB is
  linearizable per item. A lock around each request gives the emulator that
  property, so two racing ``TransactWriteItems`` cannot both pass their conditions.
  Nothing local long-polls SQS (a long poll would hold the lock).
* **Fault injection.** At a settable rate, a DynamoDB request is answered with
  ``ThrottlingException`` (400) or ``InternalServerError`` (500) *before* moto sees
  it, so the caller learns of a failure that wrote nothing, as DynamoDB promises.
* **A transaction path that does not copy tables.** moto backs every
  ``TransactWriteItems`` up with a deep copy of each table it touches (stream
  records included), so each transaction costs time in proportion to the table.
  Transactions of ``Put``/``Delete``/``ConditionCheck`` only (the receiver's) are
  checked first and applied after, under the lock, which is atomic without a copy.
  ``docs/local.md`` has the measured effect.
"""

from __future__ import annotations

import io
import json
import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server

DYNAMODB_TARGET_PREFIX = "DynamoDB_20120810."
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

    def pick(self) -> str | None:
        """The fault for the next DynamoDB request, or None to let it through."""
        with self._lock:
            if self._rate <= 0.0 or self._random.random() >= self._rate:
                return None
            kind = self._random.choice(sorted(_FAULTS))
            self._counts[kind] += 1
            return kind


class _Gate:
    """WSGI middleware: faults first, then moto under one lock."""

    def __init__(self, app: WsgiApp, faults: FaultInjector) -> None:
        self._app = app
        self._faults = faults
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
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
        with self._lock:
            result = self._app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()


def _read_body(environ: dict[str, Any]) -> bytes:
    """The request's body, put back so that moto reads it too."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body: bytes = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


class AwsEmulator:
    """moto's server in a thread of this process, behind :class:`_Gate`."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, seed: int = 0) -> None:
        self.faults = FaultInjector(seed=seed)
        self._host = host
        self._port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

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

        install_fast_transactions()
        _fast_path_users.append(self)
        # werkzeug logs one line per request, on stderr: noise for the stack's user.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        app = _Gate(DomainDispatcherApplication(create_backend_app), self.faults)
        self._server = make_server(
            self._host, self._port, app, threaded=True, request_handler=MotoRequestHandler
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
        self._server = None
        self._thread = None


_installed = False
# moto's backends are process-wide: the copy-free path is on only while an emulator
# runs, so that in-process moto tests (mock_aws) keep moto's own implementation.
_fast_path_users: list[AwsEmulator] = []


def install_fast_transactions() -> None:
    """Replace moto's ``transact_write_items`` with a copy-free path (see module doc)."""
    global _installed  # noqa: PLW0603 (patch once per process)
    if _installed:
        return
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
    _installed = True
