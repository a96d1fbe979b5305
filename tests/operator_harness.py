"""The operator commands' test target: moto's server on loopback and a local state file.

Items are written by the functions' own adapters (the receiver's inbox writer, the
worker's claims and ledger), so the commands read what the pipeline really stores.
The CLI is driven through ``ops.cli.main`` with a state file that points at the
server, exactly as ``--local`` finds a running local stack.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from cli.state import LocalState, Resources
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.work_queue import SqsWorkQueue
from functions.core.models import InboxItem, State
from local.aws_resources import create_queues, create_table
from local.testkit import builders
from ops.cli import main
from ops.target import Target

NOW = 1_800_000_000
MCP = "https://mcp.relaylink.example/mcp"


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@dataclass
class Stack:
    target: Target
    state_file: Path

    def cli(self, *argv: str) -> list[str]:
        return [*argv, "--local", str(self.state_file)]

    @property
    def claims(self) -> Any:
        return self.target.claims()

    def accept(self, *, received_at: int = NOW, package: bool = True) -> str:
        delivery_id = str(uuid.uuid4())
        inbox = InboxItem(
            delivery_id=delivery_id,
            event="package.received" if package else "ping",
            body_sha256=uuid.uuid4().hex * 2,
            received_at=received_at,
            state=State.PENDING if package else State.IGNORED,
            expires_at=received_at + 86400,
            package_id="pkg_TEST" if package else None,
            mcp_url=MCP if package else None,
            state_changed_at=received_at,
        )
        builders.record_new(DynamoDbInbox(self.target.dynamodb, self.target.table_name), inbox)
        return delivery_id

    def finish(self, delivery_id: str, state: State, *, attempts: int = 1) -> None:
        """Claim ``attempts`` times (as workers would), then record ``state``."""
        for n in range(attempts):
            attempt = self.claims.claim(delivery_id, owner=f"w{n}", now=NOW + n, lease_seconds=0)
            claim = attempt.claim
            if n < attempts - 1:
                self.claims.release(claim, now=NOW + n, error_code="mcp_unavailable")
        if state is State.COMPLETED:
            self.claims.complete(claim, now=NOW + attempts)
        elif state is State.FAILED:
            self.claims.fail(claim, now=NOW + attempts, error_code="mcp_unavailable")

    def stored(self, delivery_id: str) -> dict[str, Any]:
        return self.target.dynamodb.get_item(
            TableName=self.target.table_name,
            Key=dynamodb_items.inbox_key(delivery_id),
            ConsistentRead=True,
        )["Item"]

    def dead_letter(self, body: str, *, failure: str | None = None) -> None:
        """A dead letter: as SQS's redrive moves it (unmarked), or as the worker sends it
        for a ``failure``."""
        queue = SqsWorkQueue(
            client=self.target.sqs,
            queue_url=self.target.work_queue_url,
            dead_letter_queue_url=self.target.dead_letter_queue_url,
        )
        if failure is None:
            self.target.sqs.send_message(
                QueueUrl=self.target.dead_letter_queue_url, MessageBody=body
            )
        else:
            queue.dead_letter(body, reason="attempts_exhausted", failure=failure)

    def drain(self, queue_url: str) -> list[str]:
        bodies: list[str] = []
        while True:
            messages = self.target.sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30
            ).get("Messages", [])
            if not messages:
                return bodies
            bodies += [m["Body"] for m in messages]


@pytest.fixture
def stack(moto_endpoint: str, tmp_path: Path) -> Stack:
    """A fresh table and queues (unique names on the shared server) and a state file."""
    suffix = uuid.uuid4().hex[:8]
    resources = Resources(
        table_name=f"operator-{suffix}",
        work_queue_url="",
        dead_letter_queue_url="",
        relay_failure_queue_url="",
        signing_secrets_arn="",
        mcp_token_secret_arn="",
        archive_bucket="",
    )
    state = LocalState(
        webhook_url="http://127.0.0.1:9/relaylink",
        mcp_url=MCP,
        effects_url="http://127.0.0.1:9/effects",
        aws_endpoint_url=moto_endpoint,
        region="us-east-1",
        signing_secrets=[],
        mcp_token="",
        resources=resources,
    )
    create_table(state.aws_client("dynamodb"), resources.table_name)
    queue_url, dlq_url = create_queues(
        state.aws_client("sqs"), queue_name=f"work-{suffix}", max_receive_count=5
    )
    state = replace(
        state,
        resources=replace(resources, work_queue_url=queue_url, dead_letter_queue_url=dlq_url),
    )
    path = tmp_path / "state.json"
    state.write(path)
    return Stack(Target.from_local(LocalState.read(path)), path)


def run_cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err
