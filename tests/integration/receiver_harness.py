"""The real receiver handler wired to moto, with its AWS calls observed.

Used by the receiver's integration tests and by ``local.vector_demo``'s twin in
tests: the handler, the adapters and the table schema are the production ones;
only the clock is fixed and the clients are the test's own (so that botocore
hooks on them see every call the receiver makes).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3

from functions.core import names
from functions.receiver import handler
from functions.receiver.settings import Settings
from tests.builders import AwsCalls, FixedClock, LambdaContext

REGION = "us-east-1"


@dataclass(frozen=True)
class Response:
    status: int
    outcome: str
    reason: str | None
    content_type: str
    body: str


@dataclass
class Receiver:
    dynamodb: Any
    secretsmanager: Any
    table: str
    clock: FixedClock
    calls: AwsCalls
    deps: handler.Deps

    def invoke(self, event: dict[str, Any]) -> Response:
        raw = handler.lambda_handler(event, LambdaContext())
        body = json.loads(raw["body"])
        return Response(
            status=raw["statusCode"],
            outcome=body["outcome"],
            reason=body["reason"],
            content_type=raw["headers"]["Content-Type"],
            body=raw["body"],
        )

    def items(self) -> list[dict[str, Any]]:
        """Every item in the table, read with a client the hooks do not watch."""
        reader = boto3.client("dynamodb", region_name=REGION)
        found: list[dict[str, Any]] = []
        for page in reader.get_paginator("scan").paginate(TableName=self.table):
            found.extend(page["Items"])
        return found

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [i for i in self.items() if i[names.KIND_ATTRIBUTE]["S"] == kind]

    def work_items(self) -> int:
        return len(self.of_kind(names.KIND_OUTBOX))


def make_receiver(table: str, *, secrets: list[str], now: int, max_age: int = 300) -> Receiver:
    """Create the secret, build the deps with watched clients and install them."""
    setup = boto3.client("secretsmanager", region_name=REGION)
    name = f"relaylink-signing-{uuid.uuid4().hex[:8]}"
    created = setup.create_secret(Name=name, SecretString=json.dumps(secrets))
    arn = created["ARN"]
    dynamodb = boto3.client("dynamodb", region_name=REGION, config=handler.DYNAMODB_CONFIG)
    secretsmanager = boto3.client(
        "secretsmanager", region_name=REGION, config=handler.SECRETS_CONFIG
    )
    settings = Settings.from_env(
        {
            names.ENV_TABLE_NAME: table,
            names.ENV_SIGNING_SECRETS_ARN: arn,
            names.ENV_SECRETS_MAX_AGE_SECONDS: str(max_age),
        }
    )
    clock = FixedClock(now)
    deps = handler.build_deps(
        settings, dynamodb=dynamodb, secretsmanager=secretsmanager, clock=clock
    )
    calls = AwsCalls()
    calls.watch(dynamodb, secretsmanager)
    handler.set_deps(deps)
    return Receiver(dynamodb, secretsmanager, table, clock, calls, deps)


@contextmanager
def installed(receiver: Receiver) -> Iterator[Receiver]:
    try:
        yield receiver
    finally:
        handler.set_deps(None)
