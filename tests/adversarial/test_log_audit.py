"""The log audit catches what it is meant to catch, and passes what the receiver logs."""

from __future__ import annotations

import io
import json
import logging
import sys
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from functions.core.redaction import RedactingFilter
from local.testkit import builders, vectors
from tests import conftest, log_audit

VECTORS = vectors.load_vectors()
VECTOR_SECRET = VECTORS.cases[0].secrets[0]
VECTOR_BODY = VECTORS.cases[0].request.body.decode()
PATH = "/relaylink/hook-token-abc123"


def _record(msg: str, *args: Any, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("planted", logging.INFO, __file__, 1, msg, args or None, None)
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def test_log_audit_detects_a_planted_signing_secret_in_the_message() -> None:
    broken = log_audit.check_record(_record("loaded %s", VECTOR_SECRET))

    assert "secret_shape" in broken
    assert "secret" in broken


def test_log_audit_detects_the_base64_key_part_without_its_prefix() -> None:
    key_part = builders.SECRET.removeprefix("whsec_")

    assert log_audit.check_record(_record("key", key=key_part)) == ["secret"]


def test_log_audit_detects_the_decoded_test_key() -> None:
    assert log_audit.check_record(_record("relaylink-test-secret-number-two")) == ["secret"]


def test_log_audit_detects_a_vector_body_in_an_extra() -> None:
    broken = log_audit.check_record(_record("request", payload=VECTOR_BODY))

    assert "body" in broken
    assert "body_shape" in broken


def test_log_audit_detects_an_unregistered_body_by_its_shape() -> None:
    body = builders.delivery_body(builders.new_delivery_id(), package_id="pkg_never_seen")

    assert log_audit.check_record(_record("got %r", body)) == ["body_shape"]


def test_log_audit_detects_the_mcp_token_and_bearer_headers() -> None:
    token = log_audit.KNOWN_MCP_TOKENS[0]

    assert log_audit.check_record(_record("token", value=token)) == ["mcp_token"]
    broken = log_audit.check_record(_record("sent", headers={"Authorization": f"Bearer {token}"}))
    assert broken == ["bearer_shape", "mcp_token"]


def test_log_audit_detects_the_receiver_path_and_its_token() -> None:
    assert log_audit.check_record(_record("POST %s", PATH)) == ["url_path"]
    assert log_audit.check_record(_record("token", segment="hook-token-abc123")) == ["url_path"]


def test_log_audit_detects_a_secret_in_a_formatted_exception() -> None:
    try:
        raise ValueError(f"bad secret {builders.OTHER_SECRET}")
    except ValueError:
        record = logging.LogRecord("planted", logging.ERROR, __file__, 1, "failed", None, None)
        record.exc_info = sys.exc_info()

    assert "secret_shape" in log_audit.check_record(record)


def test_log_audit_registered_values_are_detected() -> None:
    log_audit.register_secret("whsec_" + "cmVnaXN0ZXJlZC1rZXktZm9yLWF1ZGl0")
    log_audit.register_body(b'{"anything":"registered-body-text"}')

    assert log_audit.check_text("x cmVnaXN0ZXJlZC1rZXktZm9yLWF1ZGl0 y") == ["secret"]
    assert log_audit.check_text('{"anything":"registered-body-text"}') == ["body"]


def test_log_audit_passes_what_the_receiver_logs() -> None:
    record = _record(
        "delivery handled",
        outcome="accepted",
        reason=None,
        status=202,
        delivery_id=builders.new_delivery_id(),
    )

    assert log_audit.check_record(record) == []


def test_log_audit_agrees_with_the_redaction_filter() -> None:
    record = _record(f"secret {VECTOR_SECRET} and Bearer abcdefghijkl", path="x")

    RedactingFilter().filter(record)

    assert log_audit.check_record(record) == []


def test_log_audit_capture_collects_records_of_a_real_logger() -> None:
    # A logger outside the manager: its records reach only the capture under test,
    # not the autouse audit of this very test.
    planted = logging.Logger("planted-leak")
    capture = log_audit.LogCapture()
    planted.addHandler(capture)

    planted.warning("request body %s", VECTOR_BODY)
    planted.info("delivery handled", extra={"outcome": "accepted"})

    (finding,) = capture.findings()
    assert finding.startswith("planted-leak:test_log_audit.py:")
    assert "body" in finding
    assert VECTOR_BODY not in finding  # the report does not repeat the leak


def test_log_audit_reads_powertools_json_lines_value_by_value() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LambdaPowertoolsFormatter())
    planted = logging.Logger("planted-json")
    planted.addHandler(handler)

    planted.info("delivery handled", extra={"delivery_id": builders.new_delivery_id()})
    clean = stream.getvalue()
    planted.info("signature header", extra={"value": builders.SECRET})

    assert json.loads(clean.splitlines()[0])["delivery_id"]
    assert log_audit.check_output(clean) == []
    assert log_audit.check_output(stream.getvalue()) == ["secret_shape", "secret"]


def test_log_audit_plain_output_with_a_body_is_a_finding() -> None:
    assert log_audit.check_output(f"debug: {VECTOR_BODY}\n") == ["body_shape", "body"]


@dataclass
class _Report:
    outcome: str = "passed"
    longrepr: Any = None
    sections: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Call:
    when: str = "call"


def _run_hook(report: _Report) -> _Report:
    hook = conftest.pytest_runtest_makereport(None, _Call())  # type: ignore[arg-type]
    next(hook)
    try:
        hook.send(report)
    except StopIteration as stop:
        result: _Report = stop.value
        return result
    raise AssertionError("the hook wrapper must return after one yield")


def test_log_audit_hook_fails_a_phase_whose_stdout_leaks() -> None:
    report = _Report(sections=[("Captured stdout call", f"printed {builders.SECRET}\n")])

    result = _run_hook(report)

    assert result.outcome == "failed"
    assert "Captured stdout call: secret" in result.longrepr
    assert builders.SECRET not in result.longrepr


def test_log_audit_hook_ignores_other_phases_and_clean_output() -> None:
    report = _Report(
        sections=[
            ("Captured stdout setup", f"printed {builders.SECRET}\n"),  # judged at setup
            ("Captured stdout call", '{"level":"INFO","message":"delivery handled"}\n'),
        ]
    )

    assert _run_hook(report).outcome == "passed"
