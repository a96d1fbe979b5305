"""Archiving packages in S3 (the default workflow's repeatable effect)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from functions.core.errors import TransientError

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

_RETRYABLE_CODES = frozenset({"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout"})


class S3Archive:
    """Puts objects into one bucket. A put of the same key and bytes is repeatable."""

    def __init__(self, *, client: S3Client, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def put(self, key: str, body: bytes, *, content_type: str = "application/json") -> None:
        try:
            self._client.put_object(
                Bucket=self._bucket, Key=key, Body=body, ContentType=content_type
            )
        except BotoCoreError as exc:
            raise TransientError("archive_unavailable") from exc
        except ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if exc.response.get("Error", {}).get("Code") in _RETRYABLE_CODES or status >= 500:
                raise TransientError("archive_unavailable") from exc
            raise  # access denied, no such bucket: a misconfiguration, surfaced as it is
