"""What API Gateway's HTTP API (payload format 2.0) hands the receiver, and gives back.

The front door turns a raw HTTP request into exactly this event, so the local
stack exercises the receiver through the same shape the deployed API produces:
header names lower-cased, repeated headers joined with commas, cookies apart,
and the body base64-encoded unless it is text (HTTP API's rule).
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

ROUTE_PATH = "/relaylink"
ROUTE_METHOD = "POST"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")


def _is_text(content_type: str | None, body: bytes) -> bool:
    if content_type is None:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    if not (media.startswith(_TEXT_TYPES) or media.endswith(("+json", "+xml"))):
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def http_api_event(
    *,
    method: str,
    path: str,
    query: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    source_ip: str,
    now: float | None = None,
) -> dict[str, Any]:
    """The payload-2.0 event for one request on the ``POST /relaylink`` route."""
    joined: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    epoch = time.time() if now is None else now
    stamp = datetime.fromtimestamp(epoch, UTC)
    request_id = uuid.uuid4().hex[:16]
    route_key = f"{ROUTE_METHOD} {ROUTE_PATH}"
    text = _is_text(joined.get("content-type"), body)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": query,
        "headers": joined,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": joined.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": joined.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route_key,
            "stage": "$default",
            "time": stamp.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(epoch * 1000),
        },
        "isBase64Encoded": not text,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        pairs = (part.partition("=") for part in query.split("&") if part)
        event["queryStringParameters"] = {name: value for name, _, value in pairs}
    if body:
        event["body"] = body.decode("utf-8") if text else base64.b64encode(body).decode("ascii")
    return event


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes


def http_response(result: Mapping[str, Any]) -> HttpResponse:
    """The HTTP answer API Gateway makes of a payload-2.0 handler result."""
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode("utf-8")
    headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
    headers.setdefault("content-type", "application/json")
    return HttpResponse(status=int(result.get("statusCode", 200)), headers=headers, body=body)


NOT_FOUND = HttpResponse(404, {"content-type": "application/json"}, b'{"message":"Not Found"}')
TOO_LARGE = HttpResponse(
    413, {"content-type": "application/json"}, b'{"message":"Request Entity Too Large"}'
)
