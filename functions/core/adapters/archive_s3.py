"""Archiving packages in S3 (the default workflow's repeatable effect).

A put of the same key and bytes reaches the same state, so whatever its answer the
next attempt simply puts again (mode ``repeatable``, no ledger record). What an answer
proves only decides whether the delivery is retried:

* stored: applied;
* ``SlowDown``, ``InternalError``, ``ServiceUnavailable``, ``RequestTimeout``, any 5xx,
  a timeout, a connection lost or never opened: maybe not stored ->
  :class:`~functions.core.errors.TransientError` (``archive_unavailable``), put again later;
* any other error (``AccessDenied``, ``NoSuchBucket``, a KMS key refused): refused for
  good -> :class:`~functions.core.errors.Rejected` (``archive_rejected``): the delivery
  fails now and visibly, not retried until its horizon; fix the bucket or the grant,
  then requeue (``requeue --state failed --reason archive_rejected``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from functions.core.errors import Rejected, TransientError

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
            raise Rejected("archive_rejected") from exc  # a misconfiguration: fail visibly
