"""The work queue's batch send: ten per call, refused entries reported, not raised.

moto answers every well-formed entry with success, so the refused-entry answer SQS
may give is played by botocore's Stubber (the response shape is checked against the
SQS API model).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from functions.core.adapters.work_queue import SEND_BATCH_LIMIT, SqsWorkQueue
from functions.core.errors import StorageUnavailable
from functions.core.models import UnsentWork, WorkItem
from local.aws_resources import create_queues

REGION = "us-east-1"
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/relaylink-work"


def works(count: int) -> list[WorkItem]:
    return [
        WorkItem(
            f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}",
            "package.received",
            f"pkg_{n}",
            "https://mcp.relaylink.example/mcp",
        )
        for n in range(count)
    ]


def test_send_batch_sends_every_work_item_ten_per_call(moto_aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url, _ = create_queues(sqs, queue_name="relaylink-work", max_receive_count=3)
    calls: list[int] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch",
        lambda params, **_: calls.append(len(params["Entries"])),
    )
    batch = works(23)
    batch.append(batch[0])  # one delivery twice in a run (two uncertain effects)
    assert SqsWorkQueue(client=sqs, queue_url=queue_url).send_batch(batch) == []
    assert calls == [SEND_BATCH_LIMIT, SEND_BATCH_LIMIT, 4]
    received: list[str] = []
    while found := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages"):
        received += [json.loads(m["Body"])["delivery_id"] for m in found]
    assert sorted(received) == sorted(w.delivery_id for w in batch)


def stubbed() -> tuple[Any, Stubber]:
    sqs = boto3.client("sqs", region_name=REGION)
    return sqs, Stubber(sqs)


def test_send_batch_returns_the_entries_sqs_refused() -> None:
    sqs, stub = stubbed()
    batch = works(3)
    stub.add_response(
        "send_message_batch",
        {
            "Successful": [
                {"Id": "0", "MessageId": "m0", "MD5OfMessageBody": "0" * 32},
                {"Id": "2", "MessageId": "m2", "MD5OfMessageBody": "0" * 32},
            ],
            "Failed": [{"Id": "1", "SenderFault": False, "Code": "InternalError"}],
        },
        {
            "QueueUrl": QUEUE_URL,
            "Entries": [{"Id": str(n), "MessageBody": w.to_json()} for n, w in enumerate(batch)],
        },
    )
    with stub:
        unsent = SqsWorkQueue(client=sqs, queue_url=QUEUE_URL).send_batch(batch)
    assert unsent == [UnsentWork(batch[1], reason="InternalError")]


def test_send_batch_call_failure_is_storage_unavailable() -> None:
    sqs, stub = stubbed()
    stub.add_client_error("send_message_batch", service_error_code="ServiceUnavailable")
    with stub, pytest.raises(StorageUnavailable):
        SqsWorkQueue(client=sqs, queue_url=QUEUE_URL).send_batch(works(2))


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize("aws_trace_header", [False, True])
def test_work_carries_its_trace_as_a_message_attribute_and_with_xray_as_awstraceheader(
    moto_aws: None, aws_trace_header: bool
) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url, _ = create_queues(sqs, queue_name="relaylink-work", max_receive_count=3)
    queue = SqsWorkQueue(client=sqs, queue_url=queue_url, aws_trace_header=aws_trace_header)
    traced, untraced = works(2)
    queue.send(dataclasses.replace(traced, traceparent=TRACEPARENT))
    queue.send_batch([untraced])
    received = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["AWSTraceHeader"],
    )["Messages"]
    by_body = {json.loads(m["Body"])["delivery_id"]: m for m in received}
    sent = by_body[traced.delivery_id]
    assert sent["MessageAttributes"]["traceparent"]["StringValue"] == TRACEPARENT
    header = sent.get("Attributes", {}).get("AWSTraceHeader")
    if aws_trace_header:
        assert (
            header == "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1"
        )
    else:
        assert header is None
    assert "MessageAttributes" not in by_body[untraced.delivery_id]
