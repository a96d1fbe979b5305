"""Step results too large for their record, in S3: the steps' ``ObjectStore`` port.

They go to the archive bucket under ``step-results/sha256/<digest>``; the writes are
the archive's own (:class:`~functions.core.adapters.archive_s3.S3Archive`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core.adapters.archive_s3 import S3Archive
from functions.core.errors import TransientError

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

_NOT_FOUND: Final = frozenset({"NoSuchKey", "404"})


class S3ObjectStore:
    """Puts and gets whole objects of one bucket."""

    def __init__(self, *, client: S3Client, bucket: str) -> None:
        self._client = client
        self._bucket = bucket
        self._archive = S3Archive(client=client, bucket=bucket)

    def put(self, key: str, body: bytes) -> None:
        self._archive.put(key, body)

    def get(self, key: str) -> bytes | None:
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=key)
            body: bytes = response["Body"].read()
        except BotoCoreError as exc:
            raise TransientError("archive_unavailable") from exc
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in _NOT_FOUND:
                return None
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if status >= 500 or code == "RequestTimeout":
                raise TransientError("archive_unavailable") from exc
            raise  # access denied, no such bucket: a misconfiguration, surfaced as it is
        return body
