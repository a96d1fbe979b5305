"""Answering botocore requests in process: canned responses, injected faults, moto in turn.

Every function here registers first on ``before-send``: botocore takes the first
response a handler returns and sends nothing over the network.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from io import BytesIO
from typing import TYPE_CHECKING, Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

if TYPE_CHECKING:
    from botocore.awsrequest import AWSPreparedRequest
    from botocore.client import BaseClient

UNSERVED_URL = "https://fault-injection.invalid/"


def answer_first(
    client: BaseClient, event: str, handler: Callable[..., AWSResponse | None]
) -> None:
    """Register ``handler`` first on a ``before-send`` event: its response is the one used."""
    # botocore-stubs type every event handler as returning None; a before-send
    # handler's return value is the response botocore uses.
    client.meta.events.register_first(event, handler)  # type: ignore[arg-type]


class _RawBody(BytesIO):
    """A raw body with the ``stream()`` botocore reads responses through."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


def aws_response(
    request: AWSPreparedRequest,
    status: int,
    body: bytes,
    *,
    content_type: str,
    request_id: str,
) -> AWSResponse:
    """The response an AWS JSON endpoint would give ``request``, made in process."""
    headers = HTTPHeaders.from_dict({"Content-Type": content_type, "x-amzn-RequestId": request_id})
    return AWSResponse(request.url, status, headers, _RawBody(body))


def divert_from_emulator(request: AWSPreparedRequest) -> None:
    """Make an already-answered request one that moto's ``before-send`` handler skips.

    moto answers only URLs of AWS endpoints; this one is not. botocore never sends it:
    a response was already given, and the first response wins.
    """
    request.url = UNSERVED_URL


def inject_dynamodb_error(
    client: BaseClient,
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

    def answer(request: AWSPreparedRequest, **_: object) -> AWSResponse | None:
        if times is not None and len(intercepted) >= times:
            return None
        intercepted.append(1)
        response = aws_response(
            request,
            status,
            body,
            content_type="application/x-amz-json-1.0",
            request_id="injected",
        )
        divert_from_emulator(request)
        return response

    answer_first(client, f"before-send.dynamodb.{operation}", answer)
    return intercepted


def serialize_moto(clients: list[BaseClient], *, services: tuple[str, ...] = ("dynamodb",)) -> None:
    """Let moto answer these clients' requests one at a time, as one DynamoDB would.

    moto's in-process backend is not thread-safe: two threads' conditional updates
    of one item can both pass their condition. Concurrency tests that mean "racing
    callers" serialize at the transport; each caller still interleaves freely
    between its own requests.
    """
    from moto.core.models import botocore_stubber  # noqa: PLC0415 (moto runs only)

    lock = threading.Lock()

    def one_at_a_time(
        request: AWSPreparedRequest, event_name: str, **kwargs: Any
    ) -> AWSResponse | None:
        with lock:
            response = botocore_stubber(event_name=event_name, request=request, **kwargs)
        divert_from_emulator(request)  # answered: moto's own hook must skip it
        return response

    for client in clients:
        for service in services:
            answer_first(client, f"before-send.{service}", one_at_a_time)
