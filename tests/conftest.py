"""Fixtures shared by every test layer: offline AWS credentials, moto, the log audit.

The harnesses' fixtures (a moto world, the receiver and processing rigs on it) are
plugins, so a test names them without importing them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from functions.core import tracing
from local.aws_resources import create_table
from local.testkit import offline_aws
from local.testkit.moto_world import REGION, TABLE
from local.testkit.serial_moto import serialize_dynamodb
from tests import log_audit
from tests.span_audit import CollectedSpans

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

pytest_plugins = ["tests.receiver_harness", "tests.processing_harness", "tests.operator_harness"]


@pytest.fixture(autouse=True)
def _offline_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real AWS account: fake credentials, fixed region."""
    for name, value in offline_aws.OFFLINE_VARIABLES.items():
        monkeypatch.setenv(name, value)
    for name in offline_aws.REMOVED_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in offline_aws.DEFAULT_VARIABLES.items():
        os.environ.setdefault(name, value)


@pytest.fixture
def collected() -> Iterator[CollectedSpans]:
    """Every span the code under test exports, kept in this process."""
    spans = CollectedSpans()
    previous = tracing.installed()
    tracing.install(spans)
    try:
        yield spans
    finally:
        tracing.install(previous)


@pytest.fixture
def moto_aws() -> Iterator[None]:
    # Keep boto3's default session between tests: a fresh one reloads every service
    # model, which cost more than the rest of a storage test's set-up.
    serialize_dynamodb()
    with mock_aws(config={"core": {"reset_boto3_session": False}}):
        yield


@pytest.fixture
def dynamodb(moto_aws: None) -> DynamoDBClient:
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture
def table(dynamodb: DynamoDBClient) -> str:
    """An empty table with the stack's schema; returns its name."""
    create_table(dynamodb, TABLE)
    return TABLE


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
