"""The work dead-letter queue as the console shows it: its depth and a sample of it.

A peek receives with a visibility timeout of 0, so the letters stay where they are
for ``redrive``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core.models import WorkItem
from ops.requeue import dead_letter_count
from ops.target import OperatorError, Target, describe_aws_error

_BATCH: Final = 10


@dataclass(frozen=True, slots=True)
class DeadLetters:
    depth: int  # approximate, as SQS counts (visible or not)
    delivery_ids: list[str]  # a sample of the letters' deliveries (malformed ones skipped)


def _sqs(call: Any, **arguments: Any) -> Any:
    try:
        return call(**arguments)
    except (ClientError, BotoCoreError) as exc:
        raise OperatorError(f"SQS: {describe_aws_error(exc)}") from None


def peek(target: Target) -> DeadLetters:
    response = _sqs(
        target.sqs.receive_message,
        QueueUrl=target.dead_letter_queue_url,
        MaxNumberOfMessages=_BATCH,
        VisibilityTimeout=0,
    )
    ids: list[str] = []
    for message in response.get("Messages", []):
        try:
            ids.append(WorkItem.from_json(message["Body"]).delivery_id)
        except ValueError:
            continue
    return DeadLetters(dead_letter_count(target), sorted(set(ids)))
