"""Rotating the signing secret in Secrets Manager, with no redeploy (issue 6).

The receiver is built once (``handler.build_deps``, the production wiring) against
moto; the secret is then changed with ``PutSecretValue`` only. Time moves through the
one clock the handler's deps take, which both the timestamp check and the signing
secrets' cache read: the cache's max age is ``SECRETS_MAX_AGE_SECONDS``.
"""

from __future__ import annotations

import json
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
from local.testkit import builders
from local.testkit.aws_calls import AwsCalls
from local.testkit.clock import FakeClock

REGION = "us-east-1"
TABLE = "relaylink-rotation-test"
NOW = 1_796_000_000
MAX_AGE = 300  # the default SECRETS_MAX_AGE_SECONDS
OLD = builders.SECRET
NEW = builders.OTHER_SECRET


@dataclass
class Rotation:
    secrets: Any  # the operator's client (unwatched)
    arn: str
    clock: FakeClock
    calls: AwsCalls
    deps: handler.Deps

    def put(self, secrets: list[str]) -> None:
        """What the operator does: a new secret value, nothing redeployed."""
        self.secrets.put_secret_value(SecretId=self.arn, SecretString=json.dumps(secrets))

    def send(self, secrets: list[str]) -> tuple[int, str | None]:
        """A fresh package.received, signed now with each of ``secrets``; (status, reason)."""
        request = builders.signed_request(timestamp=self.clock.value, secrets=secrets)
        raw = handler.lambda_handler(builders.event_for(request), builders.LambdaContext())
        return raw["statusCode"], json.loads(raw["body"])["reason"]

    def fetches(self) -> int:
        return self.calls.count("secretsmanager")


@pytest.fixture
def rotation() -> Iterator[Any]:
    def make(initial: list[str]) -> Rotation:
        dynamodb = boto3.client("dynamodb", region_name=REGION, config=handler.DYNAMODB_CONFIG)
        receiver_secrets = boto3.client(
            "secretsmanager", region_name=REGION, config=handler.SECRETS_CONFIG
        )
        operator = boto3.client("secretsmanager", region_name=REGION)
        create_table(dynamodb, TABLE)
        arn = operator.create_secret(Name="relaylink-signing", SecretString=json.dumps(initial))[
            "ARN"
        ]
        settings = Settings.from_env(
            {
                names.ENV_TABLE_NAME: TABLE,
                names.ENV_SIGNING_SECRETS_ARN: arn,
                names.ENV_SECRETS_MAX_AGE_SECONDS: str(MAX_AGE),
            }
        )
        clock = FakeClock(NOW)
        deps = handler.build_deps(
            settings, dynamodb=dynamodb, secretsmanager=receiver_secrets, clock=clock
        )
        calls = AwsCalls()
        calls.watch(receiver_secrets)
        handler.set_deps(deps)
        return Rotation(operator, arn, clock, calls, deps)

    with mock_aws():
        try:
            yield make
        finally:
            handler.set_deps(None)


def test_secret_rotation_old_secret_is_refused_once_the_cache_max_age_has_passed(
    rotation: Any,
) -> None:
    r = rotation([OLD, NEW])
    # Two active secrets: each one alone, and RelayLink's rotation header with both.
    assert r.send([OLD]) == (202, None)
    assert r.send([NEW]) == (202, None)
    assert r.send([OLD, NEW]) == (202, None)
    assert r.fetches() == 1

    r.put([NEW])  # the old secret is removed; nothing is redeployed
    r.clock.value = NOW + MAX_AGE - 1
    # Still inside the cache's max age: the list fetched at NOW is what the receiver knows.
    assert r.send([OLD]) == (202, None)
    assert r.fetches() == 1

    r.clock.value = NOW + MAX_AGE
    assert r.send([OLD]) == (401, "no_matching_signature")
    assert r.send([NEW]) == (202, None)
    assert r.send([OLD, NEW]) == (202, None)  # a leftover old entry does no harm
    assert r.fetches() == 2  # one fetch when the max age ran out, then cached again
    assert handler.get_deps() is r.deps  # the same container throughout


def test_secret_rotation_a_new_secret_is_accepted_once_the_cache_max_age_has_passed(
    rotation: Any,
) -> None:
    r = rotation([OLD])
    assert r.send([NEW]) == (401, "no_matching_signature")

    r.put([OLD, NEW])  # rotation step 1: add the new secret beside the old
    r.clock.value = NOW + MAX_AGE - 1
    assert r.send([NEW]) == (401, "no_matching_signature")

    r.clock.value = NOW + MAX_AGE
    assert r.send([NEW]) == (202, None)
    assert r.send([OLD]) == (202, None)
    assert r.fetches() == 2
    assert handler.get_deps() is r.deps


def test_secret_rotation_a_malformed_new_value_is_503_until_fixed_and_never_accepts(
    rotation: Any,
) -> None:
    r = rotation([OLD, NEW])
    assert r.send([OLD]) == (202, None)

    r.put(["not-a-whsec-secret"])  # an operator's mistake
    r.clock.value = NOW + MAX_AGE
    # Fail closed: RelayLink retries a 503, and nothing is accepted on a stale list.
    assert r.send([OLD]) == (503, "signing_secrets_malformed")
    assert r.send([NEW]) == (503, "signing_secrets_malformed")

    r.put([NEW])
    r.clock.value = NOW + 2 * MAX_AGE
    assert r.send([NEW]) == (202, None)
    assert r.send([OLD]) == (401, "no_matching_signature")
