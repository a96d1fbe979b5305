"""The bucket where the default workflow archives each fetched package."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge


class Archive(Construct):
    """Private, encrypted, TLS-only bucket; objects expire with the inbox retention.

    Attributes:
        bucket: The archive; the worker may put objects into it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, retention_days: int) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=False,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-with-inbox-retention",
                    expiration=Duration.days(retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Only the worker's role can write here and nobody reads over the network; "
            "CloudTrail S3 data events are the audit trail if one is wanted, instead of a "
            "second bucket of server access logs that would itself need this rule.",
        )
