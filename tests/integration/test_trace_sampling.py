"""A delivery is traced whole or not at all: the receiver decides at receipt (its
percent, or RelayLink's own flag), and the relay, the worker and the reconciler follow
the flags stored with the delivery."""

from __future__ import annotations

import dataclasses

import pytest

from functions.core import tracing
from functions.core.deadline import Deadline
from functions.core.models import State
from functions.receiver import handler as receiver_handler
from local.testkit import builders
from local.testkit.moto_world import MotoWorld
from tests.integration.test_pipeline import Pipeline, pipeline  # noqa: F401 (fixture "pipeline")
from tests.span_audit import CollectedSpans

RELAYLINK = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"


def _sampling(percent: int) -> None:
    """The installed receiver, deciding new traces at ``percent``."""
    deps = receiver_handler.container_deps.get()
    receiver_handler.container_deps.set(dataclasses.replace(deps, trace_sample_percent=percent))


def _deliver(run: Pipeline, traceparent: str | None = None) -> str:
    """One delivery through receipt, relay, worker and a reconciler run."""
    request = builders.signed_request(
        timestamp=run.aws.clock.value,
        package_id=builders.PACKAGE_ID,
        mcp_url=run.mcp_server.url,
    )
    headers = dict(request.headers)
    if traceparent is not None:
        headers["traceparent"] = traceparent
    response = receiver_handler.lambda_handler(
        builders.http_api_event(headers, request.body), builders.LambdaContext()
    )
    assert response["statusCode"] == 202
    run.relay()
    _, result = run.worker().run_visible()
    assert result == {"batchItemFailures": []}
    run.reconciler.run(deadline=Deadline.never())
    return request.delivery_id


def _flags(aws: MotoWorld, delivery_id: str) -> str:
    item = aws.inbox(delivery_id)
    assert item.state is State.COMPLETED
    assert item.traceparent is not None
    return item.traceparent[-2:]


@pytest.mark.parametrize(
    ("percent", "incoming", "flags"),
    [
        (0, None, "00"),
        (100, None, "01"),
        # RelayLink's own flag decides, whatever the percent.
        (0, RELAYLINK + "01", "01"),
        (100, RELAYLINK + "00", "00"),
    ],
)
def test_a_delivery_is_traced_at_every_hop_or_at_none(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    collected: CollectedSpans,
    percent: int,
    incoming: str | None,
    flags: str,
) -> None:
    _sampling(percent)

    delivery_id = _deliver(pipeline, incoming)

    assert _flags(pipeline.aws, delivery_id) == flags
    context = tracing.parent_from(pipeline.aws.inbox(delivery_id).traceparent)
    assert context is not None
    if incoming is not None:
        assert context.trace_id == RELAYLINK[3:35]
    names = {s.name for s in collected.spans if s.context.trace_id == context.trace_id}
    hops = {"accept", "relay", "attempt", "claim", "mcp.get_package", "effect"}
    assert names >= hops if flags == "01" else names == set()
