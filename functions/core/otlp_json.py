"""Spans in OTLP's JSON encoding (an ``ExportTraceServiceRequest``), and back.

The one format spans leave a function in: a line of the local span file is one
request holding one span, and an OTLP/HTTP endpoint takes a request holding many
(https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding: ids in hex, times
as decimal strings of nanoseconds). Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from functions.core.trace_context import SpanContext
from functions.core.tracing import AttributeValue, SpanRecord

SERVICE_NAME: Final = "relaylink-receiver"
SCOPE_NAME: Final = "relaylink_receiver.tracing"
_STATUS_UNSET: Final = 0
_STATUS_ERROR: Final = 2
_SPAN_KIND_INTERNAL: Final = 1
# The attribute that marks a span announced at its start (no end yet): OTLP has no
# such span, so it is sent with its start as its end and this flag.
ATTRIBUTE_UNFINISHED: Final = "relaylink.unfinished"


def request(spans: Sequence[SpanRecord]) -> dict[str, Any]:
    """One ``ExportTraceServiceRequest`` for ``spans``."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": SERVICE_NAME})},
                "scopeSpans": [{"scope": {"name": SCOPE_NAME}, "spans": [_span(s) for s in spans]}],
            }
        ]
    }


def dumps(spans: Sequence[SpanRecord]) -> str:
    return json.dumps(request(spans), separators=(",", ":"))


def _span(record: SpanRecord) -> dict[str, Any]:
    attributes = dict(record.attributes)
    end = record.end_ns
    if end is None:
        attributes[ATTRIBUTE_UNFINISHED] = True
        end = record.start_ns
    span: dict[str, Any] = {
        "traceId": record.context.trace_id,
        "spanId": record.context.span_id,
        "name": record.name,
        "kind": _SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(record.start_ns),
        "endTimeUnixNano": str(end),
        "attributes": _attributes(attributes),
        "status": {"code": _STATUS_ERROR if record.error else _STATUS_UNSET},
    }
    if record.parent_span_id:
        span["parentSpanId"] = record.parent_span_id
    if record.links:
        span["links"] = [{"traceId": c.trace_id, "spanId": c.span_id} for c in record.links]
    return span


def _attributes(values: Mapping[str, AttributeValue]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in values.items()]


def _value(value: AttributeValue) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def spans_of(payload: Mapping[str, Any]) -> Iterator[SpanRecord]:
    """Each span of one request.

    Raises:
        KeyError, TypeError, ValueError: not a request of this shape.
    """
    for resource_spans in payload.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for raw in scope_spans.get("spans", []):
                yield _record(raw)


def _record(raw: Mapping[str, Any]) -> SpanRecord:
    attributes = _read_attributes(raw.get("attributes", []))
    unfinished = attributes.pop(ATTRIBUTE_UNFINISHED, False) is True
    return SpanRecord(
        name=str(raw["name"]),
        context=SpanContext(str(raw["traceId"]), str(raw["spanId"])),
        parent_span_id=str(raw["parentSpanId"]) if raw.get("parentSpanId") else None,
        start_ns=int(raw["startTimeUnixNano"]),
        end_ns=None if unfinished else int(raw["endTimeUnixNano"]),
        attributes=attributes,
        links=tuple(
            SpanContext(str(link["traceId"]), str(link["spanId"])) for link in raw.get("links", [])
        ),
        error=raw.get("status", {}).get("code") == _STATUS_ERROR,
    )


def _read_attributes(raw: Iterable[Mapping[str, Any]]) -> dict[str, AttributeValue]:
    values: dict[str, AttributeValue] = {}
    for entry in raw:
        value = entry.get("value", {})
        if "boolValue" in value:
            values[str(entry["key"])] = bool(value["boolValue"])
        elif "intValue" in value:
            values[str(entry["key"])] = int(value["intValue"])
        elif "doubleValue" in value:
            values[str(entry["key"])] = float(value["doubleValue"])
        else:
            values[str(entry["key"])] = str(value.get("stringValue", ""))
    return values
