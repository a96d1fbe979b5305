"""boto3 clients by service name, each typed as its own service's client.

The local stack, the test kit and the benches make clients by name for one endpoint
(the emulator, or in-process moto). boto3's type stubs know a client's type only from
a literal service name, so the names used here are listed once, with their types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, overload

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodbstreams.client import DynamoDBStreamsClient
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_secretsmanager.client import SecretsManagerClient
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sqs.client import SQSClient

Service = Literal["dynamodb", "dynamodbstreams", "s3", "secretsmanager", "sns", "sqs"]


@dataclass(frozen=True, slots=True)
class AwsClients:
    """Makes clients of boto3's default session for one region and, optionally, one
    endpoint and key pair: ``clients("dynamodb")``.

    Attributes:
        region: every client's region.
        endpoint_url: where the clients send requests (None: AWS, or moto's mock).
        access_key_id: with ``secret_access_key``, the credentials to sign with
            (None: the session's own).
    """

    region: str
    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None

    @overload
    def __call__(self, service: Literal["dynamodb"]) -> DynamoDBClient: ...
    @overload
    def __call__(self, service: Literal["dynamodbstreams"]) -> DynamoDBStreamsClient: ...
    @overload
    def __call__(self, service: Literal["s3"]) -> S3Client: ...
    @overload
    def __call__(self, service: Literal["secretsmanager"]) -> SecretsManagerClient: ...
    @overload
    def __call__(self, service: Literal["sns"]) -> SNSClient: ...
    @overload
    def __call__(self, service: Literal["sqs"]) -> SQSClient: ...
    def __call__(self, service: Service) -> BaseClient:
        import boto3  # noqa: PLC0415 (only callers that talk to AWS pay for it)

        return boto3.client(
            service,
            region_name=self.region,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )
