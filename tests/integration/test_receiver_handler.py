"""The handler as API Gateway calls it: event shapes, responses, logs and metrics."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from functions.core import env_names, metric_names, wire
from functions.core.observability import logger
from functions.receiver import handler
from functions.receiver.http_request import BodyTooLarge, MalformedEvent, parse_event
from local.testkit import builders
from tests.processing_harness import emitted_metrics

NOW = 1_764_687_845
LIMIT = wire.MAX_BODY_BYTES


def test_handler_response_is_json_outcome_and_reason_only(receiver_factory: Any) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    request = builders.signed_request(timestamp=NOW)

    raw = handler.lambda_handler(builders.event_for(request), builders.LambdaContext())

    assert raw["statusCode"] == 202
    assert raw["headers"] == {"Content-Type": "application/json"}
    assert json.loads(raw["body"]) == {"outcome": "accepted", "reason": None}
    assert receiver.work_items() == 1


def test_handler_accepts_the_rest_api_event_shape(receiver_factory: Any) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    request = builders.signed_request(timestamp=NOW, note="Zürich ✓")

    for encoded in (False, True):
        event = builders.rest_api_event(request.headers, request.body, base64_encoded=encoded)
        response = receiver.invoke(event)
        assert response.outcome == ("accepted" if not encoded else "duplicate")


def test_handler_repeated_signature_header_is_rejected_not_guessed(receiver_factory: Any) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    request = builders.signed_request(timestamp=NOW)
    event = builders.rest_api_event(request.headers, request.body)
    good = request.headers["X-RelayLink-Signature"]
    event["multiValueHeaders"]["X-RelayLink-Signature"] = [good, good]

    response = receiver.invoke(event)

    assert (response.status, response.outcome) == (401, "rejected")
    assert receiver.items() == []


def test_handler_too_large_body_is_413_whatever_its_encoding(receiver_factory: Any) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    body = b"x" * (LIMIT + 1)
    for encoded in (False, True):
        response = receiver.invoke(builders.http_api_event({}, body, base64_encoded=encoded))
        assert (response.status, response.outcome, response.reason) == (
            413,
            "too_large",
            "body_too_large",
        )
    assert receiver.calls.count() == 0


@pytest.mark.parametrize(
    "event",
    [
        None,
        "text",
        [],
        {},
        {"body": 12},
        {"body": "!!!not base64", "isBase64Encoded": True},
        {"body": "\ud800", "headers": {}},
        {"headers": "nope", "body": "{}"},
    ],
)
def test_handler_never_fails_on_garbage_events(receiver_factory: Any, event: Any) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    raw = handler.lambda_handler(event, None)
    assert raw["statusCode"] in (400, 401)
    assert json.loads(raw["body"])["outcome"] in ("invalid", "rejected")
    assert receiver.calls.count("dynamodb") == 0


def test_handler_missing_settings_is_503_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    handler.container_deps.reset()
    monkeypatch.delenv(env_names.ENV_TABLE_NAME, raising=False)
    monkeypatch.delenv(env_names.ENV_SIGNING_SECRETS_ARN, raising=False)
    request = builders.signed_request(timestamp=NOW)

    raw = handler.lambda_handler(builders.event_for(request), None)

    assert raw["statusCode"] == 503
    assert json.loads(raw["body"]) == {"outcome": "unavailable", "reason": "receiver_misconfigured"}
    (record,) = [r for r in caplog.records if r.getMessage() == "receiver settings are invalid"]
    assert env_names.ENV_TABLE_NAME in record.error  # type: ignore[attr-defined]


def test_handler_logs_no_body_header_value_path_or_secret(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    accepted = builders.signed_request(timestamp=NOW)
    forged = builders.signed_request(timestamp=NOW, secrets=builders.OTHER_SECRET)
    quarantined = builders.signed_request(
        timestamp=NOW, delivery_id=accepted.delivery_id, package_id="pkg_other"
    )
    for request in (accepted, forged, quarantined):
        receiver.invoke(builders.event_for(request))

    logged = " ".join(json.dumps(vars(r), default=str) for r in caplog.records)
    path = builders.http_api_event({}, b"")["rawPath"]
    for request in (accepted, forged, quarantined):
        assert request.headers["X-RelayLink-Signature"] not in logged
        assert request.body.decode() not in logged
    for secret in (builders.SECRET, builders.OTHER_SECRET):
        assert secret not in logged
        assert secret.removeprefix("whsec_") not in logged
    assert path not in logged
    assert builders.PACKAGE_ID not in logged and builders.MCP_URL not in logged
    # An unverified request's delivery id is attacker-controlled: not logged either.
    assert forged.delivery_id not in logged
    outcomes = [getattr(r, "outcome", None) for r in caplog.records]
    assert outcomes == ["accepted", "rejected", "quarantined"]


def test_handler_emits_one_metric_per_outcome(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    first = builders.signed_request(timestamp=NOW)
    requests = [
        first,
        builders.signed_request(timestamp=NOW + 5, delivery_id=first.delivery_id),
        builders.signed_request(timestamp=NOW, delivery_id=first.delivery_id, mcp_url="https://o"),
        builders.signed_request(timestamp=NOW, event="ping"),
        builders.signed_request(timestamp=NOW, secrets=builders.OTHER_SECRET),
        builders.signed_request(timestamp=NOW, package_id=None),
    ]
    caplog.clear()
    for request in requests:
        receiver.invoke(builders.event_for(request))

    # Each request's one log line carries its count: the lines as Lambda gets them. Only
    # an alarmed count is an EMF metric (a directive); the others are fields of the line.
    formatter = logger.registered_formatter
    records = [json.loads(formatter.format(r)) for r in caplog.records]
    assert len(records) == len(requests)
    counted = [next(k for k in r if k.startswith("Deliveries") and r[k] == [1.0]) for r in records]
    assert counted == [
        metric_names.receiver_outcome_metric(o)
        for o in ("accepted", "duplicate", "quarantined", "ignored", "rejected", "invalid")
    ]
    emf = [r for r in records if "_aws" in r]
    emitted = [m["Name"] for r in emf for m in r["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    assert emitted == [metric_names.METRIC_QUARANTINED]
    for r in emf:
        directive = r["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == metric_names.METRICS_NAMESPACE
        assert directive["Dimensions"] == [["service"]]
        assert r["service"] == metric_names.SERVICE
        # EMF: every metric named in the directive has its value as a top-level member.
        assert all(r[m["Name"]] == [1.0] for m in directive["Metrics"])
        assert isinstance(r["_aws"]["Timestamp"], int)


def test_the_request_line_is_located_where_the_handler_logs_it(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    caplog.clear()
    receiver.invoke(builders.event_for(builders.signed_request(timestamp=NOW)))

    (record,) = caplog.records
    assert (record.name, record.levelno, record.getMessage()) == (
        logger.name,
        logging.INFO,
        "delivery handled",
    )
    assert record.pathname == handler.__file__ and record.funcName == "_record"
    source = Path(handler.__file__).read_text().splitlines()
    assert "log_with_counts(" in source[record.lineno - 1]
    # The written line leaves the location out (CloudWatch stamps time, stack traces
    # say where): only the record carries it, for any other handler.
    line = json.loads(logger.registered_formatter.format(record))
    assert "location" not in line and "timestamp" not in line
    assert line["message"] == "delivery handled"


def test_handler_metric_takes_powertools_path_when_the_line_is_filtered(
    receiver_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    level = logger.log_level
    logger.setLevel("ERROR")  # an outcome's line is not written: its metric still is
    try:
        capsys.readouterr()
        receiver.invoke(builders.event_for(builders.signed_request(timestamp=NOW)))
        out = capsys.readouterr().out
    finally:
        logger.setLevel(level)

    # An unalarmed count: a line of counts of its own, no metric.
    assert emitted_metrics(out) == {metric_names.receiver_outcome_metric("accepted"): 1}
    assert '"_aws"' not in out
    assert "delivery handled" not in out


# --- parse_event on its own (no AWS needed) ---------------------------------------


def test_parse_event_recovers_exact_bytes_from_either_encoding() -> None:
    body = '{"note":"Zürich ✓ — ünïcödé"}\n'.encode()
    for encoded in (False, True):
        request = parse_event(
            builders.http_api_event({"X-A": "1"}, body, base64_encoded=encoded),
            max_body_bytes=LIMIT,
        )
        assert request.body == body
        assert request.headers["x-a"] == "1"


def test_parse_event_size_limit_is_exact_in_bytes() -> None:
    fits = "é" * (LIMIT // 2)  # two UTF-8 bytes per character
    assert len(parse_event({"body": fits}, max_body_bytes=LIMIT).body) == LIMIT
    with pytest.raises(BodyTooLarge):
        parse_event({"body": fits + "x"}, max_body_bytes=LIMIT)
    raw = b"\x00" * LIMIT
    encoded = base64.b64encode(raw).decode()
    assert parse_event({"body": encoded, "isBase64Encoded": True}, max_body_bytes=LIMIT).body == raw
    with pytest.raises(BodyTooLarge):
        parse_event(
            {"body": base64.b64encode(raw + b"\x00").decode(), "isBase64Encoded": True},
            max_body_bytes=LIMIT,
        )


def test_parse_event_joins_repeated_and_case_variant_headers_with_commas() -> None:
    event = {
        "headers": {"X-Dup": "a", "x-dup": "b"},
        "body": "",
    }
    assert parse_event(event, max_body_bytes=LIMIT).headers == {"x-dup": "a,b"}
    rest = {"multiValueHeaders": {"X-Dup": ["a", "b"], "Other": ["c"]}, "headers": {}}
    assert parse_event(rest, max_body_bytes=LIMIT).headers == {"x-dup": "a,b", "other": "c"}


def test_parse_event_takes_only_string_headers_whatever_their_case() -> None:
    as_sent = {"X-Upper": "1", "x-lower": "2"}
    assert parse_event({"headers": as_sent}, max_body_bytes=LIMIT).headers == {
        "x-upper": "1",
        "x-lower": "2",
    }
    odd: dict[Any, Any] = {"X-A": "1", "x-b": 2, 3: "c", "x-c": None}
    assert parse_event({"headers": odd}, max_body_bytes=LIMIT).headers == {"x-a": "1"}


@pytest.mark.parametrize(
    "event", [None, [], {"body": 1}, {"body": "!", "isBase64Encoded": True}, {"body": "\udc80"}]
)
def test_parse_event_refuses_unreadable_events(event: Any) -> None:
    with pytest.raises(MalformedEvent):
        parse_event(event, max_body_bytes=LIMIT)


def test_body_nested_beyond_the_parser_is_a_400_with_its_own_metric(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = receiver_factory([builders.SECRET], now=NOW)
    request = builders.signed_request(timestamp=NOW, body=b"[" * 100_000 + b"]" * 100_000)
    caplog.clear()
    response = receiver.invoke(builders.event_for(request))

    assert (response.status, response.outcome, response.reason) == (
        400,
        "invalid",
        "body_too_deep",
    )
    formatter = logger.registered_formatter
    (line,) = [json.loads(formatter.format(r)) for r in caplog.records]
    assert emitted_metrics(json.dumps(line)) == {
        metric_names.receiver_outcome_metric("invalid"): 1,
        metric_names.METRIC_BODY_TOO_DEEP: 1,
    }
