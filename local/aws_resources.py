"""Create the stack's AWS resources in an emulator (moto), from the shared schema.

The CDK stack (``infra/``) and this module both build the table and the work queues
from :mod:`infra.schema`: the key schema, index, TTL attribute and redrive exist once.
:func:`create_stack_resources` creates everything the local stack's functions use.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cli.aws_clients import AwsClients
from cli.state import Resources
from functions.core import settings_table
from infra.schema import TABLE, max_receive_count_for, table_definition, work_queue_attributes

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_secretsmanager.client import SecretsManagerClient
    from mypy_boto3_sqs.client import SQSClient


def create_table(dynamodb: DynamoDBClient, table_name: str) -> str:
    """Create the table and its TTL; returns the stream ARN."""
    response = dynamodb.create_table(**table_definition(table_name))
    dynamodb.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TABLE.ttl_attribute},
    )
    return str(response["TableDescription"]["LatestStreamArn"])


def create_queues(
    sqs: SQSClient,
    *,
    queue_name: str,
    max_receive_count: int,
    visibility_timeout: int | None = None,
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


def create_secret(secretsmanager: SecretsManagerClient, *, name: str, value: str) -> str:
    """Create a secret holding ``value``; returns its ARN."""
    return str(secretsmanager.create_secret(Name=name, SecretString=value)["ARN"])


def create_stack_resources(
    client: AwsClients,
    *,
    prefix: str,
    signing_secrets: Sequence[str],
    mcp_token: str,
    max_attempts: int,
    retry_base_seconds: int,
    visibility_timeout: int,
) -> Resources:
    """Table, work queues, relay failure queue, secrets, archive bucket, alarm and alert
    topics.

    Args:
        client: boto3 clients by service name, pointed at the emulator.
        prefix: of every resource's name.
    """
    dynamodb, sqs = client("dynamodb"), client("sqs")
    secretsmanager, s3 = client("secretsmanager"), client("s3")
    table_name = f"{prefix}-inbox"
    stream_arn = create_table(dynamodb, table_name)
    work_queue_url, dead_letter_queue_url = create_queues(
        sqs,
        queue_name=f"{prefix}-work",
        # The local worker retries within the deployed default horizon.
        max_receive_count=max_receive_count_for(
            max_attempts,
            retry_horizon_seconds=settings_table.WORKER_RETRY_HORIZON_HOURS.env_default,
            retry_base_seconds=retry_base_seconds,
        ),
        visibility_timeout=visibility_timeout,
    )
    relay_failure_queue_url = sqs.create_queue(QueueName=f"{prefix}-relay-failures")["QueueUrl"]
    bucket = f"{prefix}-archive"
    s3.create_bucket(Bucket=bucket)
    sns = client("sns")
    topic_arn = sns.create_topic(Name=f"{prefix}-alarms")["TopicArn"]
    alert_topic_arn = sns.create_topic(Name=f"{prefix}-alerts")["TopicArn"]
    return Resources(
        table_name=table_name,
        work_queue_url=work_queue_url,
        dead_letter_queue_url=dead_letter_queue_url,
        relay_failure_queue_url=relay_failure_queue_url,
        signing_secrets_arn=create_secret(
            secretsmanager,
            name=f"{prefix}/signing-secrets",
            value=json.dumps(list(signing_secrets)),
        ),
        mcp_token_secret_arn=create_secret(
            secretsmanager, name=f"{prefix}/mcp-token", value=mcp_token
        ),
        archive_bucket=bucket,
        stream_arn=stream_arn,
        alarm_topic_arn=topic_arn,
        alert_topic_arn=alert_topic_arn,
    )


def create_alert_topic(client: AwsClients, *, prefix: str) -> tuple[str, str]:
    """The agent workflow's alert topic, with a queue subscribed so that a check can
    count the alerts; returns (topic ARN, queue URL)."""
    sns, sqs = client("sns"), client("sqs")
    # The same name as the stack's alert topic: SNS answers an existing topic's ARN.
    topic_arn = sns.create_topic(Name=f"{prefix}-alerts")["TopicArn"]
    queue_url = sqs.create_queue(QueueName=f"{prefix}-alerts")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn)
    return topic_arn, queue_url
