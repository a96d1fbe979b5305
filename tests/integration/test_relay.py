"""The relay handler on moto's real stream records: outbox inserts become SQS messages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from functions.core import env_names, metric_names, table_layout
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
            Settings.from_env({env_names.ENV_WORK_QUEUE_URL: aws.queue_url}), sqs=aws.sqs
        )
    )
    yield handler
    handler.container_deps.reset()


def refuse_entries_of(aws: MotoWorld, delivery_id: str) -> None:
    """SQS refuses, entry by entry, any message about ``delivery_id`` in a batch send."""
    refused: list[str] = []

    def drop(params: dict[str, Any], **_: Any) -> None:
        refused[:] = [e["Id"] for e in params["Entries"] if delivery_id in e["MessageBody"]]
        params["Entries"] = [e for e in params["Entries"] if e["Id"] not in refused]

    def answer(parsed: dict[str, Any], **_: Any) -> None:
        parsed.setdefault("Failed", []).extend(
            {"Id": i, "Code": "InternalError", "SenderFault": False} for i in refused
        )

    aws.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", drop)
    aws.sqs.meta.events.register("after-call.sqs.SendMessageBatch", answer)


def fail_batch_sends_containing(aws: MotoWorld, delivery_id: str) -> None:
    """A batch send with a message about ``delivery_id`` fails as a whole."""

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if any(delivery_id in e["MessageBody"] for e in params["Entries"]):
            raise EndpointConnectionError(endpoint_url="https://sqs.invalid")

    aws.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", refuse)


def count_sends(aws: MotoWorld) -> list[str]:
    """The SQS operations the relay calls, in order."""
    calls: list[str] = []
    aws.sqs.meta.events.register("before-call.sqs", lambda model, **_: calls.append(model.name))
    return calls


def sequence_of(records: list[dict[str, Any]], delivery_id: str) -> str:
    record = next(
        r for r in records if r["dynamodb"]["NewImage"]["delivery_id"]["S"] == delivery_id
    )
    return str(record["dynamodb"]["SequenceNumber"])


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


def test_relay_sends_ten_work_items_per_request(
    aws: MotoWorld, stream: StreamReader, relay: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(25):
        aws.accept(work(n))
    records = StreamReader.filtered(stream.new_records())
    calls = count_sends(aws)
    response = relay.lambda_handler(stream_event(records), LambdaContext())
    assert response == {"batchItemFailures": []}
    assert calls == ["SendMessageBatch"] * 3  # 10 + 10 + 5: SQS bills per request
    bodies = sorted(m["Body"] for m in aws.receive(limit=25))
    assert bodies == sorted(work(n).to_json() for n in range(25))
    assert emitted_metrics(capsys.readouterr().out)[metric_names.METRIC_WORK_RELAYED] == 25


def test_relay_reports_only_the_refused_record(
    aws: MotoWorld,
    stream: StreamReader,
    relay: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    for n in range(3):
        aws.accept(work(n))
    records = StreamReader.filtered(stream.new_records())
    refuse_entries_of(aws, work(1).delivery_id)
    response = relay.lambda_handler(stream_event(records), LambdaContext())
    assert response == {
        "batchItemFailures": [{"itemIdentifier": sequence_of(records, work(1).delivery_id)}]
    }
    assert sorted(m["Body"] for m in aws.receive()) == sorted(
        [work(0).to_json(), work(2).to_json()]
    )
    assert emitted_metrics(capsys.readouterr().out)[metric_names.METRIC_WORK_RELAYED] == 2
    (warning,) = [r for r in caplog.records if r.getMessage() == "work item refused by the queue"]
    assert vars(warning)["code"] == "InternalError"


def test_a_failed_batch_send_reports_its_records_and_the_others_go_out(
    aws: MotoWorld, stream: StreamReader, relay: Any
) -> None:
    for n in range(12):
        aws.accept(work(n))
    records = StreamReader.filtered(stream.new_records())
    fail_batch_sends_containing(aws, work(11).delivery_id)
    response = relay.lambda_handler(stream_event(records), LambdaContext())
    # The second request (records 11 and 12) failed as a whole: both are retried.
    assert response == {
        "batchItemFailures": [
            {"itemIdentifier": str(r["dynamodb"]["SequenceNumber"])} for r in records[10:]
        ]
    }
    sent = {json.loads(m["Body"])["delivery_id"] for m in aws.receive(limit=12)}
    assert sent == {r["dynamodb"]["NewImage"]["delivery_id"]["S"] for r in records[:10]}


def test_relay_skips_a_malformed_outbox_record_without_blocking(
    aws: MotoWorld, stream: StreamReader, relay: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.accept(work(1))
    aws.dynamodb.put_item(
        TableName=TABLE,
        Item={
            **dynamodb_items.outbox_key("broken", 0, shards=1),
            table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_OUTBOX},
        },
    )
    records = StreamReader.filtered(stream.new_records())
    assert len(records) == 2
    assert relay.lambda_handler(stream_event(records), LambdaContext()) == {"batchItemFailures": []}
    assert [m["Body"] for m in aws.receive()] == [work(1).to_json()]
    assert emitted_metrics(capsys.readouterr().out)[handler.METRIC_SKIPPED] == 1


def test_outbox_record_expires_with_its_inbox_item(aws: MotoWorld, stream: StreamReader) -> None:
    aws.accept(work(1))
    outbox = StreamReader.filtered(stream.new_records())[0]["dynamodb"]["NewImage"]
    inbox = aws.dynamodb.get_item(
        TableName=TABLE, Key=dynamodb_items.inbox_key(work(1).delivery_id)
    )
    expires_at = int(outbox[table_layout.TTL_ATTRIBUTE]["N"])
    assert expires_at == int(inbox["Item"][table_layout.TTL_ATTRIBUTE]["N"])
    assert expires_at > int(outbox["created_at"]["N"])
