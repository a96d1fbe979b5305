"""The bench's receiver: the real handler (:mod:`local.testkit.receiver_rig`) on its clients.

Requests are signed and turned into API Gateway HTTP API events by
:mod:`local.testkit.builders` (an implementation of the signing scheme independent
of the receiver's).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import boto3

from functions.core import settings_table
from local.testkit import builders, offline_aws
from local.testkit.clock import START, FakeClock
from local.testkit.moto_world import REGION
from local.testkit.receiver_rig import ReceiverRig, make_receiver_rig, receiver_clients

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_secretsmanager.client import SecretsManagerClient

TABLE = "relaylink-bench"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:relaylink-bench-AbCdEf"
SECRETS_JSON = json.dumps([builders.SECRET])
NOW = START


def bench_session() -> boto3.Session:
    """A session with dummy credentials (Lambda reads its own from the environment).

    moto accepts any credentials; the canned AWS never checks them, but botocore
    still signs every request with them, as it does in Lambda.
    """
    return boto3.Session(
        region_name=REGION, aws_access_key_id="bench", aws_secret_access_key="bench"
    )


def clients(
    session: boto3.Session | None = None,
) -> tuple[DynamoDBClient, SecretsManagerClient]:
    """The receiver's DynamoDB and Secrets Manager clients, from the bench's session."""
    return receiver_clients(session or bench_session())


def make_rig(
    dynamodb: DynamoDBClient,
    secretsmanager: SecretsManagerClient,
    *,
    secret_arn: str = SECRET_ARN,
    table: str = TABLE,
    max_age: int = settings_table.SECRETS_MAX_AGE_SECONDS.default,
) -> ReceiverRig:
    """The handler's deps, built exactly as production does, with these clients, installed."""
    return make_receiver_rig(
        dynamodb,
        secretsmanager,
        table=table,
        secret_arn=secret_arn,
        clock=FakeClock(NOW),
        max_age=max_age,
    )


def accepted_event(now: int = NOW, **fields: Any) -> dict[str, Any]:
    """A new, correctly signed ``package.received`` delivery."""
    return builders.event_for(builders.signed_request(timestamp=now, **fields))


def offline_environment() -> None:
    """No bench run may reach a real AWS account: the tests' offline environment."""
    os.environ.update(offline_aws.OFFLINE_VARIABLES)
    for name in offline_aws.REMOVED_VARIABLES:
        os.environ.pop(name, None)
    for name, value in offline_aws.DEFAULT_VARIABLES.items():
        os.environ.setdefault(name, value)
