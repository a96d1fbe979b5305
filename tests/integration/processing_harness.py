"""moto world for the processing tests: table + stream, work queue + DLQ, bucket, token.

Everything the relay, worker and reconciler touch is the production adapter against
moto; the stream is read with moto's ``dynamodbstreams`` (``get_shard_iterator`` /
``get_records``) and fed to the relay the way Lambda's event-source mapping would,
after the same filter (``INSERT`` of ``kind = outbox``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.core import env_keys, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem, State, WorkItem
from local.aws_resources import create_queues, create_secret, create_table

REGION = "us-east-1"
TABLE = "relaylink-processing-test"
QUEUE = "relaylink-work"
BUCKET = "relaylink-archive"
MAX_ATTEMPTS = 3
LEASE_SECONDS = 300
MCP_TOKEN = "mcp-test-token-7f3a9c"
START = 1_760_000_000


@dataclass
class Clock:
    value: int = START

    def now(self) -> int:
        return self.value

    def advance(self, seconds: int) -> None:
        self.value += seconds


@dataclass
class StreamReader:
    """Reads the table's stream from the start, shard by shard, as Lambda would."""

    streams: Any
    stream_arn: str
    _iterators: dict[str, str | None] = field(default_factory=dict)

    def new_records(self) -> list[dict[str, Any]]:
        shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]
        records: list[dict[str, Any]] = []
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self.streams.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            iterator = self._iterators[shard_id]
            if iterator is None:
                continue
            response = self.streams.get_records(ShardIterator=iterator)
            self._iterators[shard_id] = response.get("NextShardIterator")
            for record in response["Records"]:
                records.append({**record, "eventSourceARN": self.stream_arn})
        return records

    @staticmethod
    def filtered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The event-source mapping's filter: outbox inserts only."""
        return [
            r
            for r in records
            if r["eventName"] == "INSERT"
            and r["dynamodb"].get("NewImage", {}).get(table_layout.KIND_ATTRIBUTE)
            == {"S": table_layout.KIND_OUTBOX}
        ]


