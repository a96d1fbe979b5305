"""The real receiver handler, wired to clients the bench chooses (canned or moto).

Requests are signed and turned into API Gateway HTTP API events by ``tests.builders``
(an implementation of the contract's signing independent of the receiver's).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3

from functions.core import names
from functions.core.observability import logger
from functions.receiver import handler
from functions.receiver.settings import Settings
from local.testkit import builders
from local.testkit.clock import FakeClock

REGION = "us-east-1"
TABLE = "relaylink-bench"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:relaylink-bench-AbCdEf"
SECRETS_JSON = json.dumps([builders.SECRET])
NOW = 1_760_000_000


@dataclass
class ReceiverRig:
    """One receiver container: its deps (installed in the handler) and its clients."""

    dynamodb: Any
    secretsmanager: Any
    clock: FakeClock
    deps: handler.Deps

    def install(self) -> None:
        handler.set_deps(self.deps)

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = handler.lambda_handler(event, builders.LambdaContext())
        return response

    def outcome(self, event: dict[str, Any]) -> str:
        return str(json.loads(self.invoke(event)["body"])["outcome"])


def bench_session() -> boto3.Session:
    """A session with dummy credentials (Lambda reads its own from the environment).

    moto accepts any credentials; the canned AWS never checks them, but botocore
    still signs every request with them, as it does in Lambda.
    """
    return boto3.Session(
        region_name=REGION, aws_access_key_id="bench", aws_secret_access_key="bench"
    )


def clients(session: boto3.Session | None = None) -> tuple[Any, Any]:
    """A DynamoDB and a Secrets Manager client with the receiver's own configuration."""
    session = session or bench_session()
    return (
        session.client("dynamodb", region_name=REGION, config=handler.DYNAMODB_CONFIG),
        session.client("secretsmanager", region_name=REGION, config=handler.SECRETS_CONFIG),
    )


def make_rig(
    dynamodb: Any,
    secretsmanager: Any,
    *,
    secret_arn: str = SECRET_ARN,
    table: str = TABLE,
    max_age: int = names.DEFAULT_SECRETS_MAX_AGE_SECONDS,
) -> ReceiverRig:
    """Build the handler's deps exactly as production does, with these clients and a clock."""
    settings = Settings.from_env(
        {
            names.ENV_TABLE_NAME: table,
            names.ENV_SIGNING_SECRETS_ARN: secret_arn,
            names.ENV_SECRETS_MAX_AGE_SECONDS: str(max_age),
        }
    )
    clock = FakeClock(NOW)
    deps = handler.build_deps(
        settings, dynamodb=dynamodb, secretsmanager=secretsmanager, clock=clock
    )
    rig = ReceiverRig(dynamodb, secretsmanager, clock, deps)
    rig.install()
    return rig


def accepted_event(now: int = NOW, **fields: Any) -> dict[str, Any]:
    """A new, correctly signed ``package.received`` delivery."""
    return builders.event_for(builders.signed_request(timestamp=now, **fields))


@contextlib.contextmanager
def quiet_output() -> Iterator[None]:
    """Send Powertools' JSON log lines and EMF records to ``/dev/null`` while measuring.

    Lambda ships stdout to CloudWatch; writing every line to ``/dev/null`` keeps the
    formatting and write cost in the figures without flooding the bench's terminal.
    The logger's handlers hold the stream they were made with, so they are re-pointed too.
    """
    saved = sys.stdout
    # The root logger's too: records propagate there, and a library may have given it
    # a console handler (the MCP SDK does).
    every = [*logger.handlers, *logging.getLogger().handlers]
    handlers = [h for h in every if isinstance(h, logging.StreamHandler)]
    streams = [h.stream for h in handlers]
    with open(os.devnull, "w", encoding="utf-8") as sink:
        sys.stdout = sink
        for h in handlers:
            h.setStream(sink)
        try:
            yield
        finally:
            sys.stdout = saved
            for h, stream in zip(handlers, streams, strict=True):
                h.setStream(stream)


def offline_environment() -> None:
    """No bench run may reach a real AWS account: fake credentials, fixed region.

    The same variables as the tests' autouse fixture (tests/conftest.py).
    """
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_SESSION_TOKEN": "bench",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        }
    )
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    os.environ.setdefault(names.ENV_POWERTOOLS_METRICS_NAMESPACE, names.METRICS_NAMESPACE)
