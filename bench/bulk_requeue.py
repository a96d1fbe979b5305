"""Figure 10's measurement: the operator's bulk requeue over moto's server on loopback.

moto's server runs in a process of its own, as AWS is elsewhere than the operator's
process (and the local stack's emulator is another process). Each run makes a fresh
table and queues, writes ``items`` failed deliveries (the functions' own item codec,
a ``BatchWriteItem`` of 25 at a time), then times, through :mod:`ops.bulk` with the
operator's own clients: the dry run, the requeue, and the same requeue again (which
must change nothing).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Final

from bench.stats import Summary, summarize
from cli.state import LocalState, Resources
from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem, State
from local.aws_resources import create_queues, create_table
from local.testkit.aws_calls import AwsCalls
from ops import bulk
from ops.target import Target

_NOW: Final = 1_800_000_000
_BATCH_WRITE: Final = 25


@dataclass(frozen=True)
class BulkRequeueResult:
    items: int
    runs: int
    requeue_per_second: Summary
    dry_run_per_second: Summary
    rerun_changed: int  # over every run's second requeue: must be 0
    calls_per_item: dict[str, float]  # AWS calls of one requeue run, per item

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "runs": self.runs,
            "requeue_per_second": self.requeue_per_second.to_json(1),
            "dry_run_per_second": self.dry_run_per_second.to_json(1),
            "rerun_changed": self.rerun_changed,
            "calls_per_item": self.calls_per_item,
        }


def measure(*, items: int, runs: int) -> BulkRequeueResult:
    with _moto_server() as endpoint:
        requeue: list[float] = []
        dry: list[float] = []
        rerun_changed = 0
        calls_per_item: dict[str, float] = {}
        for _ in range(runs):
            with _target(endpoint) as target:
                _seed_failed(target, items)
                calls = AwsCalls()
                calls.watch(target.dynamodb, target.sqs)
                began = time.perf_counter()
                preview = bulk.requeue_matching(target, now=_NOW, yes=True, dry_run=True)
                dry.append(items / (time.perf_counter() - began))
                calls.reset()
                began = time.perf_counter()
                done = bulk.requeue_matching(target, now=_NOW, yes=True, dry_run=False)
                requeue.append(items / (time.perf_counter() - began))
                calls_per_item = {
                    op: round(n / items, 3) for (_, op), n in sorted(calls.calls.items())
                }
                again = bulk.requeue_matching(target, now=_NOW + 1, yes=True, dry_run=False)
                if not preview.changed == done.changed == items:
                    raise RuntimeError(f"requeued {done.changed} of {items} failed deliveries")
                rerun_changed += again.changed
        return BulkRequeueResult(
            items=items,
            runs=runs,
            requeue_per_second=summarize(requeue),
            dry_run_per_second=summarize(dry),
            rerun_changed=rerun_changed,
            calls_per_item=calls_per_item,
        )


@contextmanager
def _moto_server() -> Iterator[str]:
    """moto's server in a child process on a free loopback port; its endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextmanager
def _target(endpoint: str) -> Iterator[Target]:
    """A fresh table and queues on the server, as the operator's ``--local`` sees them."""
    suffix = uuid.uuid4().hex[:8]
    resources = Resources(
        table_name=f"bulk-{suffix}",
        work_queue_url="",
        dead_letter_queue_url="",
        relay_failure_queue_url="",
        signing_secrets_arn="",
        mcp_token_secret_arn="",
        archive_bucket="",
    )
    state = LocalState(
        webhook_url="http://127.0.0.1:9/relaylink",
        mcp_url="https://mcp.relaylink.example/mcp",
        effects_url="http://127.0.0.1:9/effects",
        aws_endpoint_url=endpoint,
        region="us-east-1",
        signing_secrets=[],
        mcp_token="",
        resources=resources,
    )
    dynamodb = state.aws_client("dynamodb")
    create_table(dynamodb, resources.table_name)
    queue_url, dlq_url = create_queues(
        state.aws_client("sqs"), queue_name=f"bulk-{suffix}", max_receive_count=5
    )
    resources = replace(resources, work_queue_url=queue_url, dead_letter_queue_url=dlq_url)
    target = Target.from_local(replace(state, resources=resources))
    try:
        yield target
    finally:
        dynamodb.delete_table(TableName=resources.table_name)
        target.sqs.delete_queue(QueueUrl=queue_url)
        target.sqs.delete_queue(QueueUrl=dlq_url)


def _seed_failed(target: Target, items: int) -> None:
    failed = [
        InboxItem(
            delivery_id=str(uuid.uuid4()),
            event="package.received",
            body_sha256=uuid.uuid4().hex * 2,
            received_at=_NOW - 600,
            state=State.FAILED,
            attempts=5,
            expires_at=_NOW + 86400,
            package_id="pkg_BENCH",
            mcp_url="https://mcp.relaylink.example/mcp",
            state_changed_at=_NOW - 60 + n % 60,
            last_error="mcp_unavailable",
        )
        for n in range(items)
    ]
    for start in range(0, items, _BATCH_WRITE):
        requests: Any = [
            {"PutRequest": {"Item": dynamodb_items.inbox_to_item(item)}}
            for item in failed[start : start + _BATCH_WRITE]
        ]
        target.dynamodb.batch_write_item(RequestItems={target.table_name: requests})
