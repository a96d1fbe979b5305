"""Every function emits every metric it has, through its handler, on in-process moto.

Run inside an emulated Lambda container (:mod:`tests.integration.lambda_container`).
The worker's package source and workflow are scripted (a package id names the error
to raise; one delivery's claim is taken over by a successor), so that one batch
reaches every result the worker counts.
"""

from __future__ import annotations

from typing import Any

from functions.core import env_names, metric_names, table_layout, wire
from functions.core.adapters import dynamodb_items
from functions.core.adapters.cloudwatch_metrics import EmfMetrics
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_package_record import package_attributes
from functions.core.adapters.dynamodb_steps import DynamoDbSteps
from functions.core.approval import AwaitingApproval
from functions.core.errors import (
    BudgetExhausted,
    McpAuthError,
    PackageNotFound,
    ProcessingError,
    TransientError,
)
from functions.core.models import Outcome, WorkItem
from functions.core.package import Package
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.steps import StoredResult
from functions.core.ports.workflow import Ledger
from functions.reconciler import handler as reconciler
from functions.reconciler.settings import Settings as ReconcilerSettings
from functions.relay import handler as relay
from functions.relay.settings import Settings as RelaySettings
from functions.worker import handler as worker
from functions.worker.settings import Settings as WorkerSettings
from functions.workflows.agent import MODEL_STEP
from local.child import LambdaContext
from local.event_sources import sqs_event
from local.mcp_server import demo_package
from local.testkit import botocore_hooks, builders
from local.testkit.moto_world import (
    MAX_ATTEMPTS,
    REGION,
    TABLE,
    MotoWorld,
    StreamReader,
    moto_world,
)
from local.testkit.receiver_rig import make_receiver_rig, receiver_clients
from local.testkit.worker_rig import LEASE_SECONDS, worker_env

UNREACHABLE_MCP_URL = "https://unreachable.relaylink.example/mcp"
# The worker's timeout (infra/worker.py): every message of the batch has time to start.
WORKER_REMAINING_MS = 180_000
PACKAGE_ERRORS: dict[str, type[ProcessingError]] = {
    "pkg_transient": TransientError,
    "pkg_auth": McpAuthError,
    "pkg_missing": PackageNotFound,
}
# Every metric a handler emits.
EVERY_METRIC = frozenset(
    {value for name, value in vars(metric_names).items() if name.startswith("METRIC_")}
    | {metric_names.receiver_outcome_metric(outcome.value) for outcome in Outcome}
    | {relay.METRIC_SKIPPED}
)


def run() -> None:
    with moto_world() as world:
        receiver_outcomes(world)
    with moto_world() as world:
        relay_records(world)
        worker_results(world)
        reconciler_run(world)


def receiver_outcomes(world: MotoWorld) -> None:
    """Every outcome the receiver answers."""
    now = world.clock.now()

    def receiver(secret_value: str) -> Any:
        return make_receiver_rig(
            world.dynamodb,
            world.secretsmanager,
            table=TABLE,
            secret_arn=world.create_secret(secret_value),
            clock=world.clock,
        )

    rig = receiver(f'["{builders.SECRET}"]')
    first = builders.signed_request(timestamp=now)
    for request in (
        first,
        builders.signed_request(timestamp=now, delivery_id=first.delivery_id),  # duplicate
        builders.signed_request(timestamp=now, delivery_id=first.delivery_id, mcp_url="https://o"),
        builders.signed_request(timestamp=now, event="ping"),  # ignored
        builders.signed_request(timestamp=now, secrets=builders.OTHER_SECRET),  # rejected
        builders.signed_request(timestamp=now, package_id=None),  # invalid
        builders.signed_request(timestamp=now, body=b"[" * 100_000 + b"]" * 100_000),  # too deep
    ):
        rig.invoke(builders.event_for(request))
    rig.invoke(builders.http_api_event({}, b"x" * (wire.MAX_BODY_BYTES + 1)))  # too large
    # A receipt throttled past botocore's own attempts, then accepted: its retry is
    # counted (its own clients: the injected faults stay theirs).
    dynamodb, secretsmanager = receiver_clients()
    throttled = make_receiver_rig(
        dynamodb,
        secretsmanager,
        table=TABLE,
        secret_arn=world.create_secret(f'["{builders.SECRET}"]'),
        clock=world.clock,
    )
    botocore_hooks.inject_dynamodb_error(
        dynamodb, "TransactWriteItems", code="ThrottlingException", times=3
    )
    throttled.invoke(builders.event_for(builders.signed_request(timestamp=now)))
    broken = receiver("not a list")
    broken.invoke(builders.event_for(builders.signed_request(timestamp=now)))  # unavailable


