"""What one delivery costs end to end, counted: the inputs of ``docs/cost.md``.

Deliveries go through the production handlers in process, on moto, the demo MCP
server and the notify sink: receiver -> stream (read as Lambda's event-source
mapping would, after its filter) -> relay -> SQS -> worker (batches of ten).
Every AWS API call is counted per function through botocore events on boto3's
default session (every client of every function comes from it), with the items a
``TransactWriteItems`` carries; the table's items are measured at the end (their
DynamoDB size), and so are the bytes each function logs.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, cast

import boto3
from aws_lambda_powertools.logging.filters import SuppressFilter

from bench.output import redirect_output
from bench.receiver_rig import offline_environment
from bench.worker_mcp import MCP_TOKEN
from bench.write_units import (
    WORKFLOW_PHASE,
    WORKFLOW_RECORD_PREFIXES,
    WriteMeter,
    WriteUnits,
    item_size,
)
from functions.core import env_names, metric_names, settings_table, table_layout
from functions.receiver import handler as receiver_handler
from functions.relay import handler as relay_handler
from functions.relay.settings import Settings as RelaySettings
from local.mcp_server import start_in_thread
from local.notify_sink import NotifySinkServer
from local.testkit import builders
from local.testkit.moto_world import BUCKET, REGION, TABLE, StreamReader, moto_world
from local.testkit.receiver_rig import make_receiver_rig, receiver_clients
from local.testkit.worker_rig import make_worker

if TYPE_CHECKING:
    from botocore.model import OperationModel


class _CountingSink(io.TextIOBase):
    """A write-only stream that counts the UTF-8 bytes written to it, per phase."""

    def __init__(self, phases: PhaseCounter) -> None:
        self._phases = phases

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._phases.log_bytes[self._phases.phase] += len(text.encode("utf-8"))
        return len(text)


class PhaseCounter:
    """API calls and log bytes, attributed to the function running now (``phase``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.phase = "setup"
        self.calls: Counter[tuple[str, str, str]] = Counter()  # (phase, service, operation)
        # Of those, the calls made for the workflow's effects: its effect and step
        # records, and its objects (the pipeline itself never calls S3).
        self.workflow_calls: Counter[tuple[str, str, str]] = Counter()
        self.transact_items: Counter[str] = Counter()  # phase -> items in transactions
        self.log_bytes: Counter[str] = Counter()
        self.units: dict[str, defaultdict[str, float]] = {}  # phase -> capacity units

    def on_call(self, model: OperationModel, **_: object) -> None:
        service = model.service_model.service_name
        with self._lock:
            self.calls[(self.phase, service, model.name)] += 1
            if service == "s3":
                self.workflow_calls[(self.phase, service, model.name)] += 1

    def on_transact(self, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.transact_items[self.phase] += len(params.get("TransactItems", []))
            for entry in params.get("TransactItems", []):
                for action, request in entry.items():
                    self._capacity(action, request)

    def on_dynamodb(self, params: dict[str, Any], event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        if operation in ("PutItem", "UpdateItem", "DeleteItem", "GetItem", "Query"):
            workflow = _workflow_record(params)
            with self._lock:
                # A workflow record's reads are the workflow's (its effect ledger's).
                self._capacity(
                    operation.removesuffix("Item"), params, WORKFLOW_PHASE if workflow else None
                )
                if workflow:
                    self.workflow_calls[(self.phase, "dynamodb", operation)] += 1

    def _capacity(self, action: str, request: dict[str, Any], phase: str | None = None) -> None:
        """Read units of one request: 0.5 RRU eventually consistent, 1 strongly consistent
        (items under 4 KB), counted for ``phase`` (the running function's by default).
        Write units come from :class:`bench.write_units.WriteMeter`, which sees the items
        each write changed."""
        units = self.units.setdefault(phase or self.phase, defaultdict(float))
        if action in ("Get", "Query"):
            units["rru"] += 1.0 if request.get("ConsistentRead") else 0.5

    @contextlib.contextmanager
    def output(self) -> Iterator[None]:
        """Every log line and EMF record goes to the counter instead of the terminal."""
        with redirect_output(cast(TextIO, _CountingSink(self))):
            yield


@dataclass(frozen=True)
class PipelineCalls:
    deliveries: int
    calls: dict[str, dict[str, float]]  # function -> "service.Operation" -> per delivery
    workflow_calls: dict[str, dict[str, float]]  # of those, the workflow's effects'
    transact_items: dict[str, float]  # function -> transaction items per delivery
    invocations: dict[str, float]  # function -> Lambda invocations per delivery
    log_bytes: dict[str, float]  # function -> log bytes per delivery
    items: dict[str, dict[str, float]]  # item kind -> {"count", "mean_bytes", "max_bytes"}
    archive_bytes: float  # S3 object bytes per delivery
    mcp_requests: float  # per delivery
    mcp_request_bytes: float  # per delivery: what the worker sent the MCP server
    workflow: str
    notify_applications: dict[str, int]
    capacity: dict[str, dict[str, float]]  # function -> table_wru/index_wru/rru per delivery
    write_units: WriteUnits  # every write, metered from the items it changed

    def to_json(self) -> dict[str, Any]:
        return {
            "deliveries": self.deliveries,
            "calls_per_delivery": self.calls,
            "workflow_calls_per_delivery": self.workflow_calls,
            "transaction_items_per_delivery": self.transact_items,
            "invocations_per_delivery": self.invocations,
            "log_bytes_per_delivery": self.log_bytes,
            "items_at_rest": self.items,
            "archive_bytes_per_delivery": self.archive_bytes,
            "mcp_requests_per_delivery": self.mcp_requests,
            "mcp_request_bytes_per_delivery": self.mcp_request_bytes,
            "workflow": self.workflow,
            "notifications_per_delivery": self.notify_applications["total"] / self.deliveries,
            "dynamodb_capacity_units_per_delivery": self.capacity,
            "dynamodb_writes_per_delivery": self.write_units.breakdown(),
        }


def measure(
    *, deliveries: int = 20, batch: int = 10, workflow: str = settings_table.WORKFLOW.default
) -> PipelineCalls:
    """``deliveries`` accepted deliveries, relayed in one stream batch, worked in batches
    by ``workflow``."""
    offline_environment()
    counter = PhaseCounter()
    invocations: Counter[str] = Counter()
    try:
        with (
            moto_world() as aws,
            NotifySinkServer() as sink,
            start_in_thread(token=MCP_TOKEN) as mcp,
            counter.output(),
        ):
            # After mock_aws started (it resets boto3's default session): every client
            # made from here on, by any function, reports its calls to the counter.
            # Lambda's runtime puts its handler on the root logger before the function's
            # code is imported, and Powertools' logger then filters its own records out
            # of it; the in-process MCP server gave the root logger a handler later, so
            # the same filter goes on it here: a line is counted once, as Lambda ships it.
            _suppress_service_on_root()
            boto3.setup_default_session(region_name=REGION)
            assert boto3.DEFAULT_SESSION is not None
            events = boto3.DEFAULT_SESSION.events
            events.register("before-call", counter.on_call)
            events.register(
                "provide-client-params.dynamodb.TransactWriteItems", counter.on_transact
            )
            events.register("provide-client-params.dynamodb", counter.on_dynamodb)
            # Its reader comes from a session of its own: its reads are neither counted
            # nor metered.
            reader = boto3.session.Session(region_name=REGION).client("dynamodb")
            meter = WriteMeter(reader, TABLE, lambda: counter.phase)
            meter.register(events)
            dynamodb, secretsmanager = receiver_clients()
            receiver = make_receiver_rig(
                dynamodb,
                secretsmanager,
                table=TABLE,
                secret_arn=aws.create_secret(
                    json.dumps([builders.SECRET]), prefix="relaylink-bench-signing"
                ),
                clock=aws.clock,
            )
            relay_handler.container_deps.set(
                relay_handler.build_deps(
                    RelaySettings.from_env({env_names.ENV_WORK_QUEUE_URL: aws.queue_url}),
                    sqs=boto3.client("sqs"),
                )
            )
            worker = make_worker(
                aws,
                token=MCP_TOKEN,
                notify_url=sink.url,
                environment={env_names.ENV_WORKFLOW: workflow},
            )
            stream = StreamReader(aws.streams, aws.stream_arn)
            mcp_before = mcp.requests
            mcp_bytes_before = mcp.request_bytes

            counter.phase = "receiver"
            for _ in range(deliveries):
                request = builders.signed_request(
                    timestamp=aws.clock.value, package_id=builders.PACKAGE_ID, mcp_url=mcp.url
                )
                response = receiver.invoke(builders.event_for(request))
                invocations["receiver"] += 1
                if response["statusCode"] != 202:
                    raise RuntimeError(f"delivery not accepted: {response}")

            counter.phase = "setup"
            records = StreamReader.filtered(stream.new_records())
            counter.phase = "relay"
            for start in range(0, len(records), 100):  # the relay's batch size, at most
                result = relay_handler.lambda_handler(
                    builders.stream_event(records[start : start + 100]), builders.LambdaContext()
                )
                invocations["relay"] += 1
                if result != {"batchItemFailures": []}:
                    raise RuntimeError(f"relay failed: {result}")

            done = 0
            while done < deliveries:
                counter.phase = "setup"
                messages = aws.receive(limit=batch)
                if not messages:
                    raise RuntimeError(f"queue empty after {done} of {deliveries}")
                counter.phase = "worker"
                worker.run(messages)  # includes the event-source mapping's deletes
                invocations["worker"] += 1
                done += len(messages)

            counter.phase = "setup"
            items = aws.items()
            objects = aws.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
            archive = sum(o["Size"] for o in objects)
            mcp_requests = mcp.requests - mcp_before
            mcp_bytes = mcp.request_bytes - mcp_bytes_before
            applications = sink.sink.counts()
    finally:
        receiver_handler.container_deps.reset()
        relay_handler.container_deps.reset()
        boto3.DEFAULT_SESSION = None
    return _summarize(
        counter,
        invocations,
        items,
        archive,
        mcp_requests,
        mcp_bytes,
        workflow,
        applications,
        WriteUnits(deliveries, [w for w in meter.writes if w.phase != "setup"]),
    )


def _workflow_record(params: dict[str, Any]) -> bool:
    """Whether a single-item request is for a workflow's effect or step record."""
    key = params.get("Key") or params.get("Item") or {}
    sort_key = str(key.get(table_layout.TABLE_SORT_KEY, {}).get("S", ""))
    return sort_key.startswith(WORKFLOW_RECORD_PREFIXES)


def _suppress_service_on_root() -> None:
    for handler in logging.getLogger().handlers:
        handler.addFilter(SuppressFilter(metric_names.SERVICE))


def _summarize(
    counter: PhaseCounter,
    invocations: Counter[str],
    items: list[dict[str, Any]],
    archive: int,
    mcp_requests: int,
    mcp_bytes: int,
    workflow: str,
    applications: dict[str, int],
    write_units: WriteUnits,
) -> PipelineCalls:
    deliveries = write_units.deliveries

    def per_delivery(counted: Counter[tuple[str, str, str]]) -> dict[str, dict[str, float]]:
        found: dict[str, dict[str, float]] = {}
        for (phase, service, operation), n in sorted(counted.items()):
            if phase != "setup":
                found.setdefault(phase, {})[f"{service}.{operation}"] = n / deliveries
        return found

    kinds: dict[str, list[int]] = {}
    for item in items:
        kind = item.get(table_layout.KIND_ATTRIBUTE, {}).get("S", "?")
        kinds.setdefault(kind, []).append(item_size(item))
    return PipelineCalls(
        deliveries=deliveries,
        calls=per_delivery(counter.calls),
        workflow_calls=per_delivery(counter.workflow_calls),
        transact_items={p: n / deliveries for p, n in counter.transact_items.items()},
        invocations={f: n / deliveries for f, n in invocations.items()},
        log_bytes={p: n / deliveries for p, n in counter.log_bytes.items() if p != "setup"},
        items={
            kind: {
                "count_per_delivery": len(sizes) / deliveries,
                "mean_bytes": sum(sizes) / len(sizes),
                "max_bytes": float(max(sizes)),
            }
            for kind, sizes in sorted(kinds.items())
        },
        archive_bytes=archive / deliveries,
        mcp_requests=mcp_requests / deliveries,
        mcp_request_bytes=mcp_bytes / deliveries,
        workflow=workflow,
        notify_applications={"keys": len(applications), "total": sum(applications.values())},
        capacity=_capacity(counter, write_units),
        write_units=write_units,
    )


def _capacity(counter: PhaseCounter, write_units: WriteUnits) -> dict[str, dict[str, float]]:
    """Per function: the metered write units and the counted read units, per delivery."""
    found = {phase: dict(units) for phase, units in write_units.by_phase().items()}
    for phase, units in counter.units.items():
        for unit, n in units.items():
            found.setdefault(phase, {})[unit] = n / write_units.deliveries
    return {
        phase: dict(sorted(units.items())) for phase, units in found.items() if phase != "setup"
    }
