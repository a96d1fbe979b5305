"""The relay handler on moto's real stream records: outbox inserts become SQS messages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from functions.core import env_keys, metric_names, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import WorkItem
from functions.relay import handler
from functions.relay.settings import Settings
from local.testkit.builders import LambdaContext, stream_event
from local.testkit.moto_world import TABLE, MotoWorld, StreamReader
from tests.processing_harness import emitted_metrics

MCP_URL = "https://mcp.relaylink.example/mcp"


def work(n: int) -> WorkItem:
    return WorkItem(f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}", "package.received", f"pkg_{n}", MCP_URL)


@pytest.fixture
def relay(aws: MotoWorld) -> Any:
    handler.container_deps.set(
        handler.build_deps(
            Settings.from_env({env_keys.ENV_WORK_QUEUE_URL: aws.queue_url}), sqs=aws.sqs
        )
    )
    yield handler
    handler.container_deps.reset()


def fail_sends_of(aws: MotoWorld, delivery_id: str) -> None:
    """SQS refuses (a connection error) any message about ``delivery_id``."""

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if delivery_id in params.get("MessageBody", ""):
            raise EndpointConnectionError(endpoint_url="https://sqs.invalid")

    aws.sqs.meta.events.register("provide-client-params.sqs.SendMessage", refuse)


def test_relay_sends_each_outbox_insert_as_its_work_item(
    aws: MotoWorld, stream: StreamReader, relay: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(3):
        aws.accept(work(n))
    records = stream.new_records()
    assert len(records) == 6  # an inbox and an outbox insert per delivery
    response = relay.lambda_handler(stream_event(StreamReader.filtered(records)), LambdaContext())
    assert response == {"batchItemFailures": []}
    bodies = sorted(m["Body"] for m in aws.receive())
    assert bodies == sorted(work(n).to_json() for n in range(3))
    # Exactly the work item's four fields: nothing else (no secret) rides along.
    assert all(
        set(json.loads(b)) == {"delivery_id", "event", "package_id", "mcp_url"} for b in bodies
    )
    assert emitted_metrics(capsys.readouterr().out)[metric_names.METRIC_WORK_RELAYED] == 3


def test_relay_ignores_records_the_filter_should_have_dropped(
    aws: MotoWorld, stream: StreamReader, relay: Any
) -> None:
    aws.accept(work(1))
    aws.dynamodb.update_item(
        TableName=TABLE,
        Key=dynamodb_items.inbox_key(work(1).delivery_id),
        UpdateExpression="SET attempts = :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    records = stream.new_records()  # inbox INSERT, outbox INSERT, inbox MODIFY
    outbox = StreamReader.filtered(records)
    others = [r for r in records if r not in outbox]
    assert len(others) == 2
    assert relay.lambda_handler(stream_event(others), LambdaContext()) == {"batchItemFailures": []}
    assert aws.receive() == []


def test_relay_reports_only_the_failed_record(
    aws: MotoWorld, stream: StreamReader, relay: Any
) -> None:
    for n in range(3):
        aws.accept(work(n))
    records = StreamReader.filtered(stream.new_records())
    fail_sends_of(aws, work(1).delivery_id)
    response = relay.lambda_handler(stream_event(records), LambdaContext())
    failed = next(
        r for r in records if r["dynamodb"]["NewImage"]["delivery_id"]["S"] == work(1).delivery_id
    )
    assert response == {
        "batchItemFailures": [{"itemIdentifier": failed["dynamodb"]["SequenceNumber"]}]
    }
    assert sorted(m["Body"] for m in aws.receive()) == sorted(
        [work(0).to_json(), work(2).to_json()]
    )


def test_relay_skips_a_malformed_outbox_record_without_blocking(
    aws: MotoWorld, stream: StreamReader, relay: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.accept(work(1))
    aws.dynamodb.put_item(
        TableName=TABLE,
        Item={
            **dynamodb_items.outbox_key("broken"),
            table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_OUTBOX},
        },
    )
    records = StreamReader.filtered(stream.new_records())
    assert len(records) == 2
    assert relay.lambda_handler(stream_event(records), LambdaContext()) == {"batchItemFailures": []}
    assert [m["Body"] for m in aws.receive()] == [work(1).to_json()]
    assert emitted_metrics(capsys.readouterr().out)[handler.METRIC_SKIPPED] == 1


def test_outbox_record_carries_its_ttl(aws: MotoWorld, stream: StreamReader) -> None:
    aws.accept(work(1))
    image = StreamReader.filtered(stream.new_records())[0]["dynamodb"]["NewImage"]
    assert int(image[table_layout.TTL_ATTRIBUTE]["N"]) == int(image["created_at"]["N"]) + 24 * 3600
