"""Fixtures shared by every test layer: offline AWS credentials and moto."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.aws_resources import create_table

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
