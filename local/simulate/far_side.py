"""The far side of every effect, reached through the REAL adapters over fake transports.

The HTTP adapters (:class:`~functions.workflows.adapters.alert_http.HttpAlerts`,
:class:`~functions.core.adapters.notifier_http.HttpNotifier`) get a fake urllib opener,
the AWS ones (SNS, Bedrock Converse, S3) a fake client object that raises botocore's own
exceptions, so the simulator runs each adapter's own mapping of answers to outcomes and
finds a wrong one. Every request draws one far-side fault (:data:`~local.simulate.
schedule.FAR_SIDE`): refused (never sent), rejected (a definite 4xx), unavailable (503 or
throttled, nothing done), acted then failed (a 5xx after acting), acted with the answer
lost (a timeout), or slow. The AWS clients retry as the wiring configures them
(:mod:`functions.workflows.wiring`: Bedrock's ``total_max_attempts``, SNS's one attempt),
because a retry the SDK hides is exactly what the model-call invariant looks for.
"""

from __future__ import annotations

import asyncio
import email.message
import io
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, Final

from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from functions.core.adapters.notifier_http import IDEMPOTENCY_HEADER
from functions.core.budget import budget_day
from functions.core.deadline import Deadline
from functions.core.errors import PackageNotFound, TransientError
from functions.core.package import Package
from functions.workflows.tool_loop import tool_record_name
from functions.workflows.tools import Tool, ToolMode
from local.simulate.faults import Fault, Kind
from local.simulate.schedule import FAR_SIDE, MCP_FETCH
from local.simulate.world import World

REQUEST_SECONDS: Final = 0.05
SLOW_SECONDS: Final = (30, 240)  # a slow far side: past a client's timeout, maybe the Lambda's
ENDPOINT: Final = "https://far-side.invalid"
DEFINITE: Final = (Kind.REFUSED, Kind.REJECTED)
ACTS: Final = (Kind.ACTED_THEN_FAILED, Kind.ACTED_ANSWER_LOST, Kind.SLOW)


def _request(world: World, name: str, *, rates: Any = FAR_SIDE) -> Kind | None:
    """One request to far side ``name``: its fault (None: it answers as asked)."""
    world.alive()
    world.t += REQUEST_SECONDS
    side = world.far_side(name)
    fault: Fault | None
    if side.slow is not None and side.slow[0] <= world.t < side.slow[1]:
        world.t += side.slow[2]  # a slow spell: every request takes this long
        world.alive()
    if side.down(world.t):
        world.t += side.outage_seconds
        world.alive()
        return Kind.UNAVAILABLE
    fault = world.draw(f"far.{name}", rates)
    if fault is None:
        return None
    if fault.kind is Kind.KILL_BEFORE:
        world.kill()
    if fault.kind is Kind.SLOW:
        world.t += world.rng.uniform(*SLOW_SECONDS)
    return fault.kind


# --- HTTP (urllib) ------------------------------------------------------------------


class _Response:
    def __init__(self, status: int) -> None:
        self.status = status

    def read(self, amount: int | None = None) -> bytes:
        return b"{}"[:amount]

    def __enter__(self) -> _Response:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None


