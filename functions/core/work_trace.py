"""Work sent again continues its delivery's trace.

Whoever re-enqueues a delivery (the reconciler, an operator's requeue, redrive or
approval) sends its work item from the inbox item, whose ``traceparent`` is the
delivery's accept span. Each such send is a span of its own in that trace, a child of
the accept span, and the work carries it: the attempt it causes is that span's child.
When the sender runs in a trace of its own (a reconciler run), the span links to it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from functions.core import tracing
from functions.core.models import WorkItem
from functions.core.trace_context import SpanContext


@contextmanager
def resending(
    name: str,
    works: Sequence[WorkItem],
    *,
    attributes: Mapping[str, tracing.AttributeValue | None] | None = None,
) -> Iterator[list[WorkItem]]:
    """``works``, each carrying a new span of its delivery's trace, for the block to
    send; each span is recorded when the block ends (an error when it raised).

    A work item without a trace is yielded as it is.
    """
    sender = tracing.current()
    started_ns = time.time_ns()
    spans: list[tuple[SpanContext, SpanContext, str]] = []
    carried: list[WorkItem] = []
    for work in works:
        delivery = tracing.parent_from(work.traceparent)
        if delivery is None:
            carried.append(work)
            continue
        own = delivery.child()
        spans.append((delivery, own, work.delivery_id))
        carried.append(dataclasses.replace(work, traceparent=own.traceparent))
    failed = True
    try:
        yield carried
        failed = False
    finally:
        ended_ns = time.time_ns()
        links = () if sender is None else (sender,)
        for delivery, own, delivery_id in spans:
            tracing.record(
                name,
                parent=delivery,
                context=own,
                start_ns=started_ns,
                end_ns=ended_ns,
                attributes={**(attributes or {}), "delivery_id": delivery_id},
                links=links,
                error=failed,
            )
