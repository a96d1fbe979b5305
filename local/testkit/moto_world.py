"""The stack's resources in moto, and the ways tests and the bench look at them.

One world for every in-process run: the table with its stream, the work queue and
its dead-letter queue, the archive bucket, and Secrets Manager. The resources come
from :mod:`local.aws_resources`, the definitions the local stack uses, which are
built from the same names as the CDK stack. The stream is read with moto's
``dynamodbstreams`` and filtered as Lambda's event-source mapping would
(:func:`local.event_sources.is_outbox_insert`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from moto import mock_aws

from cli.aws_clients import AwsClients
from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem, State, WorkItem
from infra.schema import max_receive_count_for
from local.aws_resources import create_queues, create_secret, create_table
from local.event_sources import is_outbox_insert
from local.testkit.clock import FakeClock
from local.testkit.serial_moto import serialize_dynamodb

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodbstreams.client import DynamoDBStreamsClient
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_secretsmanager.client import SecretsManagerClient
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

REGION = "us-east-1"
TABLE = "relaylink-test"
QUEUE = "relaylink-work"
BUCKET = "relaylink-archive"
MAX_ATTEMPTS = 3  # attempts of unknown outcome before the worker dead-letters
# Short enough that a test can ride through the whole schedule: (0, 15, 45, 105) s.
RETRY_HORIZON_SECONDS = 120


@dataclass
class StreamReader:
    """Reads the table's stream from the start, shard by shard, as Lambda would."""

    streams: DynamoDBStreamsClient
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
        return [r for r in records if is_outbox_insert(r)]


@dataclass
class MotoWorld:
    """The resources, clients to reach them, and the clock every function of a run shares."""

    dynamodb: DynamoDBClient
    sqs: SQSClient
    streams: DynamoDBStreamsClient
    s3: S3Client
    secretsmanager: SecretsManagerClient
    stream_arn: str
    queue_url: str
    queue_arn: str
    dlq_url: str
    clock: FakeClock

    # --- the table ---------------------------------------------------------------

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
                        "Item": dynamodb_items.outbox_to_item(
                            work,
                            created_at=now,
                            expires_at=inbox.expires_at,
                            shards=table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
                        ),
                    }
                },
            ]
        )

    def inbox(self, delivery_id: str) -> InboxItem:
        return dynamodb_items.inbox_from_item(self.raw_inbox(delivery_id))

    def raw_inbox(self, delivery_id: str) -> dict[str, Any]:
        key = dynamodb_items.inbox_key(delivery_id)
        return dict(self.dynamodb.get_item(TableName=TABLE, Key=key)["Item"])

    def items(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in self.dynamodb.get_paginator("scan").paginate(TableName=TABLE):
            found.extend(page["Items"])
        return found

    def inboxes(self) -> list[InboxItem]:
        return [
            dynamodb_items.inbox_from_item(item)
            for item in self.items()
            if item.get(table_layout.KIND_ATTRIBUTE) == {"S": table_layout.KIND_INBOX}
        ]

    def clear(self) -> None:
        """Delete every item (the stream keeps its records)."""
        for item in self.items():
            key = {
                k: item[k] for k in (table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY)
            }
            self.dynamodb.delete_item(TableName=TABLE, Key=key)

    # --- secrets -------------------------------------------------------------------

    def create_secret(self, value: str, *, prefix: str = "relaylink") -> str:
        """A new secret holding ``value`` under a fresh name; returns its ARN."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        return create_secret(self.secretsmanager, name=name, value=value)

    # --- the queues ----------------------------------------------------------------

    def enqueue(self, work: WorkItem) -> None:
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=work.to_json())

    def receive(self, *, queue_url: str | None = None, limit: int = 10) -> list[MessageTypeDef]:
        """Everything visible now (up to ``limit``), as raw SQS messages."""
        found: list[MessageTypeDef] = []
        while len(found) < limit:
            batch = self.sqs.receive_message(
                QueueUrl=queue_url or self.queue_url,
                MaxNumberOfMessages=min(10, limit - len(found)),
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                break
            found.extend(batch)
        return found

    def make_visible(self, messages: Sequence[MessageTypeDef]) -> None:
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


def build_world(client: AwsClients, *, clock: FakeClock | None = None) -> MotoWorld:
    """Create the resources through ``client(service)`` (in-process moto or a server)."""
    dynamodb = client("dynamodb")
    stream_arn = create_table(dynamodb, TABLE)
    sqs = client("sqs")
    queue_url, dlq_url = create_queues(
        sqs,
        queue_name=QUEUE,
        max_receive_count=max_receive_count_for(
            MAX_ATTEMPTS, retry_horizon_seconds=RETRY_HORIZON_SECONDS
        ),
    )
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    s3 = client("s3")
    s3.create_bucket(Bucket=BUCKET)
    return MotoWorld(
        dynamodb=dynamodb,
        sqs=sqs,
        streams=client("dynamodbstreams"),
        s3=s3,
        secretsmanager=client("secretsmanager"),
        stream_arn=stream_arn,
        queue_url=queue_url,
        queue_arn=str(queue_arn),
        dlq_url=dlq_url,
        clock=clock or FakeClock(),
    )


@contextmanager
def moto_world(*, clock: FakeClock | None = None) -> Iterator[MotoWorld]:
    """A world in in-process moto, gone when the block ends."""
    serialize_dynamodb()
    with mock_aws():
        yield build_world(AwsClients(region=REGION), clock=clock)
