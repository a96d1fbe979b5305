"""What the local stack holds right now, read from the emulator: for checks, not traffic."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from cli.state import LocalState
from functions.core import table_layout
from functions.core.adapters.dynamodb_steps import KIND_STEP, step_from_item
from functions.core.ports.steps import StepRecord, StepStatus

if TYPE_CHECKING:
    from mypy_boto3_sqs.literals import QueueAttributeNameType

_DEPTH_ATTRIBUTES: Final[tuple[QueueAttributeNameType, ...]] = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
_BATCH_GET_KEYS: Final = 100  # DynamoDB's BatchGetItem limit


def queue_depths(state: LocalState) -> dict[str, int]:
    """Messages in each queue (visible + in flight + delayed)."""
    sqs = state.aws_client("sqs")
    resources = state.resources
    depths = {}
    for name, url in (
        ("work", resources.work_queue_url),
        ("dead_letter", resources.dead_letter_queue_url),
        ("relay_failure", resources.relay_failure_queue_url),
    ):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        depths[name] = sum(int(attributes.get(key, "0")) for key in _DEPTH_ATTRIBUTES)
    return depths


def inbox_states(state: LocalState) -> dict[str, str]:
    """Every inbox item's state, by delivery id (a scan)."""
    dynamodb = state.aws_client("dynamodb")
    states: dict[str, str] = {}
    paginator = dynamodb.get_paginator("scan")
    for page in paginator.paginate(
        TableName=state.resources.table_name,
        FilterExpression="sk = :inbox",
        ExpressionAttributeValues={":inbox": {"S": table_layout.SK_INBOX}},
        ProjectionExpression="pk, #s",
        ExpressionAttributeNames={"#s": "state"},
    ):
        for item in page["Items"]:
            if "state" in item:
                states[item["pk"]["S"]] = item["state"]["S"]
    return states


def delivery_states(state: LocalState, delivery_ids: list[str]) -> dict[str, str]:
    """The inbox state of each of these deliveries that has an inbox item (consistent reads,
    100 keys a request: cheaper on the emulator than a scan of the whole table)."""
    dynamodb = state.aws_client("dynamodb")
    table = state.resources.table_name
    states: dict[str, str] = {}
    for start in range(0, len(delivery_ids), _BATCH_GET_KEYS):
        keys: list[Mapping[str, Any]] = [
            {
                table_layout.TABLE_PARTITION_KEY: {"S": delivery_id},
                table_layout.TABLE_SORT_KEY: {"S": table_layout.SK_INBOX},
            }
            for delivery_id in delivery_ids[start : start + _BATCH_GET_KEYS]
        ]
        while keys:
            answer = dynamodb.batch_get_item(
                RequestItems={
                    table: {
                        "Keys": keys,
                        "ConsistentRead": True,
                        "ProjectionExpression": "pk, #s",
                        "ExpressionAttributeNames": {"#s": "state"},
                    }
                }
            )
            for item in answer["Responses"].get(table, []):
                if "state" in item:
                    states[item["pk"]["S"]] = item["state"]["S"]
            unprocessed = answer.get("UnprocessedKeys", {})
            keys = list(unprocessed[table]["Keys"]) if table in unprocessed else []
    return states


def wait_quiet(
    state: LocalState, timeout: float, *, expected: int = 0, poll_seconds: float = 1.0
) -> bool:
    """Wait until no work is left: the work queue empty, no item pending or processing,
    and at least ``expected`` items finished (completed or failed).

    The table is scanned only once the work queue is empty, and at most once per
    ``poll_seconds``: a scan holds the emulator's lock for as long as it reads every
    item, and back-to-back scans would starve the workers on a big table.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the emulator busy or a fault: ask again
            if queue_depths(state)["work"] == 0:
                states = Counter(inbox_states(state).values())
                finished = states["completed"] + states["failed"]
                busy = states["pending"] + states["processing"]
                if not busy and finished >= expected and queue_depths(state)["work"] == 0:
                    return True
        time.sleep(min(poll_seconds, max(0.0, deadline - time.monotonic())))
    return False


def started_steps(state: LocalState, name: str) -> list[StepRecord]:
    """Step records named ``name`` whose latest run started and has no result yet (a
    scan): with no worker running, each was in flight when its worker died."""
    dynamodb = state.aws_client("dynamodb")
    records: list[StepRecord] = []
    for page in dynamodb.get_paginator("scan").paginate(
        TableName=state.resources.table_name,
        FilterExpression="#kind = :step AND #name = :name AND #status = :started",
        ExpressionAttributeNames={
            "#kind": table_layout.KIND_ATTRIBUTE,
            "#name": "name",
            "#status": "status",
        },
        ExpressionAttributeValues={
            ":step": {"S": KIND_STEP},
            ":name": {"S": name},
            ":started": {"S": StepStatus.STARTED.value},
        },
        ConsistentRead=True,
    ):
        records.extend(step_from_item(item) for item in page["Items"])
    return records
