"""The asynchronous peer's receiver: verify the signature, send the delivery to SQS, 202.

No record of its own: SQS's send is the durable step, and a duplicate delivery is the
worker's idempotency record's to stop. It verifies and parses as the baseline does (our
signature check and body parser), so that the comparison is about the design.

Environment: ``PEER_QUEUE_URL``, ``SIGNING_SECRETS_ARN``, and AWS's usual variables.
"""

from __future__ import annotations

import json
import os
from typing import Any

import boto3

from bench.baseline.verification import answer, verified_work, work_body
from functions.core.models import WorkItem

_sqs = boto3.client("sqs")


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    del context
    work = verified_work(event)
    if not isinstance(work, WorkItem):
        return work
    _sqs.send_message(
        QueueUrl=os.environ["PEER_QUEUE_URL"], MessageBody=json.dumps(work_body(work))
    )
    return answer(202, "queued")
