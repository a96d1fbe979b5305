"""The real receiver handler wired to moto, with its AWS calls observed.

The handler, the adapters and the table schema are the production ones; only the
clock is fixed and the clients are the test's own, so that botocore hooks on them
see every call the receiver makes. Clients and the table are made once per test
module (``world`` fixture) and the table is emptied between tests: creating boto3
clients is most of what an integration test would otherwise spend its time on.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.core import names
from functions.receiver import handler
from functions.receiver.settings import Settings
from local.aws_resources import create_table
from local.testkit.aws_calls import AwsCalls
from local.testkit.builders import LambdaContext
from local.testkit.clock import FakeClock

REGION = "us-east-1"
TABLE = "relaylink-receiver-test"


@dataclass(frozen=True)
class Response:
    status: int
    outcome: str
    reason: str | None
    content_type: str
    body: str


@dataclass
class World:
    """moto, the table and the clients, shared by one module's tests."""

    reader: Any  # unwatched: the tests' own view of the table
    setup_secrets: Any

    def clear(self) -> None:
        for page in self.reader.get_paginator("scan").paginate(TableName=TABLE):
            for item in page["Items"]:
                key = {k: item[k] for k in (names.TABLE_PARTITION_KEY, names.TABLE_SORT_KEY)}
                self.reader.delete_item(TableName=TABLE, Key=key)

    def items(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in self.reader.get_paginator("scan").paginate(TableName=TABLE):
            found.extend(page["Items"])
        return found

    def create_secret(self, value: str) -> str:
        name = f"relaylink-signing-{uuid.uuid4().hex[:8]}"
        return str(self.setup_secrets.create_secret(Name=name, SecretString=value)["ARN"])


@dataclass
class Receiver:
    world: World
    dynamodb: Any
    secretsmanager: Any
    clock: FakeClock
    calls: AwsCalls
    deps: handler.Deps

    def invoke(self, event: dict[str, Any]) -> Response:
        raw = handler.lambda_handler(event, LambdaContext())
        body = json.loads(raw["body"])
        assert set(body) == {"outcome", "reason"}
        return Response(
            status=raw["statusCode"],
            outcome=body["outcome"],
            reason=body["reason"],
            content_type=raw["headers"]["Content-Type"],
            body=raw["body"],
        )

    def items(self) -> list[dict[str, Any]]:
        return self.world.items()

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [i for i in self.items() if i[names.KIND_ATTRIBUTE]["S"] == kind]

    def work_items(self) -> int:
        return len(self.of_kind(names.KIND_OUTBOX))


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with mock_aws():
        reader = boto3.client("dynamodb", region_name=REGION)
        create_table(reader, TABLE)
        yield World(reader, boto3.client("secretsmanager", region_name=REGION))


def make_receiver(
    world: World,
    *,
    secrets: list[str],
    now: int,
    max_age: int = 300,
    secret_value: str | None = None,
) -> Receiver:
    """Empty the table, create the secret, build deps with fresh watched clients, install."""
    world.clear()
    arn = world.create_secret(secret_value if secret_value is not None else json.dumps(secrets))
    # Fresh clients per receiver: each test's hooks (call counts, injected faults) stay
    # its own. The session's loaders are cached, so these are cheap after the first.
    dynamodb = boto3.client("dynamodb", region_name=REGION, config=handler.DYNAMODB_CONFIG)
    secretsmanager = boto3.client(
        "secretsmanager", region_name=REGION, config=handler.SECRETS_CONFIG
    )
    settings = Settings.from_env(
        {
            names.ENV_TABLE_NAME: TABLE,
            names.ENV_SIGNING_SECRETS_ARN: arn,
            names.ENV_SECRETS_MAX_AGE_SECONDS: str(max_age),
        }
    )
    clock = FakeClock(now)
    deps = handler.build_deps(
        settings, dynamodb=dynamodb, secretsmanager=secretsmanager, clock=clock
    )
    calls = AwsCalls()
    calls.watch(dynamodb, secretsmanager)
    handler.set_deps(deps)
    return Receiver(world, dynamodb, secretsmanager, clock, calls, deps)


@pytest.fixture
def receiver_factory(world: World) -> Iterator[Any]:
    """``make(secrets, now=..., ...)`` -> an installed :class:`Receiver`; uninstalled after."""

    def make(secrets: list[str], *, now: int, **options: Any) -> Receiver:
        return make_receiver(world, secrets=secrets, now=now, **options)

    try:
        yield make
    finally:
        handler.set_deps(None)
