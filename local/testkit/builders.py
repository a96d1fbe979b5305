"""Builders of signed RelayLink requests, of the Lambda events that carry them, and of stored items.

Signing here is written from the contract (docs/contract.md, Signature) with
``hmac`` directly, not with ``functions.core.signature``, so that a test which signs
with this module and verifies with the receiver exercises two implementations, as
the vectors do.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from functions.core.delivery import Delivery
from functions.core.models import InboxItem, State
from functions.core.ports.inbox import InboxWriter

# Secrets for tests and the bench only (never a deployment's). Two, for rotation tests.
SECRET = "whsec_" + base64.b64encode(b"relaylink-test-secret-number-one").decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"relaylink-test-secret-number-two").decode()
PACKAGE_ID = "pkg_01JE7Q9V5K3M8N2P4R6T"
MCP_URL = "https://mcp.relaylink.example/mcp"
EVENT_PACKAGE_RECEIVED = "package.received"


# --- Signing (docs/contract.md, Signature) ---------------------------------------


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


# --- Lambda events (the SQS event: local.event_sources.sqs_event) -----------------


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


def stream_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The Lambda event for a batch of DynamoDB stream records."""
    return {"Records": records}


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


def record_new(writer: InboxWriter, item: InboxItem) -> InboxItem | None:
    """Record ``item`` (new: pending or ignored, never changed) through the writer's
    port, as the receiver records an accepted delivery."""
    return writer.record(
        Delivery(item.delivery_id, item.event, item.package_id, item.mcp_url),
        item.work_item(),
        body_sha256=item.body_sha256,
        received_at=item.received_at,
        expires_at=item.expires_at,
    )