def _http_error(url: str, status: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError(url, status, "far side", email.message.Message(), io.BytesIO())


class FakeOpener:
    """What an HTTP adapter's ``direct_opener()`` returns, answering as far side ``name``.

    A POST is the effect (keyed by its ``Idempotency-Key``); a GET of ``<url>/<key>``
    is the reconcile lookup (200 applied, 404 not).
    """

    def __init__(self, world: World, name: str) -> None:
        self._world = world
        self._name = name

    def open(self, request: urllib.request.Request, timeout: float | None = None) -> _Response:
        del timeout
        url = request.full_url
        if request.get_method() == "GET":
            return self._lookup(url)
        headers = {k.lower(): v for k, v in request.header_items()}
        key = headers[IDEMPOTENCY_HEADER.lower()]
        world, name = self._world, self._name
        kind = _request(world, name)
        if kind is Kind.REFUSED:
            world.refused(name, key, definite=True)
            raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
        if kind is Kind.REJECTED:
            world.refused(name, key, definite=True)
            raise _http_error(url, 400)
        if kind is Kind.UNAVAILABLE:
            world.refused(name, key, definite=False)
            raise _http_error(url, 503)
        self._world.acted(self._name, key)
        body = request.data if isinstance(request.data, bytes) else b""
        world.far_side(name).received.append((key, body.decode()))
        if kind is Kind.ACTED_THEN_FAILED:
            raise _http_error(url, 502)
        if kind in (Kind.ACTED_ANSWER_LOST, Kind.SLOW):
            raise TimeoutError("timed out")
        return _Response(200)

    def _lookup(self, url: str) -> _Response:
        key = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        kind = _request(self._world, self._name + ".lookup")
        if kind in (Kind.UNAVAILABLE, Kind.ACTED_THEN_FAILED, Kind.REJECTED):
            raise _http_error(url, 503)
        if kind in (Kind.REFUSED,):
            raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
        if kind in (Kind.ACTED_ANSWER_LOST, Kind.SLOW):
            raise TimeoutError("timed out")
        if self._world.far_side(self._name).applied[key]:
            return _Response(200)
        raise _http_error(url, 404)


# --- AWS clients ----------------------------------------------------------------------


def _client_error(operation: str, code: str, status: int) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": "far side"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, operation)


def _retryable(exc: Exception) -> bool:
    """What botocore's standard retry mode retries: throttling, 5xx, transient I/O."""
    if isinstance(exc, ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        return status >= 500 or exc.response.get("Error", {}).get("Code") == "ThrottlingException"
    return isinstance(exc, (EndpointConnectionError, ReadTimeoutError))


def _aws_outcome(
    world: World, name: str, key: str, operation: str, content: str | None = None
) -> None:
    """One HTTP attempt of an AWS call to far side ``name``: acts (on ``content``, when
    it is judged), or raises."""
    kind = _request(world, name)
    if kind is Kind.REFUSED:
        world.refused(name, key, definite=True)
        raise EndpointConnectionError(endpoint_url=ENDPOINT)
    if kind is Kind.REJECTED:
        world.refused(name, key, definite=True)
        raise _client_error(
            operation, "ThrottlingException", 400 if operation != "PutObject" else 503
        )
    if kind is Kind.UNAVAILABLE:
        world.refused(name, key, definite=False)
        raise _client_error(operation, "ServiceUnavailableException", 503)
    world.acted(name, key)
    if content is not None:
        world.far_side(name).received.append((key, content))
    if kind is Kind.ACTED_THEN_FAILED:
        raise _client_error(operation, "InternalServerException", 500)
    if kind in (Kind.ACTED_ANSWER_LOST, Kind.SLOW):
        raise ReadTimeoutError(endpoint_url=ENDPOINT)


def _with_retries(attempts: int, call: Any) -> Any:
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (ClientError, EndpointConnectionError, ReadTimeoutError) as exc:
            if attempt == attempts or not _retryable(exc):
                raise
    raise AssertionError("unreachable")


class FakeSnsClient:
    """``publish`` as the SNS client the wiring builds (its retries, one attempt)."""

    def __init__(self, world: World, name: str, *, attempts: int) -> None:
        self._world = world
        self._name = name
        self._attempts = attempts

    def publish(self, **request: Any) -> dict[str, Any]:
        key = request["MessageAttributes"]["idempotency_key"]["StringValue"]
        message = str(request["Message"])
        _with_retries(
            self._attempts,
            lambda: _aws_outcome(self._world, self._name, key, "Publish", message),
        )
        return {"MessageId": "m"}


class FakeS3Client:
    """``put_object`` for the archive (a put of the same bytes: repeatable)."""

    def __init__(self, world: World, name: str) -> None:
        self._world = world
        self._name = name

    def put_object(self, **request: Any) -> dict[str, Any]:
        key = str(request["Key"])
        _with_retries(1, lambda: _aws_outcome(self._world, self._name, key, "PutObject"))
        return {}


class FakeBedrockClient:
    """``converse`` as the Bedrock Runtime client the wiring builds, with its retries.

    A model run spends tokens on the budget day the worker reserved for (the truth the
    budget invariant compares with the limit).
    """

    def __init__(self, world: World, *, attempts: int) -> None:
        self._world = world
        self._attempts = attempts
        members = {"requestMetadata": object()}
        shape = SimpleNamespace(members=members)
        operation = SimpleNamespace(input_shape=shape)
        self.meta = SimpleNamespace(
            service_model=SimpleNamespace(operation_model=lambda _name: operation)
        )

    def converse(self, **request: Any) -> dict[str, Any]:
        delivery_id = request["requestMetadata"]["delivery_id"]
        blocks = [block for m in request["messages"] for block in m["content"]]
        text = "".join(b["text"] for b in request["system"]) + "".join(
            str(block.get("text") or block.get("toolResult") or "") for block in blocks
        )
        input_tokens = math.ceil(len(text) / 4)
        max_tokens = int(request["inferenceConfig"]["maxTokens"])
        # Offered the ticket tool, the model calls it once before it answers.
        offered = any(
            t["toolSpec"]["name"] == TICKET_TOOL
            for t in request.get("toolConfig", {}).get("tools", [])
        )
        call = offered and not any("toolResult" in block for block in blocks)
        return _with_retries(  # type: ignore[no-any-return]
            self._attempts,
            lambda: self._attempt(delivery_id, input_tokens, max_tokens, call_tool=call),
        )

    def _attempt(
        self, delivery_id: str, input_tokens: int, max_tokens: int, *, call_tool: bool = False
    ) -> dict[str, Any]:
        world = self._world
        output_tokens = world.rng.randint(1, max_tokens)
        side = world.far_side("model")
        before = side.applied[delivery_id]
        try:
            _aws_outcome(world, "model", delivery_id, "Converse")
        finally:
            if side.applied[delivery_id] > before:  # it ran, whatever the answer
                self._spent(delivery_id, input_tokens + output_tokens)
        if call_tool:
            use = {"toolUseId": TICKET_USE_ID, "name": TICKET_TOOL, "input": {"about": delivery_id}}
            return {
                "output": {"message": {"role": "assistant", "content": [{"toolUse": use}]}},
                "stopReason": "tool_use",
                "usage": {"inputTokens": input_tokens, "outputTokens": output_tokens},
            }
        return {
            "output": {"message": {"role": "assistant", "content": [{"text": "A summary."}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": input_tokens, "outputTokens": output_tokens},
        }

    def _spent(self, delivery_id: str, tokens: int) -> None:
        world = self._world
        world.truth.model_runs[delivery_id] += 1
        day = world.notes.reservation_day or budget_day(world.now())
        world.truth.consumed[day] += tokens


# --- an acting tool ------------------------------------------------------------------

TICKET_TOOL: Final = "open_ticket"
TICKET_USE_ID: Final = "tooluse-1"


def ticket_tool(world: World) -> Tool:
    """A ``keyed`` acting tool: it opens a ticket at a far side that deduplicates on the
    key (named as the ledger names the tool use's effect); each request draws a fault."""
    side = tool_record_name(TICKET_USE_ID)

    def run(tool_input: dict[str, Any], key: str) -> object:
        kind = _request(world, side)
        if kind in DEFINITE or kind is Kind.UNAVAILABLE:
            world.refused(side, key, definite=kind in DEFINITE)
            raise TransientError("ticket_unavailable")
        world.acted(side, key)
        world.far_side(side).received.append((key, canonical_json(tool_input)))
        if kind is not None:
            raise TransientError("ticket_unknown")  # acted; the answer failed or was lost
        return {"ticket": key}

    return Tool(
        name=TICKET_TOOL,
        description="Open a ticket for the team about this package.",
        input_schema={"type": "object", "properties": {"about": {"type": "string"}}},
        mode=ToolMode.KEYED,
        run=run,
    )


def canonical_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# --- MCP --------------------------------------------------------------------------


class Packages:
    """The batch's package source (``BatchPackageSource``): the MCP server as a far side."""

    def __init__(
        self,
        world: World,
        missing: frozenset[str],
        *,
        changing: bool = False,
        fetched: Counter[str] | None = None,
    ) -> None:
        self._world = world
        self._missing = missing
        self._unreachable: set[str] = set()
        # ``changing``: a package id answered again (a second fetch, of any batch) has
        # other content each time; ``fetched`` counts the answers, across batches.
        self._changing = changing
        self._fetched = Counter[str]() if fetched is None else fetched

    def unreachable(self, mcp_url: str) -> bool:
        return mcp_url in self._unreachable

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        # The request is on the wire: the batch's other messages run meanwhile (their
        # claims are taken before this one's workflow runs, as with a thread each).
        await asyncio.sleep(0)
        down = self._world.far_side("mcp").down(self._world.t)
        kind = _request(self._world, "mcp", rates=MCP_FETCH)
        if down or kind in (Kind.REFUSED, Kind.SLOW):  # a server down refuses connections
            self._unreachable.add(mcp_url)  # a transport failure: the batch stops using it
            raise TransientError("mcp_unreachable")
        if kind is not None:
            raise TransientError("mcp_unavailable")
        if package_id in self._missing:
            raise PackageNotFound()
        self._fetched[package_id] += 1
        briefing = "Two crates of apples, delivered to the loading dock."
        if self._changing and self._fetched[package_id] > 1:
            briefing += f" Amended ({self._fetched[package_id]}): one crate came back."
        return Package(
            package_id=package_id,
            title=f"Package {package_id}",
            briefing=briefing,
            attachments=(),
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )


def package_source(world: World, missing: frozenset[str], *, changing: bool = False) -> Any:
    """The worker's ``PackageSourceFactory``: one source per batch (one server behind)."""
    fetched: Counter[str] = Counter()

    @asynccontextmanager
    async def source(_deadline: Deadline) -> AsyncIterator[Packages]:
        yield Packages(world, missing, changing=changing, fetched=fetched)

    return source
