"""Fixtures shared by every test layer: offline AWS credentials, moto, the log audit."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.aws_resources import create_table
from tests import log_audit

REGION = "us-east-1"
TABLE_NAME = "relaylink-test"


@pytest.fixture(autouse=True)
def _offline_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real AWS account: fake credentials, fixed region."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    # botocore >= 1.44.4 sends some calls to account-specific endpoints moto does not catch.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RelayLinkReceiver")


@pytest.fixture
def moto_aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def dynamodb(moto_aws: None) -> Any:
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture
def table(dynamodb: Any) -> str:
    """An empty table with the stack's schema; returns its name."""
    create_table(dynamodb, TABLE_NAME)
    return TABLE_NAME


@pytest.fixture(autouse=True)
def _log_audit() -> Iterator[log_audit.LogCapture]:
    """Fail the test if any log record it caused holds a body, secret, token or URL path.

    Captured stdout/stderr (Powertools' JSON lines, EMF) is audited by
    :func:`pytest_runtest_makereport` below. Rules: ``tests/log_audit.py``.
    """
    capture = log_audit.LogCapture()
    capture.install()
    try:
        yield capture
    finally:
        capture.uninstall()
    findings = capture.findings()
    if findings:
        pytest.fail("log audit: " + "; ".join(findings[:10]), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Turn a phase whose captured stdout/stderr breaks the log audit into a failure."""
    report = yield
    suffix = f" {call.when}"
    broken: list[str] = []
    for title, content in report.sections:
        if title.startswith("Captured ") and title.endswith(suffix):
            broken += [f"{title}: {rule}" for rule in log_audit.check_output(content)]
    if broken and report.outcome != "failed":
        report.outcome = "failed"
        report.longrepr = "log audit: captured output breaks " + "; ".join(sorted(set(broken)))
    return report