def relay_records(world: MotoWorld) -> None:
    """One outbox record relayed, one malformed record skipped."""
    world.accept(work(100))
    world.dynamodb.put_item(
        TableName=TABLE,
        Item={
            **dynamodb_items.outbox_key("broken", 0, shards=1),
            table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_OUTBOX},
        },
    )
    records = StreamReader(world.streams, world.stream_arn).new_records()
    relay.container_deps.set(
        relay.build_deps(
            RelaySettings.from_env({env_names.ENV_WORK_QUEUE_URL: world.queue_url}), sqs=world.sqs
        )
    )
    event = builders.stream_event(StreamReader.filtered(records))
    relay.lambda_handler(event, builders.LambdaContext())
    world.receive()  # the relayed message, out of the worker's way
    # Skipped, it has served: left in the received log at second 0, it would send the
    # reconciler's run below walking the log's windows from 1970 until its deadline.
    world.dynamodb.delete_item(
        TableName=TABLE, Key=dynamodb_items.outbox_key("broken", 0, shards=1)
    )


def worker_results(world: MotoWorld) -> None:
    """One batch that reaches every result the worker counts (one message is not even
    started: its MCP server is unreachable)."""
    now = world.clock.now()
    completed, missing, deferred, stolen = work(0), work(1), work(2), work(3)
    exhausted, uncertain = work(4), work(5)
    # A step a dead worker started (a rerun), and a delivery that finds the budget spent.
    rerun, over_budget = work(10), work(11)
    # A delivery whose proposal waits for a person (parked; the reconciler then reports
    # how long it has waited).
    parked = work(14)
    failing = [work(6, "pkg_transient"), work(7, "pkg_auth"), work(8, "pkg_missing")]
    unreachable = WorkItem(work(9).delivery_id, "package.received", "pkg_9", UNREACHABLE_MCP_URL)
    accepted = (completed, deferred, stolen, uncertain, unreachable, rerun, over_budget, parked)
    for item in (*accepted, *failing):
        world.accept(item)
    world.accept(exhausted, attempts={"N": str(MAX_ATTEMPTS)})
    # Past its TTL (closed unrun), and a suspect whose earlier attempts died twice (set
    # aside, then run alone).
    expired, suspect = work(12), work(13)
    world.accept(expired, **{table_layout.TTL_ATTRIBUTE: {"N": str(now + 1)}})
    world.accept(suspect, attempts={"N": "2"})
    # A message naming another package than its inbox item (refused), and a delivery
    # whose recorded package's content is gone and whose refetch is another package.
    refused, changed = work(15), work(16)
    world.accept(refused)
    recorded = PackageRecord(
        delivery_id=changed.delivery_id,
        digest="0" * 64,
        content=StoredResult(size=2, inline="{}"),
        recorded_at=now,
        recorded_by="an earlier attempt",
    )
    world.accept(changed, **package_attributes(recorded))
    refused = WorkItem(refused.delivery_id, refused.event, "pkg_someone_else", refused.mcp_url)
    token_arn = world.create_secret("unused-token", prefix="relaylink-mcp")
    settings = WorkerSettings.from_env(
        worker_env(
            world,
            token_arn=token_arn,
            notify_url="https://notify.invalid/",
            # One message at a time: each scenario reaches its count whatever order the
            # batch's threads would take.
            **{env_names.ENV_BATCH_CONCURRENCY: "1"},
        )
    )
    deps = worker.build_deps(
        settings,
        dynamodb=world.dynamodb,
        sqs=world.sqs,
        secretsmanager=world.secretsmanager,
        clock=world.clock,
        workflow=ScriptedWorkflow(
            world,
            stolen=stolen.delivery_id,
            over_budget=over_budget.delivery_id,
            parked=parked.delivery_id,
            metrics=EmfMetrics(),
        ),
        packages=lambda deadline: ScriptedPackages(),
    )
    deps.processor.claims.claim(
        deferred.delivery_id, owner="other", now=now, lease_seconds=LEASE_SECONDS
    )
    deps.processor.effects.record_intent(
        uncertain.delivery_id, "notify", key="k", now=now, expires_at=0
    )
    DynamoDbSteps(client=world.dynamodb, table_name=TABLE).start(
        rerun.delivery_id, MODEL_STEP, now=now, expires_at=0
    )
    batch = (
        completed,
        missing,
        deferred,
        stolen,
        exhausted,
        uncertain,
        unreachable,
        rerun,
        over_budget,
        expired,
        suspect,
        parked,
        *failing,
    )
    for item in batch:
        world.enqueue(item)
    worker.container_deps.set(deps)
    event = sqs_event(world.receive(limit=len(batch)), world.queue_arn, REGION)
    worker.lambda_handler(event, LambdaContext("worker", remaining_ms=WORKER_REMAINING_MS))
    # A batch of their own: the one above is timed to leave one message unstarted.
    for item in (refused, changed):
        world.enqueue(item)
    event = sqs_event(world.receive(limit=2), world.queue_arn, REGION)
    worker.lambda_handler(event, LambdaContext("worker", remaining_ms=WORKER_REMAINING_MS))


