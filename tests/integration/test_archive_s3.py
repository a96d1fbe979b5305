"""The archive put on moto: each answer's row (functions/core/adapters/archive_s3.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

from functions.core.adapters.archive_s3 import S3Archive
from functions.core.errors import Rejected, TransientError
from local.testkit.botocore_hooks import answer_first, aws_response, divert_from_emulator
from local.testkit.moto_world import REGION

if TYPE_CHECKING:
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from mypy_boto3_s3.client import S3Client

BUCKET = "relaylink-archive"


@pytest.fixture
def s3(moto_aws: None) -> S3Client:
    client = boto3.client("s3", region_name=REGION, config=Config(retries={"max_attempts": 0}))
    client.create_bucket(Bucket=BUCKET)
    return client


def test_archive_put_is_stored(s3: S3Client) -> None:
    S3Archive(client=s3, bucket=BUCKET).put("packages/a.json", b"{}")
    assert s3.get_object(Bucket=BUCKET, Key="packages/a.json")["Body"].read() == b"{}"


def test_archive_put_to_a_missing_bucket_is_rejected_for_good(s3: S3Client) -> None:
    with pytest.raises(Rejected, match="archive_rejected"):
        S3Archive(client=s3, bucket="no-such-bucket").put("packages/a.json", b"{}")


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (500, "InternalError")])
def test_archive_put_answered_5xx_is_put_again_later(s3: S3Client, status: int, code: str) -> None:
    body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()

    def answer(request: AWSPreparedRequest, **_: object) -> AWSResponse:
        response = aws_response(
            request, status, body, content_type="application/xml", request_id="injected"
        )
        divert_from_emulator(request)
        return response

    answer_first(s3, "before-send.s3.PutObject", answer)
    with pytest.raises(TransientError, match="archive_unavailable"):
        S3Archive(client=s3, bucket=BUCKET).put("packages/a.json", b"{}")
