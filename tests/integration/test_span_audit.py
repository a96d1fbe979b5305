"""The span audit over the whole pipeline: receipt, relay, the worker's fetch from the
real MCP server on loopback and its notification, the reconciler.

Every span the functions export is collected in this process (``tracing.install``) and
checked with the log audit's rules plus "no URL" (``tests/span_audit.py``): the MCP
URL, the notify URL, the request body, its signature, the signing secrets and the MCP
token are all on this path, and none may reach a span. The same run shows the trace
whole: one trace id from the accept span to the effect, and the MCP server received
the fetch span's ``traceparent`` in the request's ``_meta``.
"""

from __future__ import annotations

from functions.core import tracing
from functions.core.deadline import Deadline
from functions.core.models import State
from functions.receiver import handler as receiver_handler
from local.testkit import builders
from tests import log_audit, span_audit
from tests.integration.test_pipeline import Pipeline, pipeline  # noqa: F401 (fixture "pipeline")

RELAYLINK_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
RELAYLINK_SPAN = "00f067aa0ba902b7"


def test_no_span_holds_a_body_a_secret_a_token_or_a_url(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    collected: span_audit.CollectedSpans,
) -> None:
    request = builders.signed_request(
        timestamp=pipeline.aws.clock.value,
        package_id=builders.PACKAGE_ID,
        mcp_url=pipeline.mcp_server.url,
    )
    log_audit.register_body(request.body)
    log_audit.register_signature(request.headers["X-RelayLink-Signature"])
    # RelayLink's own trace: the delivery's continues it.
    headers = {**request.headers, "traceparent": f"00-{RELAYLINK_TRACE}-{RELAYLINK_SPAN}-01"}
    response = receiver_handler.lambda_handler(
        builders.http_api_event(headers, request.body), builders.LambdaContext()
    )
    assert response["statusCode"] == 202
    pipeline.relay()
    _, result = pipeline.worker().run_visible()
    pipeline.reconciler.run(deadline=Deadline.never())

    assert result == {"batchItemFailures": []}
    item = pipeline.aws.inbox(request.delivery_id)
    assert item.state is State.COMPLETED
    spans = collected.spans
    names = {s.name for s in spans}
    assert {"accept", "relay", "attempt", "claim", "mcp.get_package", "effect"} <= names
    assert span_audit.check_spans(spans) == []
    # Nothing the audit looks for was missed by it: the URLs were on this path.
    assert pipeline.mcp_server.url.startswith("http://")
    traced = tracing.parent_from(item.traceparent)
    assert traced is not None
    assert traced.trace_id == RELAYLINK_TRACE
    delivery = [s for s in spans if s.context.trace_id == traced.trace_id]
    (accept,) = [s for s in delivery if s.name == "accept"]
    assert (accept.parent_span_id, accept.context) == (RELAYLINK_SPAN, traced)
    assert accept.attributes["outcome"] == "accepted"
    assert {s.name for s in delivery} >= {"accept", "relay", "attempt", "mcp.get_package"}
    (fetch,) = [s for s in delivery if s.name == "mcp.get_package"]
    assert pipeline.mcp_server.controls.traceparents(builders.PACKAGE_ID) == [
        fetch.context.traceparent
    ]


def test_a_url_given_as_an_attribute_is_never_kept(
    collected: span_audit.CollectedSpans,
) -> None:
    with tracing.span("probe", attributes={"target": "https://example.test/hook?token=abc"}) as s:
        s.set("again", "http://127.0.0.1:9/mcp/secret-path")
    (span,) = collected.spans
    assert dict(span.attributes) == {
        "target": tracing.URL_OMITTED,
        "again": tracing.URL_OMITTED,
    }
    assert span_audit.check_spans([span]) == []