def reconciler_run(world: MotoWorld) -> None:
    """One run: it counts all its counts, zeros included (and reports its lag, and how
    long the parked delivery has waited)."""
    world.clock.advance(60)
    settings = ReconcilerSettings.from_env(
        {
            env_names.ENV_TABLE_NAME: TABLE,
            env_names.ENV_WORK_QUEUE_URL: world.queue_url,
            env_names.ENV_LEASE_SECONDS: str(LEASE_SECONDS),
        }
    )
    reconciler.container_deps.set(
        reconciler.build_deps(settings, dynamodb=world.dynamodb, sqs=world.sqs, clock=world.clock)
    )
    reconciler.lambda_handler({}, builders.LambdaContext())


def work(n: int, package: str | None = None) -> WorkItem:
    return WorkItem(
        f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}",
        "package.received",
        package or f"pkg_{n:04d}",
        builders.MCP_URL,
    )


class ScriptedPackages:
    """A package source: the package ids in ``PACKAGE_ERRORS`` raise their error, and
    ``UNREACHABLE_MCP_URL``'s server failed at transport level."""

    async def __aenter__(self) -> ScriptedPackages:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def unreachable(self, mcp_url: str) -> bool:
        return mcp_url == UNREACHABLE_MCP_URL

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        if package_id in PACKAGE_ERRORS:
            raise PACKAGE_ERRORS[package_id]()
        return Package.from_mapping(demo_package(package_id))


class ScriptedWorkflow:
    """Runs the model step (counting a model call as the agent workflow does, through
    its own metrics sink) and applies one effect; for ``stolen``, a successor takes the
    claim over first; for ``over_budget``, the day's token budget is spent."""

    def __init__(
        self, world: MotoWorld, *, stolen: str, over_budget: str, parked: str, metrics: EmfMetrics
    ) -> None:
        self._world = world
        self._stolen = stolen
        self._over_budget = over_budget
        self._parked = parked
        self._metrics = metrics

    def run(self, work: WorkItem, package: Any, effects: Ledger) -> None:
        if work.delivery_id == self._stolen:
            DynamoDbClaims(client=self._world.dynamodb, table_name=TABLE).claim(
                work.delivery_id,
                owner="successor",
                now=self._world.clock.now() + LEASE_SECONDS,  # the lease ran out
                lease_seconds=LEASE_SECONDS,
            )
        if work.delivery_id == self._over_budget:
            raise BudgetExhausted(retry_at=self._world.clock.now() + 3600)
        if work.delivery_id == self._parked:
            raise AwaitingApproval("alert", deadline=self._world.clock.now() + 3600)
        effects.step(MODEL_STEP, self._model_call)
        effects.run("notify", lambda key: None)

    def _model_call(self) -> dict[str, str]:
        self._metrics.count(metric_names.METRIC_MODEL_CALLS)
        return {"text": "summary"}
