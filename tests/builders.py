"""Builders for the tests of every layer: signed requests, API Gateway events, vectors.

Signing here is written from the contract (docs/contract.md, Signature) with ``hmac``
directly, not with ``functions.core.signature``, so that a test which signs with this module and
verifies with the receiver exercises two implementations, as the vectors do.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import os
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

from botocore.awsrequest import AWSResponse

from functions.core.models import InboxItem, State

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR_ENV = "RELAYLINK_SHARED_DIR"

# Test-only secrets (never used outside tests). Two, for rotation tests.
SECRET = "whsec_" + base64.b64encode(b"relaylink-test-secret-number-one").decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"relaylink-test-secret-number-two").decode()
PACKAGE_ID = "pkg_01JE7Q9V5K3M8N2P4R6T"
MCP_URL = "https://mcp.relaylink.example/mcp"
EVENT_PACKAGE_RECEIVED = "package.received"


# --- Signing (docs/contract.md, Signature) ---------------------------------------------


def sign(secret: str, *, delivery_id: str, timestamp: int | str, body: bytes) -> str:
    """``v1,<base64>`` for one attempt, signed with a ``whsec_`` secret."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    message = f"{delivery_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, message, hashlib.sha256).digest()).decode()


def new_delivery_id() -> str:
    """A fresh canonical (lower-case 8-4-4-4-12) delivery id."""
    return str(uuid.uuid4())


def delivery_body(
    delivery_id: str,
    *,
    event: str = EVENT_PACKAGE_RECEIVED,
    package_id: str | None = PACKAGE_ID,
    mcp_url: str | None = MCP_URL,
    created_at: str = "2025-12-02T15:04:00Z",
    **extra: Any,
) -> bytes:
    """The JSON body RelayLink would send (compact, UTF-8); ``None`` fields are left out."""
    data: dict[str, Any] = {"delivery_id": delivery_id, "event": event, "created_at": created_at}
    if package_id is not None:
        data["package_id"] = package_id
    if mcp_url is not None:
        data["mcp_url"] = mcp_url
    data.update(extra)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def signed_headers(
    body: bytes,
    *,
    delivery_id: str,
    timestamp: int,
    secrets: str | list[str] = SECRET,
    event: str = EVENT_PACKAGE_RECEIVED,
    attempt: int = 1,
) -> dict[str, str]:
    """RelayLink's request headers, with one ``v1`` signature per secret."""
    secret_list = [secrets] if isinstance(secrets, str) else secrets
    signature = " ".join(
        sign(s, delivery_id=delivery_id, timestamp=timestamp, body=body) for s in secret_list
    )
    return {
        "Content-Type": "application/json",
        "X-RelayLink-Delivery": delivery_id,
        "X-RelayLink-Event": event,
        "X-RelayLink-Timestamp": str(timestamp),
        "X-RelayLink-Signature": signature,
        "X-RelayLink-Attempt": str(attempt),
        "User-Agent": "RelayLink/1.0",
    }


@dataclass(frozen=True)
class SignedRequest:
    """One attempt as it leaves RelayLink."""

    headers: dict[str, str]
    body: bytes

    @property
    def delivery_id(self) -> str:
        return self.headers["X-RelayLink-Delivery"]


def signed_request(
    *,
    timestamp: int,
    delivery_id: str | None = None,
    secrets: str | list[str] = SECRET,
    event: str = EVENT_PACKAGE_RECEIVED,
    body: bytes | None = None,
    attempt: int = 1,
    **body_fields: Any,
) -> SignedRequest:
    """A correctly signed request; ``body`` overrides the default body entirely."""
    delivery_id = delivery_id or new_delivery_id()
    if body is None:
        if event != EVENT_PACKAGE_RECEIVED:
            body_fields.setdefault("package_id", None)
            body_fields.setdefault("mcp_url", None)
        body = delivery_body(delivery_id, event=event, **body_fields)
    headers = signed_headers(
        body,
        delivery_id=delivery_id,
        timestamp=timestamp,
        secrets=secrets,
        event=event,
        attempt=attempt,
    )
    return SignedRequest(headers, body)


# --- API Gateway events -------------------------------------------------------------


