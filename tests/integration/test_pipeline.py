"""End to end, in process: signed request -> receiver -> stream -> relay -> SQS -> worker.

Everything is the production code path (handlers, adapters, the default workflow
loaded from its setting) on moto, the SDK's MCP server and the notify sink. A crash
is a ``BaseException`` raised at one window; no code handles it, as when a Lambda
dies there. The retry then comes the way it would in AWS: the lease runs out (the
injectable clock moves, nobody sleeps), the reconciler re-enqueues the delivery, a
new worker container processes it, and the crashed attempt's own message comes back
later and finds the delivery completed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from functions.core import env_names
from functions.core.deadline import Deadline
from functions.core.models import State
from functions.receiver import handler as receiver_handler
from functions.reconciler import handler as reconciler_handler
from functions.reconciler.settings import Settings as ReconcilerSettings
from functions.relay import handler as relay_handler
from functions.relay.settings import Settings as RelaySettings
from local.mcp_server import RunningServer
from local.notify_sink import NotifySinkServer
from local.testkit.builders import (
    SECRET,
    LambdaContext,
    http_api_event,
    signed_request,
    stream_event,
)
from local.testkit.moto_world import TABLE, MotoWorld, StreamReader
from local.testkit.receiver_rig import make_receiver_rig
from local.testkit.worker_rig import LEASE_SECONDS, WorkerRig, make_worker

# Figures for the closing note: effect applications counted per crash window.
APPLICATIONS: dict[str, int] = {}


class Crash(BaseException):
    """The process dies here."""


def crashed(error: BaseException) -> bool:
    """A crash, possibly wrapped by the MCP fetcher's task group on its way out."""
    if isinstance(error, Crash):
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(crashed(e) for e in error.exceptions)
    return False


class CrashAfter:
    """Delegates to ``target``; the first call of ``method`` completes, then crashes."""

    def __init__(self, target: Any, method: str, *, when: Callable[..., bool] | None = None):
        self._target = target
        self._method = method
        self._when = when or (lambda *a, **k: True)
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._target, name)
        if name != self._method:
            return real

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            if not self.fired and self._when(*args, **kwargs):
                self.fired = True
                raise Crash(name)
            return result

        return wrapped


class CrashBefore(CrashAfter):
    """The first call of ``method`` crashes before it does anything."""

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._target, name)
        if name != self._method:
            return real

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if not self.fired and self._when(*args, **kwargs):
                self.fired = True
                raise Crash(name)
            return real(*args, **kwargs)

        return wrapped


class _CrashAfterFetch:
    """A package source whose first fetch returns the package to nobody."""

    def __init__(self, factory: Any, deadline: Any, state: dict[str, bool]) -> None:
        self._factory = factory
        self._deadline = deadline
        self._state = state

    async def __aenter__(self) -> Any:
        self._inner = self._factory(self._deadline)
        self._source = await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    async def get_package(self, mcp_url: str, package_id: str) -> Any:
        package = await self._source.get_package(mcp_url, package_id)
        if not self._state["fired"]:
            self._state["fired"] = True
            raise Crash("after fetch")
        return package

    def unreachable(self, mcp_url: str) -> bool:
        return bool(self._source.unreachable(mcp_url))


