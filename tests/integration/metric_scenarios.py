"""Every function emits every metric it has, through its handler, on in-process moto.

Run inside an emulated Lambda container (:mod:`tests.integration.lambda_container`).
The worker's package source and workflow are scripted (a package id names the error
to raise; one delivery's claim is taken over by a successor), so that one batch
reaches every result the worker counts.
"""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from functions.core import env_keys, metric_names, table_layout, wire
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.effects import EffectLedger
from functions.core.errors import McpAuthError, PackageNotFound, ProcessingError, TransientError
from functions.core.models import Outcome, WorkItem
from functions.reconciler import handler as reconciler
from functions.reconciler.settings import Settings as ReconcilerSettings
from functions.relay import handler as relay
from functions.relay.settings import Settings as RelaySettings
from functions.worker import handler as worker
from functions.worker.settings import Settings as WorkerSettings
from local.aws_resources import create_table
from tests import builders
from tests.integration import processing_harness as harness
from tests.integration.receiver_harness import REGION, TABLE, World, make_receiver

NOW = 1_760_000_000
PACKAGE_ERRORS: dict[str, type[ProcessingError]] = {
    "pkg_transient": TransientError,
    "pkg_auth": McpAuthError,
    "pkg_missing": PackageNotFound,
}
EVERY_METRIC = frozenset(
    {value for name, value in vars(metric_names).items() if name.startswith("METRIC_")}
    | {metric_names.receiver_outcome_metric(outcome.value) for outcome in Outcome}
    | {relay.METRIC_SKIPPED}
)


def run() -> None:
    with mock_aws():
        receiver_outcomes()
    with harness.moto_aws() as aws:
        relay_records(aws)
        worker_results(aws)
        reconciler_run(aws)


def receiver_outcomes() -> None:
    """Every outcome the receiver answers."""
    reader = boto3.client("dynamodb", region_name=REGION)
    create_table(reader, TABLE)
    world = World(reader, boto3.client("secretsmanager", region_name=REGION))
    receiver = make_receiver(world, secrets=[builders.SECRET], now=NOW)
    first = builders.signed_request(timestamp=NOW)
    for request in (
        first,
        builders.signed_request(timestamp=NOW, delivery_id=first.delivery_id),  # duplicate
        builders.signed_request(timestamp=NOW, delivery_id=first.delivery_id, mcp_url="https://o"),
        builders.signed_request(timestamp=NOW, event="ping"),  # ignored
        builders.signed_request(timestamp=NOW, secrets=builders.OTHER_SECRET),  # rejected
        builders.signed_request(timestamp=NOW, package_id=None),  # invalid
    ):
        receiver.invoke(builders.event_for(request))
    receiver.invoke(builders.http_api_event({}, b"x" * (wire.MAX_BODY_BYTES + 1)))  # too large
    broken = make_receiver(world, secrets=[], now=NOW, secret_value="not a list")
    broken.invoke(builders.event_for(builders.signed_request(timestamp=NOW)))  # unavailable


def relay_records(aws: harness.Aws) -> None:
    """One outbox record relayed, one malformed record skipped."""
    aws.accept(work(100))
    aws.dynamodb.put_item(
        TableName=harness.TABLE,
        Item={
            **dynamodb_items.outbox_key("broken"),
            table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_OUTBOX},
        },
    )
    records = harness.StreamReader(aws.streams, aws.stream_arn).new_records()
    relay.container_deps.set(
        relay.build_deps(
            RelaySettings.from_env({env_keys.ENV_WORK_QUEUE_URL: aws.queue_url}), sqs=aws.sqs
        )
    )
    event = harness.stream_event(harness.StreamReader.filtered(records))
    relay.lambda_handler(event, builders.LambdaContext())
    aws.receive()  # the relayed message, out of the worker's way


def worker_results(aws: harness.Aws) -> None:
    """One batch that reaches every result the worker counts."""
    completed, missing, deferred, stolen = work(0), work(1), work(2), work(3)
    exhausted, uncertain = work(4), work(5)
    failing = [work(6, "pkg_transient"), work(7, "pkg_auth"), work(8, "pkg_missing")]
    for item in (completed, deferred, stolen, uncertain, *failing):
        aws.accept(item)
    aws.accept(exhausted, attempts={"N": str(harness.MAX_ATTEMPTS)})
    settings = WorkerSettings.from_env(
        harness.worker_env(aws, token_arn=aws.token_arn, notify_url="https://notify.invalid/")
    )
    deps = worker.build_deps(
        settings,
        dynamodb=aws.dynamodb,
        sqs=aws.sqs,
        secretsmanager=aws.secretsmanager,
        clock=aws.clock,
        workflow=ScriptedWorkflow(aws, stolen=stolen.delivery_id),
        packages=ScriptedPackages,
    )
    deps.processor.claims.claim(
        deferred.delivery_id, owner="other", now=NOW, lease_seconds=harness.LEASE_SECONDS
    )
    deps.processor.effects.record_intent(
        uncertain.delivery_id, "notify", key="k", now=NOW, expires_at=0
    )
    for item in (completed, missing, deferred, stolen, exhausted, uncertain, *failing):
        aws.enqueue(item)
    worker.container_deps.set(deps)
    worker.lambda_handler(harness.sqs_event(aws.receive()), builders.LambdaContext())


def reconciler_run(aws: harness.Aws) -> None:
    """One run: it counts all four of its metrics, zeros included."""
    settings = ReconcilerSettings.from_env(
        {
            env_keys.ENV_TABLE_NAME: harness.TABLE,
            env_keys.ENV_WORK_QUEUE_URL: aws.queue_url,
            env_keys.ENV_LEASE_SECONDS: str(harness.LEASE_SECONDS),
        }
    )
    reconciler.container_deps.set(
        reconciler.build_deps(settings, dynamodb=aws.dynamodb, sqs=aws.sqs, clock=aws.clock)
    )
    reconciler.lambda_handler({}, builders.LambdaContext())


def work(n: int, package: str | None = None) -> WorkItem:
    return WorkItem(
        f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}",
        "package.received",
        package or f"pkg_{n:04d}",
        "https://mcp.relaylink.example/mcp",
    )


class ScriptedPackages:
    """A package source: the package ids in ``PACKAGE_ERRORS`` raise their error."""

    async def __aenter__(self) -> ScriptedPackages:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def get_package(self, mcp_url: str, package_id: str) -> Any:
        if package_id in PACKAGE_ERRORS:
            raise PACKAGE_ERRORS[package_id]()
        return {"package_id": package_id}


class ScriptedWorkflow:
    """Applies one effect; for ``stolen``, a successor takes the claim over first."""

    def __init__(self, aws: harness.Aws, *, stolen: str) -> None:
        self._aws = aws
        self._stolen = stolen

    def run(self, work: WorkItem, package: Any, effects: EffectLedger) -> None:
        if work.delivery_id == self._stolen:
            DynamoDbClaims(client=self._aws.dynamodb, table_name=harness.TABLE).claim(
                work.delivery_id,
                owner="successor",
                now=self._aws.clock.now() + harness.LEASE_SECONDS,  # the lease ran out
                lease_seconds=harness.LEASE_SECONDS,
            )
        effects.run("notify", lambda key: None)
