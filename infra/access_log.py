"""The receiver stage's access-log format, apart from the CDK so the cost model reads it."""

from __future__ import annotations

import json
from typing import Final

# Every field is a fixed $context variable; none of them holds the path or query string.
# Logs are billed per byte (docs/cost.md), so what a line would only repeat is left out:
# the extendedRequestId (an HTTP API's equals its requestId), the method and route key
# (the API has one route; any other request is answered 404, which ``status`` shows),
# the protocol, and the response length (the receiver answers a few fixed bodies). The
# format is compact JSON (ACCESS_LOG_FORMAT): API Gateway writes its separators as given.
ACCESS_LOG_FIELDS: Final = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTimeEpoch",
    "status": "$context.status",
    "responseLatency": "$context.responseLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationLatency": "$context.integrationLatency",
    "errorMessage": "$context.error.message",
    "sourceIp": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
}

ACCESS_LOG_FORMAT: Final = json.dumps(ACCESS_LOG_FIELDS, separators=(",", ":"))
