"""Create the stack's AWS resources in an emulator (moto), from the shared schema.

The CDK stack (``infra/``) and this module both build the table and the work queues
from :mod:`infra.schema`: the key schema, index, TTL attribute and redrive exist once.
"""

from __future__ import annotations

from typing import Any

from infra.schema import TABLE, table_definition, work_queue_attributes


def create_table(dynamodb: Any, table_name: str) -> str:
    """Create the table and its TTL; returns the stream ARN."""
    response = dynamodb.create_table(**table_definition(table_name))
    dynamodb.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TABLE.ttl_attribute},
    )
    return str(response["TableDescription"]["LatestStreamArn"])


def create_queues(
    sqs: Any, *, queue_name: str, max_receive_count: int, visibility_timeout: int | None = None
) -> tuple[str, str]:
    """Create the work queue and its dead-letter queue; returns (queue URL, DLQ URL)."""
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    attributes = work_queue_attributes(
        dead_letter_arn=dlq_arn,
        max_receive_count=max_receive_count,
        visibility_timeout_seconds=visibility_timeout,
    )
    queue_url = sqs.create_queue(QueueName=queue_name, Attributes=attributes)["QueueUrl"]
    return str(queue_url), str(dlq_url)


def create_secret(secretsmanager: Any, *, name: str, value: str) -> str:
    """Create a secret holding ``value``; returns its ARN."""
    return str(secretsmanager.create_secret(Name=name, SecretString=value)["ARN"])
