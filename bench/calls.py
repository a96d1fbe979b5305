"""Figure 1: AWS calls per delivery outcome, and Secrets Manager calls per 1,000 requests.

Calls are counted with botocore's ``before-call`` event (one per API call, SDK
retries not included) on the receiver's own clients; HTTP attempts with
``before-send``. Outcomes are measured in a warm container (secrets cached) against
moto, whose conditional writes decide duplicate and quarantine as DynamoDB would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from bench import canned
from bench.output import quiet_output
from bench.receiver_rig import NOW, SECRET_ARN, SECRETS_JSON, clients, make_rig
from bench.stats import Summary, summarize
from local.testkit import builders, moto_world
from local.testkit.aws_calls import AwsCalls
from local.testkit.receiver_rig import ReceiverRig

# Targets: calls per outcome (at most), Secrets Manager calls per 1,000.
TARGETS: Final = {"accepted": 1, "duplicate": 1, "quarantined": 2, "rejected": 0}
SECRETS_TARGET_PER_1000: Final = 1


@dataclass(frozen=True)
class OutcomeCalls:
    outcome: str
    calls: Summary  # API calls per request
    attempts: Summary  # HTTP attempts per request
    operations: dict[str, int]  # operation -> calls over all repeats

    def to_json(self) -> dict[str, Any]:
        return {
            "calls_per_request": self.calls.to_json(),
            "http_attempts_per_request": self.attempts.to_json(),
            "operations": self.operations,
        }


def _scenarios() -> dict[str, Callable[[], list[dict[str, Any]]]]:
    """Per outcome: the requests to send first (setup), the last one is measured."""

    def accepted() -> list[dict[str, Any]]:
        return [builders.event_for(builders.signed_request(timestamp=NOW))]

    def duplicate() -> list[dict[str, Any]]:
        first = builders.signed_request(timestamp=NOW)
        retry = builders.signed_request(
            timestamp=NOW + 30, delivery_id=first.delivery_id, attempt=2
        )
        return [builders.event_for(first), builders.event_for(retry)]

    def quarantined() -> list[dict[str, Any]]:
        first = builders.signed_request(timestamp=NOW)
        other = builders.signed_request(
            timestamp=NOW, delivery_id=first.delivery_id, package_id="pkg_other_bytes"
        )
        return [builders.event_for(first), builders.event_for(other)]

    def rejected() -> list[dict[str, Any]]:
        forged = builders.signed_request(timestamp=NOW, secrets=builders.OTHER_SECRET)
        return [builders.event_for(forged)]

    def ignored() -> list[dict[str, Any]]:
        return [builders.event_for(builders.signed_request(timestamp=NOW, event="ping"))]

    def invalid() -> list[dict[str, Any]]:
        return [builders.event_for(builders.signed_request(timestamp=NOW, package_id=None))]

    return {
        "accepted": accepted,
        "duplicate": duplicate,
        "quarantined": quarantined,
        "rejected": rejected,
        "ignored": ignored,
        "invalid": invalid,
    }


def _measure_outcome(
    rig: ReceiverRig,
    counter: AwsCalls,
    outcome: str,
    make: Callable[[], list[dict[str, Any]]],
    repeats: int,
) -> OutcomeCalls:
    calls: list[float] = []
    attempts: list[float] = []
    operations: dict[str, int] = {}
    for _ in range(repeats):
        *setup, measured = make()
        for event in setup:
            rig.invoke(event)
        counter.reset()
        got = rig.outcome(measured)
        if got != outcome:
            raise RuntimeError(f"expected {outcome}, got {got}")
        calls.append(float(counter.count()))
        attempts.append(float(sum(counter.attempts.values())))
        for (_service, operation), n in counter.calls.items():
            operations[operation] = operations.get(operation, 0) + n
    return OutcomeCalls(outcome, summarize(calls), summarize(attempts), operations)


def per_outcome(*, repeats: int) -> dict[str, OutcomeCalls]:
    """AWS calls each outcome costs a warm receiver, over ``repeats`` deliveries each."""
    with moto_world.moto_world() as world:
        arn = world.create_secret(SECRETS_JSON, prefix="relaylink-bench-calls")
        dynamodb, secretsmanager = clients()
        rig = make_rig(dynamodb, secretsmanager, secret_arn=arn, table=moto_world.TABLE)
        counter = AwsCalls()
        counter.watch(dynamodb, secretsmanager)
        with quiet_output():
            rig.invoke(builders.event_for(builders.signed_request(timestamp=NOW, event="ping")))
            return {
                outcome: _measure_outcome(rig, counter, outcome, make, repeats)
                for outcome, make in _scenarios().items()
            }


@dataclass(frozen=True)
class SecretsCalls:
    requests: int
    secrets_calls: int
    dynamodb_calls: int
    outcomes: dict[str, int]

    @property
    def per_1000(self) -> float:
        return self.secrets_calls * 1000 / self.requests

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "secretsmanager_calls": self.secrets_calls,
            "secretsmanager_calls_per_1000": round(self.per_1000, 3),
            "dynamodb_calls": self.dynamodb_calls,
            "outcomes": self.outcomes,
        }


def secrets_per_thousand(*, requests: int = 1000) -> SecretsCalls:
    """A cold container serving ``requests`` (within the cache age): how many secret fetches.

    Every request needs the secrets (70 % correctly signed and accepted, 30 % signed
    with an unknown secret and rejected). AWS answers at once (:mod:`bench.canned`):
    only the count matters here.
    """
    dynamodb, secretsmanager = clients()
    aws = canned.CannedAws(canned.receiver_answers(SECRETS_JSON, SECRET_ARN))
    aws.install(dynamodb)
    aws.install(secretsmanager)
    rig = make_rig(dynamodb, secretsmanager)
    counter = AwsCalls()
    counter.watch(dynamodb, secretsmanager)
    outcomes: dict[str, int] = {}
    with quiet_output():
        for i in range(requests):
            secret = builders.OTHER_SECRET if i % 10 >= 7 else builders.SECRET
            event = builders.event_for(builders.signed_request(timestamp=NOW, secrets=secret))
            got = rig.outcome(event)
            outcomes[got] = outcomes.get(got, 0) + 1
    return SecretsCalls(
        requests=requests,
        secrets_calls=counter.count("secretsmanager"),
        dynamodb_calls=counter.count("dynamodb"),
        outcomes=outcomes,
    )