@dataclass
class Aws:
    dynamodb: Any
    sqs: Any
    streams: Any
    s3: Any
    secretsmanager: Any
    stream_arn: str
    queue_url: str
    dlq_url: str
    token_arn: str
    clock: Clock

    def accept(self, work: WorkItem, **changes: Any) -> None:
        """What the receiver's transaction writes: a pending inbox item and its outbox."""
        now = self.clock.now()
        inbox = InboxItem(
            delivery_id=work.delivery_id,
            event=work.event,
            body_sha256="0" * 64,
            received_at=now,
            state=State.PENDING,
            expires_at=now + 30 * 86400,
            package_id=work.package_id,
            mcp_url=work.mcp_url,
            state_changed_at=now,
        )
        item = dynamodb_items.inbox_to_item(inbox)
        for name, value in changes.items():
            item[name] = value
        self.dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": item}},
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": dynamodb_items.outbox_to_item(work, created_at=now),
                    }
                },
            ]
        )

    def inbox(self, delivery_id: str) -> InboxItem:
        item = self.dynamodb.get_item(TableName=TABLE, Key=dynamodb_items.inbox_key(delivery_id))
        return dynamodb_items.inbox_from_item(item["Item"])

    def raw_inbox(self, delivery_id: str) -> dict[str, Any]:
        key = dynamodb_items.inbox_key(delivery_id)
        return dict(self.dynamodb.get_item(TableName=TABLE, Key=key)["Item"])

    def items(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in self.dynamodb.get_paginator("scan").paginate(TableName=TABLE):
            found.extend(page["Items"])
        return found

    def enqueue(self, work: WorkItem) -> None:
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=work.to_json())

    def receive(self, *, queue_url: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
        """Everything visible now (up to ``limit``), as raw SQS messages."""
        found: list[dict[str, Any]] = []
        while len(found) < limit:
            batch = self.sqs.receive_message(
                QueueUrl=queue_url or self.queue_url,
                MaxNumberOfMessages=min(10, limit - len(found)),
                AttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                break
            found.extend(batch)
        return found

    def make_visible(self, messages: list[dict[str, Any]]) -> None:
        """Fast-forward a visibility timeout or back-off (moto keeps real time)."""
        for message in messages:
            self.sqs.change_message_visibility(
                QueueUrl=self.queue_url,
                ReceiptHandle=message["ReceiptHandle"],
                VisibilityTimeout=0,
            )

    def queue_counts(self, queue_url: str | None = None) -> dict[str, int]:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=queue_url or self.queue_url, AttributeNames=["All"]
        )["Attributes"]
        return {
            "visible": int(attributes["ApproximateNumberOfMessages"]),
            "in_flight": int(attributes["ApproximateNumberOfMessagesNotVisible"]),
            "delayed": int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
        }

    def dead_letters(self) -> list[str]:
        return [m["Body"] for m in self.receive(queue_url=self.dlq_url)]


def sqs_event(messages: list[dict[str, Any]], queue_arn: str = "arn:aws:sqs:q") -> dict[str, Any]:
    """The Lambda SQS event for received messages."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


def stream_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}


_EMF = re.compile(r"^\{.*\"_aws\".*\}$", re.MULTILINE)


def emitted_metrics(output: str) -> Counter[str]:
    """Sum the counts of every EMF line Powertools printed."""
    counts: Counter[str] = Counter()
    for line in _EMF.findall(output):
        blob = json.loads(line)
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = blob[metric["Name"]]
                counts[metric["Name"]] += int(sum(value) if isinstance(value, list) else value)
    return counts


@pytest.fixture(name="aws")
def aws_fixture() -> Iterator[Aws]:
    """moto with the stack's resources (import this name into a test module to use it)."""
    with moto_aws() as aws:
        yield aws


@contextmanager
def moto_aws() -> Iterator[Aws]:
    """In-process moto with the stack's resources, gone when the block ends."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        stream_arn = create_table(dynamodb, TABLE)
        sqs = boto3.client("sqs", region_name=REGION)
        queue_url, dlq_url = create_queues(sqs, queue_name=QUEUE, max_receive_count=MAX_ATTEMPTS)
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        secretsmanager = boto3.client("secretsmanager", region_name=REGION)
        token_arn = create_secret(secretsmanager, name="relaylink-mcp-token", value=MCP_TOKEN)
        yield Aws(
            dynamodb=dynamodb,
            sqs=sqs,
            streams=boto3.client("dynamodbstreams", region_name=REGION),
            s3=s3,
            secretsmanager=secretsmanager,
            stream_arn=stream_arn,
            queue_url=queue_url,
            dlq_url=dlq_url,
            token_arn=token_arn,
            clock=Clock(),
        )


@pytest.fixture(name="stream")
def stream_fixture(aws: Aws) -> StreamReader:
    return StreamReader(aws.streams, aws.stream_arn)


# --- The worker, wired to moto, the real MCP server and the notify sink ---------------


@dataclass
class WorkerRig:
    """One worker container: its own clients, the shared clock, real adapters."""

    aws: Aws
    deps: Any
    settings: Any

    def run(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from functions.worker import handler  # noqa: PLC0415 (imports mcp: only when used)

        response: dict[str, Any] = handler.handle(sqs_event(messages), self.deps)
        # What the event-source mapping does with a partial batch response: delete
        # every message not reported as failed.
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed:
                self.aws.sqs.delete_message(
                    QueueUrl=self.aws.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return response

    def run_visible(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Receive what is visible now (one batch) and process it."""
        messages = self.aws.receive()
        return messages, self.run(messages)


def worker_env(aws: Aws, *, token_arn: str, notify_url: str, **overrides: str) -> dict[str, str]:
    env = {
        env_keys.ENV_TABLE_NAME: TABLE,
        env_keys.ENV_WORK_QUEUE_URL: aws.queue_url,
        env_keys.ENV_DEAD_LETTER_QUEUE_URL: aws.dlq_url,
        env_keys.ENV_MCP_TOKEN_SECRET_ARN: token_arn,
        env_keys.ENV_MCP_ALLOWED_HOSTS: "127.0.0.1",
        env_keys.ENV_MCP_ALLOW_INSECURE_LOOPBACK: "true",
        env_keys.ENV_MCP_TIMEOUT_SECONDS: "2",
        env_keys.ENV_NOTIFY_URL: notify_url,
        env_keys.ENV_ARCHIVE_BUCKET: BUCKET,
        env_keys.ENV_MAX_ATTEMPTS: str(MAX_ATTEMPTS),
        env_keys.ENV_LEASE_SECONDS: str(LEASE_SECONDS),
        env_keys.ENV_SECRETS_MAX_AGE_SECONDS: "300",
    }
    env.update(overrides)
    return env


def make_worker(
    aws: Aws, *, token: str, notify_url: str, wrap: Any = None, **overrides: str
) -> WorkerRig:
    """A worker with the default workflow (loaded from the setting, as in Lambda).

    ``wrap(deps) -> deps`` lets a test put a crash point around a port.
    """
    from functions.worker import handler  # noqa: PLC0415 (imports mcp: only when used)
    from functions.worker.settings import Settings  # noqa: PLC0415

    token_arn = create_secret(
        aws.secretsmanager, name=f"relaylink-mcp-{uuid.uuid4().hex[:8]}", value=token
    )
    settings = Settings.from_env(
        worker_env(aws, token_arn=token_arn, notify_url=notify_url, **overrides)
    )
    deps = handler.build_deps(
        settings,
        dynamodb=boto3.client("dynamodb", region_name=REGION),
        sqs=boto3.client("sqs", region_name=REGION),
        secretsmanager=boto3.client("secretsmanager", region_name=REGION),
        clock=aws.clock,
    )
    if wrap is not None:
        deps = wrap(deps)
    return WorkerRig(aws, deps, settings)
