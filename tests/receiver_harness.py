"""The real receiver handler on a moto world, with its AWS calls observed.

The handler, the adapters and the table schema are the production ones; only the
clock is fixed and the clients are the test's own (:mod:`local.testkit.receiver_rig`),
so that botocore hooks on them see every call the receiver makes. The world is made
once per test module (``world`` fixture) and its table emptied for each receiver:
creating boto3 clients is most of what an integration test would otherwise spend its
time on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from functions.core import settings_table, table_layout
from functions.receiver import handler
from local.testkit.aws_calls import AwsCalls
from local.testkit.clock import FakeClock, WaitingRoom
from local.testkit.moto_world import TABLE, MotoWorld, moto_world
from local.testkit.receiver_rig import ReceiverRig, make_receiver_rig, receiver_clients

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_secretsmanager.client import SecretsManagerClient


@dataclass(frozen=True)
class Response:
    status: int
    outcome: str
    reason: str | None
    content_type: str
    body: str


@dataclass
class Receiver:
    """One installed receiver, its signing secret and the calls it made."""

    world: MotoWorld
    rig: ReceiverRig
    calls: AwsCalls
    secret_arn: str
    waiting: WaitingRoom  # where a retry after throttling waits (no real time)

    @property
    def dynamodb(self) -> DynamoDBClient:
        return self.rig.dynamodb

    @property
    def secretsmanager(self) -> SecretsManagerClient:
        return self.rig.secretsmanager

    @property
    def clock(self) -> FakeClock:
        return self.rig.clock

    @property
    def deps(self) -> handler.Deps:
        return self.rig.deps

    def invoke(self, event: dict[str, Any]) -> Response:
        raw = self.rig.invoke(event)
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
        return [i for i in self.items() if i[table_layout.KIND_ATTRIBUTE]["S"] == kind]

    def work_items(self) -> int:
        return len(self.of_kind(table_layout.KIND_OUTBOX))


@pytest.fixture(scope="module")
def world() -> Iterator[MotoWorld]:
    """One moto world for a test module's receivers."""
    with moto_world() as shared:
        yield shared


def make_receiver(
    world: MotoWorld,
    *,
    secrets: list[str],
    now: int,
    max_age: int = settings_table.SECRETS_MAX_AGE_SECONDS.default,
    secret_value: str | None = None,
) -> Receiver:
    """Empty the table, create the secret, build deps with fresh watched clients, install."""
    world.clear()
    value = secret_value if secret_value is not None else json.dumps(secrets)
    arn = world.create_secret(value, prefix="relaylink-signing")
    # Fresh clients per receiver: each test's hooks (call counts, injected faults) stay
    # its own. The session's loaders are cached, so these are cheap after the first.
    dynamodb, secretsmanager = receiver_clients()
    waiting = WaitingRoom()
    rig = make_receiver_rig(
        dynamodb,
        secretsmanager,
        table=TABLE,
        secret_arn=arn,
        clock=FakeClock(now),
        max_age=max_age,
        waiting=waiting,
    )
    calls = AwsCalls()
    calls.watch(dynamodb, secretsmanager)
    return Receiver(world, rig, calls, arn, waiting)


@pytest.fixture
def receiver_factory(world: MotoWorld) -> Iterator[Any]:
    """``make(secrets, now=..., ...)`` -> an installed :class:`Receiver`; uninstalled after."""

    def make(secrets: list[str], *, now: int, **options: Any) -> Receiver:
        return make_receiver(world, secrets=secrets, now=now, **options)

    try:
        yield make
    finally:
        handler.container_deps.reset()