def http_api_event(
    headers: dict[str, str],
    body: bytes | str,
    *,
    base64_encoded: bool = False,
    path: str = "/relaylink/hook-token-abc123",
    method: str = "POST",
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event, header names lower-cased."""
    raw = body.encode() if isinstance(body, str) else body
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {name.lower(): value for name, value in headers.items()},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api1234567",
            "domainName": "api1234567.execute-api.us-east-1.amazonaws.com",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.10",
                "userAgent": headers.get("User-Agent", ""),
            },
            "requestId": "req-" + uuid.uuid4().hex[:12],
            "routeKey": f"{method} {path}",
            "stage": "$default",
            "time": "02/Dec/2025:15:04:05 +0000",
            "timeEpoch": 1764687845000,
        },
        "body": base64.b64encode(raw).decode() if base64_encoded else raw.decode(),
        "isBase64Encoded": base64_encoded,
    }


def rest_api_event(
    headers: dict[str, str],
    body: bytes | str,
    *,
    base64_encoded: bool = False,
    path: str = "/relaylink/hook-token-abc123",
) -> dict[str, Any]:
    """An API Gateway REST API (payload format 1.0) event; header case is kept."""
    raw = body.encode() if isinstance(body, str) else body
    return {
        "resource": path,
        "path": path,
        "httpMethod": "POST",
        "headers": dict(headers),
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": None,
        "requestContext": {"requestId": "req-" + uuid.uuid4().hex[:12], "stage": "prod"},
        "body": base64.b64encode(raw).decode() if base64_encoded else raw.decode(),
        "isBase64Encoded": base64_encoded,
    }


def event_for(request: SignedRequest, *, base64_encoded: bool = False) -> dict[str, Any]:
    """The HTTP API event API Gateway would hand the receiver for ``request``."""
    return http_api_event(request.headers, request.body, base64_encoded=base64_encoded)


@dataclass
class LambdaContext:
    """The attributes of a Lambda context object that Powertools reads."""

    function_name: str = "receiver"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:receiver"
    memory_limit_in_mb: int = 256
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/receiver"
    log_stream_name: str = "2025/12/02/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


# --- Time and AWS observation -------------------------------------------------------


@dataclass
class FixedClock:
    """A clock that says what the test tells it (``functions.core.clock.Clock``)."""

    value: int

    def now(self) -> int:
        return self.value


class AwsCalls:
    """Counts the AWS API calls of the clients it watches, via botocore event hooks.

    ``before-call`` fires once per API call (SDK retries not included);
    ``before-send`` fires once per HTTP attempt (retries included).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.attempts: Counter[tuple[str, str]] = Counter()

    def watch(self, *clients: Any) -> None:
        for client in clients:
            client.meta.events.register("before-call", self._on_call)
            client.meta.events.register_first("before-send", self._on_send)

    def _on_call(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[(model.service_model.service_name, model.name)] += 1

    def _on_send(self, event_name: str, **_: Any) -> None:
        _prefix, service, operation = event_name.split(".", 2)
        with self._lock:
            self.attempts[(service, operation)] += 1

    def count(self, service: str | None = None) -> int:
        with self._lock:
            return sum(n for (s, _), n in self.calls.items() if service in (None, s))

    def operations(self, service: str | None = None) -> list[str]:
        with self._lock:
            return sorted(f"{op}x{n}" for (s, op), n in self.calls.items() if service in (None, s))

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.attempts.clear()


class _RawBody(BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


UNSERVED_URL = "https://fault-injection.invalid/"


def divert_from_emulator(request: Any) -> None:
    """Make an already-answered request one that moto's ``before-send`` handler skips.

    moto answers only URLs of AWS endpoints; this one is not. botocore never sends it:
    a response was already given, and the first response wins.
    """
    request.url = UNSERVED_URL


def inject_dynamodb_error(
    client: Any,
    operation: str,
    *,
    code: str,
    status: int = 400,
    extra: dict[str, Any] | None = None,
    times: int | None = None,
) -> list[int]:
    """Make HTTP attempts of ``operation`` on ``client`` fail with ``code``.

    Registered first on ``before-send``, so its answer is the one botocore uses; after
    ``times`` failures (None: never) attempts go through again. botocore calls every
    ``before-send`` handler (the first response wins), so moto would still execute the
    request: the injector points it at a host no emulator serves (see
    :func:`divert_from_emulator`). Returns a list that grows by one per intercepted attempt.
    """
    intercepted: list[int] = []
    error = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": "injected"}
    body = json.dumps({**error, **(extra or {})}).encode()

    def answer(request: Any, **_: Any) -> AWSResponse | None:
        if times is not None and len(intercepted) >= times:
            return None
        intercepted.append(1)
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "injected"}
        response = AWSResponse(request.url, status, headers, _RawBody(body))
        divert_from_emulator(request)
        return response

    client.meta.events.register_first(f"before-send.dynamodb.{operation}", answer)
    return intercepted


# --- The shared vectors (../shared/vectors/deliveries.json; never edited) --------


# A byte-for-byte copy of the shared vectors, for clones that have no ``shared/``
# beside them (CI); tests/unit/test_vendored_vectors.py keeps the two identical.
VENDORED_VECTORS = REPO_ROOT / "tests" / "vectors" / "deliveries.json"
VENDORED_VECTORS_SHA256 = "649c8afab435e9170e182490c3063342a81f35d5bf7a8978280dd9833d906bdd"


def shared_dir() -> Path:
    """``$RELAYLINK_SHARED_DIR``, else ``shared/`` beside the repository root."""
    override = os.environ.get(SHARED_DIR_ENV)
    return Path(override) if override else REPO_ROOT.parent / "shared"


def vectors_file() -> Path:
    """The shared vectors: from ``shared/`` when it is there, else the vendored copy."""
    shared = shared_dir() / "vectors" / "deliveries.json"
    return shared if shared.exists() else VENDORED_VECTORS


@dataclass(frozen=True)
class VectorRequest:
    headers: dict[str, str]
    body: bytes  # the exact bytes: the vector's text encoded as UTF-8
    expect_status: int
    expect_outcome: str


@dataclass(frozen=True)
class VectorCase:
    name: str
    secrets: list[str]
    request: VectorRequest


@dataclass(frozen=True)
class VectorSequence:
    name: str
    secrets: list[str]
    steps: list[VectorRequest]
    expect_work_items: int


@dataclass(frozen=True)
class Vectors:
    now: int
    cases: list[VectorCase]
    sequences: list[VectorSequence]


def _vector_request(step: dict[str, Any]) -> VectorRequest:
    return VectorRequest(
        headers=dict(step["request"]["headers"]),
        body=step["request"]["body"].encode(),
        expect_status=int(step["expect"]["status"]),
        expect_outcome=str(step["expect"]["outcome"]),
    )


def load_vectors() -> Vectors:
    """Read the shared delivery vectors into typed values."""
    data = json.loads(vectors_file().read_text(encoding="utf-8"))
    return Vectors(
        now=int(data["now"]),
        cases=[
            VectorCase(c["name"], list(c["secrets"]), _vector_request(c)) for c in data["cases"]
        ],
        sequences=[
            VectorSequence(
                s["name"],
                list(s["secrets"]),
                [_vector_request(step) for step in s["steps"]],
                int(s["expect_work_items"]),
            )
            for s in data["sequences"]
        ],
    )


def serialize_moto(clients: list[Any], *, services: tuple[str, ...] = ("dynamodb",)) -> None:
    """Let moto answer these clients' requests one at a time, as one DynamoDB would.

    moto's in-process backend is not thread-safe: two threads' conditional updates
    of one item can both pass their condition. Concurrency tests that mean "racing
    callers" serialize at the transport; each caller still interleaves freely
    between its own requests.
    """
    from moto.core.models import botocore_stubber  # noqa: PLC0415 (moto tests only)

    lock = threading.Lock()

    def one_at_a_time(request: Any, event_name: str, **kwargs: Any) -> Any:
        with lock:
            response = botocore_stubber(event_name=event_name, request=request, **kwargs)
        divert_from_emulator(request)  # answered: moto's own hook must skip it
        return response

    for client in clients:
        for service in services:
            client.meta.events.register_first(f"before-send.{service}", one_at_a_time)


# --- Stored items ------------------------------------------------------------------


def inbox_item(delivery_id: str, *, received_at: int, **changes: Any) -> InboxItem:
    """A pending inbox item received (and last changed) at ``received_at``; 30-day TTL."""
    item = InboxItem(
        delivery_id=delivery_id,
        event=EVENT_PACKAGE_RECEIVED,
        body_sha256="0" * 64,
        received_at=received_at,
        state=State.PENDING,
        expires_at=received_at + 30 * 86400,
        package_id=PACKAGE_ID,
        mcp_url=MCP_URL,
        state_changed_at=received_at,
    )
    return dataclasses.replace(item, **changes)
