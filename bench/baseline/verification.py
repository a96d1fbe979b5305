"""What the baseline and the asynchronous peer do before their work: verify the
signature and parse the delivery with our code, and answer as API Gateway would.

Light on purpose: the peer's receiver imports only this (no idempotency layer, no MCP
client), so that its cold start is its own.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from aws_lambda_powertools.utilities import parameters

from functions.core import wire
from functions.core.delivery import InvalidDelivery, parse_delivery
from functions.core.models import WorkItem
from functions.core.signature import SignatureRejected, SigningSecret, read_headers, verify
from functions.receiver.http_request import MalformedEvent, parse_event


def answer(status: int, outcome: str) -> dict[str, Any]:
    """The API Gateway answer with ``{"outcome": outcome}``."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"outcome": outcome}),
        "isBase64Encoded": False,
    }


def verified_work(event: dict[str, Any]) -> WorkItem | dict[str, Any]:
    """The delivery's work item once its signature checks out, or the answer to give
    (rejected, invalid, ignored). Shared with the asynchronous peer's receiver."""
    try:
        request = parse_event(event, max_body_bytes=wire.MAX_BODY_BYTES)
        headers = request.headers
        signed = read_headers(
            delivery_id=headers.get(wire.HEADER_DELIVERY),
            timestamp=headers.get(wire.HEADER_TIMESTAMP),
            signature=headers.get(wire.HEADER_SIGNATURE),
            now=int(time.time()),
        )
        raw = parameters.get_secret(
            os.environ["SIGNING_SECRETS_ARN"], transform="json", max_age=300
        )
        verify(signed, request.body, [SigningSecret.parse(text) for text in raw])
        delivery = parse_delivery(
            request.body,
            header_delivery_id=signed.delivery_id,
            header_event=headers.get(wire.HEADER_EVENT),
        )
    except SignatureRejected:
        return answer(401, "rejected")
    except (MalformedEvent, InvalidDelivery):
        return answer(400, "invalid")
    work = delivery.work_item()
    return answer(200, "ignored") if work is None else work


def work_body(work: WorkItem) -> dict[str, Any]:
    """The work item as the idempotent function (and the peer's queue) takes it."""
    return {
        "delivery_id": work.delivery_id,
        "event": work.event,
        "package_id": work.package_id,
        "mcp_url": work.mcp_url,
    }
