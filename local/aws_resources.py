"""Create the stack's AWS resources in an emulator (moto), from the shared names.

The CDK stack (``infra/``) and this module both build the table from
``functions.core.table_layout``: the key schema, index and TTL attribute exist once.
"""

from __future__ import annotations

from typing import Any

from functions.core import table_layout


def table_definition(table_name: str) -> dict[str, Any]:
    """``CreateTable`` arguments for the stack's table (on-demand, NEW_IMAGE stream)."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": table_layout.TABLE_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": table_layout.TABLE_SORT_KEY, "AttributeType": "S"},
            {"AttributeName": table_layout.STATE_INDEX_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": table_layout.STATE_INDEX_SORT_KEY, "AttributeType": "N"},
        ],
        "KeySchema": [
            {"AttributeName": table_layout.TABLE_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": table_layout.TABLE_SORT_KEY, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": table_layout.STATE_INDEX,
                "KeySchema": [
                    {"AttributeName": table_layout.STATE_INDEX_PARTITION_KEY, "KeyType": "HASH"},
                    {"AttributeName": table_layout.STATE_INDEX_SORT_KEY, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    }


def create_table(dynamodb: Any, table_name: str) -> str:
    """Create the table and its TTL; returns the stream ARN."""
    response = dynamodb.create_table(**table_definition(table_name))
    dynamodb.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": table_layout.TTL_ATTRIBUTE},
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
    redrive = f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"{max_receive_count}"}}'
    attributes = {"RedrivePolicy": redrive}
    if visibility_timeout is not None:
        attributes["VisibilityTimeout"] = str(visibility_timeout)
    queue_url = sqs.create_queue(QueueName=queue_name, Attributes=attributes)["QueueUrl"]
    return str(queue_url), str(dlq_url)


def create_secret(secretsmanager: Any, *, name: str, value: str) -> str:
    """Create a secret holding ``value``; returns its ARN."""
    return str(secretsmanager.create_secret(Name=name, SecretString=value)["ARN"])