@dataclass
class Pipeline:
    aws: MotoWorld
    stream: StreamReader
    mcp_server: RunningServer
    sink: NotifySinkServer
    reconciler: reconciler_handler.Deps

    def receive(self, *, delivery_id: str | None = None) -> tuple[str, dict[str, Any]]:
        request = signed_request(
            timestamp=self.aws.clock.value,
            delivery_id=delivery_id,
            package_id="pkg_01JE7Q9V5K3M8N2P4R6T",
            mcp_url=self.mcp_server.url,
        )
        response = receiver_handler.lambda_handler(
            http_api_event(request.headers, request.body), LambdaContext()
        )
        return request.delivery_id, response

    def relay(self, records: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        records = StreamReader.filtered(self.stream.new_records()) if records is None else records
        response = relay_handler.lambda_handler(stream_event(records), LambdaContext())
        assert response == {"batchItemFailures": []}
        return records

    def worker(self, wrap: Callable[[Any], Any] | None = None) -> WorkerRig:
        return make_worker(
            self.aws, token=self.mcp_server.token, notify_url=self.sink.url, wrap=wrap
        )

    def applications(self, delivery_id: str) -> int:
        return self.sink.sink.counts().get(f"{delivery_id}:notify", 0)


@pytest.fixture
def pipeline(aws: MotoWorld, stream: StreamReader, mcp_server: RunningServer) -> Iterator[Pipeline]:
    make_receiver_rig(
        aws.dynamodb,
        aws.secretsmanager,
        table=TABLE,
        secret_arn=aws.create_secret(json.dumps([SECRET]), prefix="relaylink-signing"),
        clock=aws.clock,
    )
    relay_handler.container_deps.set(
        relay_handler.build_deps(
            RelaySettings.from_env({env_names.ENV_WORK_QUEUE_URL: aws.queue_url}), sqs=aws.sqs
        )
    )
    reconciler = reconciler_handler.build_deps(
        ReconcilerSettings.from_env(
            {
                env_names.ENV_TABLE_NAME: TABLE,
                env_names.ENV_WORK_QUEUE_URL: aws.queue_url,
                env_names.ENV_LEASE_SECONDS: str(LEASE_SECONDS),
            }
        ),
        dynamodb=aws.dynamodb,
        sqs=aws.sqs,
        clock=aws.clock,
    )
    with NotifySinkServer() as sink:
        try:
            yield Pipeline(aws, stream, mcp_server, sink, reconciler)
        finally:
            receiver_handler.container_deps.reset()
            relay_handler.container_deps.reset()


def test_signed_request_is_processed_to_completion_with_one_effect(pipeline: Pipeline) -> None:
    delivery_id, response = pipeline.receive()
    assert 200 <= response["statusCode"] < 300
    assert json.loads(response["body"])["outcome"] == "accepted"
    assert pipeline.aws.inbox(delivery_id).state is State.PENDING
    records = pipeline.relay()
    assert len(records) == 1
    messages, result = pipeline.worker().run_visible()
    assert len(messages) == 1
    assert result == {"batchItemFailures": []}
    inbox = pipeline.aws.inbox(delivery_id)
    assert (inbox.state, inbox.attempts, inbox.last_error) == (State.COMPLETED, 1, None)
    assert pipeline.applications(delivery_id) == 1
    assert pipeline.aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    # A RelayLink retry of the same delivery is a duplicate: nothing more happens.
    _, again = pipeline.receive(delivery_id=delivery_id)
    assert json.loads(again["body"])["outcome"] == "duplicate"
    assert pipeline.relay() == []
    assert pipeline.applications(delivery_id) == 1


def _claims(deps: Any, crash: Any) -> Any:
    deps.processor.claims = crash(deps.processor.claims)
    return deps


def _effects(deps: Any, crash: Any) -> Any:
    deps.processor.effects = crash(deps.processor.effects)
    return deps


WINDOWS: dict[str, Callable[[Any], Any]] = {
    "after_claim": lambda deps: _claims(deps, lambda c: CrashAfter(c, "claim")),
    "after_fetch": lambda deps: dataclasses.replace(
        deps,
        packages=lambda deadline, factory=deps.packages, state={"fired": False}: _CrashAfterFetch(
            factory, deadline, state
        ),
    ),
    "after_effect_before_done": lambda deps: _effects(
        deps, lambda e: CrashBefore(e, "record_done", when=lambda _d, name, **_: name == "notify")
    ),
    "after_done_before_completed": lambda deps: _claims(deps, lambda c: CrashBefore(c, "complete")),
}


@pytest.mark.parametrize("window", list(WINDOWS))
def test_crash_in_the_worker_then_retry_applies_the_effect_once(
    pipeline: Pipeline, window: str
) -> None:
    delivery_id, _ = pipeline.receive()
    pipeline.relay()
    crashing = pipeline.worker(wrap=WINDOWS[window])
    messages = pipeline.aws.receive()
    with pytest.raises(BaseException) as died:
        crashing.run(messages)
    assert crashed(died.value)
    assert pipeline.aws.inbox(delivery_id).state is State.PROCESSING
    # The lease runs out; the reconciler hands the delivery to a new container.
    pipeline.aws.clock.advance(LEASE_SECONDS + 1)
    assert pipeline.reconciler.run(deadline=Deadline.never()).leases_requeued == 1
    retry = pipeline.worker()
    _, result = retry.run_visible()
    assert result == {"batchItemFailures": []}
    # The crashed attempt's own message comes back after its visibility timeout.
    pipeline.aws.make_visible(messages)
    late, late_result = retry.run_visible()
    assert [m["MessageId"] for m in late] == [m["MessageId"] for m in messages]
    assert late_result == {"batchItemFailures": []}
    inbox = pipeline.aws.inbox(delivery_id)
    assert inbox.state is State.COMPLETED
    assert inbox.attempts == 2
    assert pipeline.aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    APPLICATIONS[window] = pipeline.applications(delivery_id)
    print(f"crash window {window}: effect applied {APPLICATIONS[window]} time(s)")
    assert APPLICATIONS[window] == 1


def test_relay_crash_before_checkpoint_redelivers_and_the_effect_happens_once(
    pipeline: Pipeline,
) -> None:
    delivery_id, _ = pipeline.receive()
    records = pipeline.relay()
    # The relay sent the message, then died before Lambda checkpointed the shard:
    # Lambda hands it the same records again.
    pipeline.relay(records)
    messages = pipeline.aws.receive()
    assert len(messages) == 2
    assert messages[0]["Body"] == messages[1]["Body"]
    result = pipeline.worker().run(messages)
    assert result == {"batchItemFailures": []}
    inbox = pipeline.aws.inbox(delivery_id)
    assert (inbox.state, inbox.attempts) == (State.COMPLETED, 1)
    APPLICATIONS["relay_send_before_checkpoint"] = pipeline.applications(delivery_id)
    print(f"crash window relay: effect applied {APPLICATIONS['relay_send_before_checkpoint']}")
    assert APPLICATIONS["relay_send_before_checkpoint"] == 1
