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
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TextIO, cast

import boto3

from bench.output import redirect_output
from bench.receiver_rig import offline_environment
from bench.worker_mcp import MCP_TOKEN
from functions.core import env_keys, table_layout
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
        self.transact_items: Counter[str] = Counter()  # phase -> items in transactions
        self.log_bytes: Counter[str] = Counter()
        self.units: dict[str, defaultdict[str, float]] = {}  # phase -> capacity units

    def on_call(self, model: OperationModel, **_: object) -> None:
        with self._lock:
            self.calls[(self.phase, model.service_model.service_name, model.name)] += 1

    def on_transact(self, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.transact_items[self.phase] += len(params.get("TransactItems", []))
            for entry in params.get("TransactItems", []):
                for action, request in entry.items():
                    self._capacity(action, request, transactional=True)

    def on_dynamodb(self, params: dict[str, Any], event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        if operation in ("PutItem", "UpdateItem", "DeleteItem", "GetItem", "Query"):
            with self._lock:
                self._capacity(operation.removesuffix("Item"), params, transactional=False)

    def _capacity(self, action: str, request: dict[str, Any], *, transactional: bool) -> None:
        """Capacity units of one request, by DynamoDB's rules for items under 1 KB.

        Writes: 1 WRU (2 in a transaction). The by_state index (projection ALL) costs
        1 WRU per write that puts or changes an indexed item, and 2 when the write
        changes the item's index key (a delete and a put in the index). Reads: 0.5 RRU
        eventually consistent, 1 strongly consistent.
        """
        units = self.units.setdefault(self.phase, defaultdict(float))
        text = json.dumps(request)
        touches_index = table_layout.STATE_INDEX_PARTITION_KEY in text
        if action in ("Put", "Update", "Delete"):
            units["table_wru"] += 2 if transactional else 1
            sort_key = (request.get("Item") or request.get("Key") or {}).get(
                table_layout.TABLE_SORT_KEY
            )
            indexed_item = sort_key == {"S": table_layout.SK_INBOX}
            if action == "Put" and touches_index:
                units["index_wru"] += 1
            elif action == "Update" and indexed_item:
                units["index_wru"] += 2 if touches_index else 1
            elif action == "Update" and touches_index:
                units["index_wru"] += 1
        elif action in ("Get", "Query"):
            units["rru"] += 1.0 if request.get("ConsistentRead") else 0.5

    @contextlib.contextmanager
    def output(self) -> Iterator[None]:
        """Every log line and EMF record goes to the counter instead of the terminal."""
        with redirect_output(cast(TextIO, _CountingSink(self))):
            yield


def item_size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it (names + values; numbers approximated)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    (kind, inner), *_ = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        digits = len(str(Decimal(str(inner))).replace("-", "").replace(".", "").lstrip("0"))
        return 1 + (digits + 1) // 2
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in inner.items())
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in inner)
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(v).encode()) for v in inner)
    raise ValueError(f"unknown attribute type {kind}")


@dataclass(frozen=True)
class PipelineCalls:
    deliveries: int
    calls: dict[str, dict[str, float]]  # function -> "service.Operation" -> per delivery
    transact_items: dict[str, float]  # function -> transaction items per delivery
    invocations: dict[str, float]  # function -> Lambda invocations per delivery
    log_bytes: dict[str, float]  # function -> log bytes per delivery
    items: dict[str, dict[str, float]]  # item kind -> {"count", "mean_bytes", "max_bytes"}
    archive_bytes: float  # S3 object bytes per delivery
    mcp_requests: float  # per delivery
    notify_applications: dict[str, int]
    capacity: dict[str, dict[str, float]]  # function -> table_wru/index_wru/rru per delivery

    def to_json(self) -> dict[str, Any]:
        return {
            "deliveries": self.deliveries,
            "calls_per_delivery": self.calls,
            "transaction_items_per_delivery": self.transact_items,
            "invocations_per_delivery": self.invocations,
            "log_bytes_per_delivery": self.log_bytes,
            "items_at_rest": self.items,
            "archive_bytes_per_delivery": self.archive_bytes,
            "mcp_requests_per_delivery": self.mcp_requests,
            "dynamodb_capacity_units_per_delivery": self.capacity,
        }


def measure(*, deliveries: int = 20, batch: int = 10) -> PipelineCalls:
    """``deliveries`` accepted deliveries, relayed in one stream batch, worked in batches."""
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
            boto3.setup_default_session(region_name=REGION)
            assert boto3.DEFAULT_SESSION is not None
            events = boto3.DEFAULT_SESSION.events
            events.register("before-call", counter.on_call)
            events.register(
                "provide-client-params.dynamodb.TransactWriteItems", counter.on_transact
            )
            events.register("provide-client-params.dynamodb", counter.on_dynamodb)
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
                    RelaySettings.from_env({env_keys.ENV_WORK_QUEUE_URL: aws.queue_url}),
                    sqs=boto3.client("sqs"),
                )
            )
            worker = make_worker(aws, token=MCP_TOKEN, notify_url=sink.url)
            stream = StreamReader(aws.streams, aws.stream_arn)
            mcp_before = mcp.requests

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
            applications = sink.sink.counts()
    finally:
        receiver_handler.container_deps.reset()
        relay_handler.container_deps.reset()
        boto3.DEFAULT_SESSION = None
    return _summarize(counter, invocations, items, archive, mcp_requests, applications, deliveries)


def _summarize(
    counter: PhaseCounter,
    invocations: Counter[str],
    items: list[dict[str, Any]],
    archive: int,
    mcp_requests: int,
    applications: dict[str, int],
    deliveries: int,
) -> PipelineCalls:
    calls: dict[str, dict[str, float]] = {}
    for (phase, service, operation), n in sorted(counter.calls.items()):
        if phase == "setup":
            continue
        calls.setdefault(phase, {})[f"{service}.{operation}"] = n / deliveries
    kinds: dict[str, list[int]] = {}
    for item in items:
        kind = item.get(table_layout.KIND_ATTRIBUTE, {}).get("S", "?")
        kinds.setdefault(kind, []).append(item_size(item))
    return PipelineCalls(
        deliveries=deliveries,
        calls=calls,
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
        notify_applications={"keys": len(applications), "total": sum(applications.values())},
        capacity={
            phase: {unit: n / deliveries for unit, n in sorted(units.items())}
            for phase, units in counter.units.items()
            if phase != "setup"
        },
    )
