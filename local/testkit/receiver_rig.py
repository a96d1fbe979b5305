"""The real receiver handler, built as production builds it, on clients the caller chooses.

The clients may reach moto, an AWS answered by canned responses, or anything else
botocore can talk to; the caller keeps them, so that botocore hooks on them see
every call the receiver makes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3

from functions.core import env_names, settings_table
from functions.core.adapters.storage_retry import StorageRetry
from functions.receiver import handler
from functions.receiver.settings import Settings
from local.testkit.builders import LambdaContext
from local.testkit.clock import FakeClock, WaitingRoom
from local.testkit.moto_world import REGION

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_secretsmanager.client import SecretsManagerClient


def receiver_clients(
    session: boto3.session.Session | None = None,
) -> tuple[DynamoDBClient, SecretsManagerClient]:
    """A DynamoDB and a Secrets Manager client with the receiver's own configuration.

    ``session``: a ``boto3.Session``; None: boto3's default session (one is made if
    there is none yet, as ``boto3.client`` would).
    """
    session = session or boto3.DEFAULT_SESSION or boto3.session.Session()
    return (
        session.client("dynamodb", region_name=REGION, config=handler.DYNAMODB_CONFIG),
        session.client("secretsmanager", region_name=REGION, config=handler.SECRETS_CONFIG),
    )


@dataclass
class ReceiverRig:
    """One receiver container: its deps (installed in the handler) and its clients."""

    dynamodb: DynamoDBClient
    secretsmanager: SecretsManagerClient
    clock: FakeClock
    deps: handler.Deps

    def install(self) -> None:
        handler.container_deps.set(self.deps)

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        """The handler's raw response to ``event``."""
        response: dict[str, Any] = handler.lambda_handler(event, LambdaContext())
        return response

    def outcome(self, event: dict[str, Any]) -> str:
        return str(json.loads(self.invoke(event)["body"])["outcome"])


def make_receiver_rig(
    dynamodb: DynamoDBClient,
    secretsmanager: SecretsManagerClient,
    *,
    table: str,
    secret_arn: str,
    clock: FakeClock,
    max_age: int = settings_table.SECRETS_MAX_AGE_SECONDS.default,
    waiting: WaitingRoom | None = None,
) -> ReceiverRig:
    """Build the handler's deps exactly as production does and install them; a retry
    after throttling waits in ``waiting`` (no real time)."""
    room = waiting or WaitingRoom()
    settings = Settings.from_env(
        {
            env_names.ENV_TABLE_NAME: table,
            env_names.ENV_SIGNING_SECRETS_ARN: secret_arn,
            env_names.ENV_SECRETS_MAX_AGE_SECONDS: str(max_age),
        }
    )
    deps = handler.build_deps(
        settings,
        dynamodb=dynamodb,
        secretsmanager=secretsmanager,
        clock=clock,
        retry=StorageRetry(sleep=room.sleep, monotonic=room.monotonic),
    )
    rig = ReceiverRig(dynamodb, secretsmanager, clock, deps)
    rig.install()
    return rig
