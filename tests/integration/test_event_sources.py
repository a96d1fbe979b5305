"""The local stack's stream mapping against the emulator: what the relay is handed."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from functions.core import table_layout
from local.aws_emulator import AwsEmulator
from local.aws_resources import create_table
from local.event_sources import Checkpoints, StreamMapping, records_as_json

REGION = "us-east-1"


def test_the_relay_gets_outbox_inserts_as_lambda_hands_them(aws_emulator: AwsEmulator) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION, endpoint_url=aws_emulator.endpoint_url)
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=aws_emulator.endpoint_url)
    table = f"stream-{uuid.uuid4().hex[:8]}"
    stream_arn = create_table(dynamodb, table)
    pk, sk = table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY
    kind = table_layout.KIND_ATTRIBUTE
    outbox = {pk: {"S": "d1"}, sk: {"S": "outbox"}, kind: {"S": table_layout.KIND_OUTBOX}}
    dynamodb.put_item(TableName=table, Item={pk: {"S": "d1"}, sk: {"S": "inbox"}})
    dynamodb.put_item(TableName=table, Item=outbox)
    dynamodb.delete_item(TableName=table, Key={pk: {"S": "d1"}, sk: {"S": "inbox"}})
    events: list[dict[str, Any]] = []

    def relay(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        events.append(event)
        return {"batchItemFailures": []}

    streams = boto3.client(
        "dynamodbstreams", region_name=REGION, endpoint_url=aws_emulator.endpoint_url
    )
    records_as_json(streams)
    mapping = StreamMapping(
        streams=streams,
        sqs=sqs,
        stream_arn=stream_arn,
        failure_queue_url=sqs.create_queue(QueueName=f"{table}-failures")["QueueUrl"],
        handler=relay,
        checkpoints=Checkpoints(None),
    )
    while mapping.poll():
        pass

    # Botocore's own reading of the same records, for comparison.
    parsed = boto3.client(
        "dynamodbstreams", region_name=REGION, endpoint_url=aws_emulator.endpoint_url
    )
    shard = parsed.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
    iterator = parsed.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    expected = parsed.get_records(ShardIterator=iterator)["Records"]
    assert [r["eventName"] for r in expected] == ["INSERT", "INSERT", "REMOVE"]

    assert [len(event["Records"]) for event in events] == [1]  # the filter's one match
    (record,) = events[0]["Records"]
    created = record["dynamodb"].pop("ApproximateCreationDateTime")
    # A number, as in Lambda's event; the same moment botocore reads.
    assert isinstance(created, int | float)
    moment = expected[1]["dynamodb"].pop("ApproximateCreationDateTime")
    assert created == pytest.approx(moment.timestamp(), abs=0.001)
    assert record == {**expected[1], "eventSourceARN": stream_arn}
    assert record["dynamodb"]["NewImage"] == outbox
