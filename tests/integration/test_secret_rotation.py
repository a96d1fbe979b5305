"""Rotating the signing secret in Secrets Manager, with no redeploy.

The receiver is built once (``handler.build_deps``, the production wiring) against
moto; the secret is then changed with ``PutSecretValue`` only. Time moves through the
one clock the handler's deps take, which both the timestamp check and the signing
secrets' cache read: the cache's max age is ``SECRETS_MAX_AGE_SECONDS``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from functions.receiver import handler
from local.testkit import builders
from tests.receiver_harness import Receiver

NOW = 1_796_000_000
MAX_AGE = 300  # the default SECRETS_MAX_AGE_SECONDS
OLD = builders.SECRET
NEW = builders.OTHER_SECRET


@dataclass
class Rotation:
    receiver: Receiver

    def put(self, secrets: list[str]) -> None:
        """What the operator does (with a client of its own): a new value, no redeploy."""
        self.receiver.world.secretsmanager.put_secret_value(
            SecretId=self.receiver.secret_arn, SecretString=json.dumps(secrets)
        )

    def send(self, secrets: list[str]) -> tuple[int, str | None]:
        """A fresh package.received, signed now with each of ``secrets``; (status, reason)."""
        request = builders.signed_request(timestamp=self.receiver.clock.value, secrets=secrets)
        response = self.receiver.invoke(builders.event_for(request))
        return response.status, response.reason

    def fetches(self) -> int:
        return self.receiver.calls.count("secretsmanager")


@pytest.fixture
def rotation(receiver_factory: Any) -> Callable[[list[str]], Rotation]:
    def make(initial: list[str]) -> Rotation:
        return Rotation(receiver_factory(initial, now=NOW, max_age=MAX_AGE))

    return make


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
    r.receiver.clock.value = NOW + MAX_AGE - 1
    # Still inside the cache's max age: the list fetched at NOW is what the receiver knows.
    assert r.send([OLD]) == (202, None)
    assert r.fetches() == 1

    r.receiver.clock.value = NOW + MAX_AGE
    assert r.send([OLD]) == (401, "no_matching_signature")
    assert r.send([NEW]) == (202, None)
    assert r.send([OLD, NEW]) == (202, None)  # a leftover old entry does no harm
    assert r.fetches() == 2  # one fetch when the max age ran out, then cached again
    assert handler.container_deps.get() is r.receiver.deps  # the same container throughout


def test_secret_rotation_a_new_secret_is_accepted_once_the_cache_max_age_has_passed(
    rotation: Any,
) -> None:
    r = rotation([OLD])
    assert r.send([NEW]) == (401, "no_matching_signature")

    r.put([OLD, NEW])  # rotation step 1: add the new secret beside the old
    r.receiver.clock.value = NOW + MAX_AGE - 1
    assert r.send([NEW]) == (401, "no_matching_signature")

    r.receiver.clock.value = NOW + MAX_AGE
    assert r.send([NEW]) == (202, None)
    assert r.send([OLD]) == (202, None)
    assert r.fetches() == 2
    assert handler.container_deps.get() is r.receiver.deps


def test_secret_rotation_a_malformed_new_value_is_503_until_fixed_and_never_accepts(
    rotation: Any,
) -> None:
    r = rotation([OLD, NEW])
    assert r.send([OLD]) == (202, None)

    r.put(["not-a-whsec-secret"])  # an operator's mistake
    r.receiver.clock.value = NOW + MAX_AGE
    # Fail closed: RelayLink retries a 503, and nothing is accepted on a stale list.
    assert r.send([OLD]) == (503, "signing_secrets_malformed")
    assert r.send([NEW]) == (503, "signing_secrets_malformed")

    r.put([NEW])
    r.receiver.clock.value = NOW + 2 * MAX_AGE
    assert r.send([NEW]) == (202, None)
    assert r.send([OLD]) == (401, "no_matching_signature")
