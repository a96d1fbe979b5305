"""Figure 12's measurement: the reconciler against a large open backlog over moto.

An MCP outage leaves many items open: processing, their leases not yet run out (nothing
for the reconciler to do with them but read them). Among them, a few receipts whose
relay message was lost: pending, never listed, older than the received age. Runs of the
production reconciler (its handler's deps, in process, over moto) with a run's real time
budget until the pass over the open items is through, over moto with the local
emulator's faster paths (an index Query reads the partition it names, not the table);
measured: the open items a run reads per second, and how long after the first run
started every lost receipt was back in the work queue.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from functions.core import env_names, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.deadline import Deadline
from functions.core.models import State, WorkItem
from functions.core.reconcile import SAFETY_MARGIN_SECONDS
from functions.reconciler import handler
from functions.reconciler.settings import Settings
from infra.capacity import RECONCILER_TIMEOUT_SECONDS
from local.aws_emulator import moto_patches
from local.testkit import builders
from local.testkit.moto_world import REGION, TABLE, MotoWorld, moto_world

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef

PENDING_AGE: Final = 600
LEASE: Final = 300
MCP_URL: Final = "https://mcp.relaylink.example/mcp"


@dataclass(frozen=True)
class BacklogResult:
    open_items: int
    lost: int
    runs: int
    items_per_second: float  # open items read by the pass, over its runs' time
    recovered_seconds: float  # first run's start to the last lost receipt sent
    pass_seconds: float

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _id(n: int) -> str:
    return f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}"


def _seed(aws: MotoWorld, open_items: int, lost: int) -> list[str]:
    now = aws.clock.value
    puts: list[WriteRequestTypeDef] = []
    for n in range(open_items):
        item = dataclasses.replace(
            builders.inbox_item(_id(n), received_at=now),
            state=State.PROCESSING,
            lease_until=now + 100 * PENDING_AGE,
        )
        raw = dynamodb_items.inbox_to_item(item)
        raw[table_layout.STATE_INDEX_PARTITION_KEY] = {
            "S": dynamodb_items.state_shard(table_layout.STATE_LABEL_OPEN, item.delivery_id)
        }
        raw[table_layout.STATE_INDEX_SORT_KEY] = {"N": str(now)}
        puts.append({"PutRequest": {"Item": raw}})
    lost_ids = []
    for n in range(open_items, open_items + lost):
        work = WorkItem(_id(n), "package.received", f"pkg_{n}", MCP_URL)
        lost_ids.append(work.delivery_id)
        inbox = builders.inbox_item(work.delivery_id, received_at=now)
        puts.append({"PutRequest": {"Item": dynamodb_items.inbox_to_item(inbox)}})
        outbox = dynamodb_items.outbox_to_item(
            work,
            created_at=now,
            expires_at=inbox.expires_at,
            shards=table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
        )
        puts.append({"PutRequest": {"Item": outbox}})
    _put_in_moto(puts)
    return lost_ids


def _put_in_moto(puts: list[WriteRequestTypeDef]) -> None:
    """The items, straight into moto's table (unmeasured set-up: 100,000 items through
    BatchWriteItem would take longer than the pass)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID  # noqa: PLC0415
    from moto.dynamodb.models import dynamodb_backends  # noqa: PLC0415

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(TABLE)
    for put in puts:
        table.put_item(dict(put["PutRequest"]["Item"]))


def measure(*, open_items: int, lost: int = 20) -> BacklogResult:
    # moto's own Query scans and sorts the whole table for each index page; the
    # emulator's faster paths read the one index partition, as DynamoDB does.
    with moto_world() as aws, moto_patches.faster_paths():
        lost_ids = set(_seed(aws, open_items, lost))
        aws.clock.advance(PENDING_AGE + 1)
        settings = Settings.from_env(
            {
                env_names.ENV_TABLE_NAME: TABLE,
                env_names.ENV_WORK_QUEUE_URL: aws.queue_url,
                env_names.ENV_LEASE_SECONDS: str(LEASE),
                env_names.ENV_RECONCILE_PENDING_AGE_SECONDS: str(PENDING_AGE),
                env_names.ENV_RECONCILE_EFFECT_AGE_SECONDS: str(4 * PENDING_AGE),
            }
        )
        deps = handler.build_deps(settings, dynamodb=aws.dynamodb, sqs=aws.sqs, clock=aws.clock)
        sent_at: dict[str, float] = {}

        def on_send(params: dict[str, Any], **_: Any) -> None:
            for entry in params.get("Entries", []):
                for delivery_id in lost_ids:
                    if delivery_id in entry["MessageBody"]:
                        sent_at.setdefault(delivery_id, time.perf_counter())

        aws.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", on_send)
        reads = 0

        def on_read(params: dict[str, Any], **_: Any) -> None:
            nonlocal reads
            reads += sum(len(r["Keys"]) for r in params["RequestItems"].values())

        aws.dynamodb.meta.events.register("provide-client-params.dynamodb.BatchGetItem", on_read)
        began = time.perf_counter()
        runs = 0
        budget = RECONCILER_TIMEOUT_SECONDS - SAFETY_MARGIN_SECONDS
        while True:
            runs += 1
            deps.run(deadline=Deadline.after(budget))
            if deps.claims.open_cursor() is None:
                break
        elapsed = time.perf_counter() - began
        if set(sent_at) != lost_ids:
            raise RuntimeError(f"recovered {len(sent_at)} of {len(lost_ids)} lost receipts")
        return BacklogResult(
            open_items=open_items,
            lost=lost,
            runs=runs,
            items_per_second=reads / elapsed,
            recovered_seconds=max(sent_at.values()) - began,
            pass_seconds=elapsed,
        )
