"""``python -m bench.async_peer.worker``: the asynchronous peer's worker, polling SQS as
Lambda's event-source mapping would and handing each batch to Powertools' batch
processor; each record runs the baseline's ``@idempotent_function`` (fetch over MCP,
the default workflow's effects straight to their targets).

A record that fails stays in the queue and comes back after its visibility timeout; an
in-progress idempotency record left by a killed worker expires with the invocation's
time (:data:`INVOCATION_MS`), after which a redelivery runs the effect again.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import boto3
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from local.child import announce_ready, exit_with_parent, install_stop_signals

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

INVOCATION_MS: Final = 10_000  # the worker's timeout here, as the baseline's request
VISIBILITY_TIMEOUT_SECONDS: Final = 12  # above the invocation's time, as AWS asks


@dataclass(frozen=True)
class _Context:
    """What Powertools reads of a Lambda context: the time left."""

    def get_remaining_time_in_millis(self) -> int:
        return INVOCATION_MS


def _record_handler(record: SQSRecord) -> None:
    from bench.baseline import handler  # noqa: PLC0415 (imported once, below)

    handler.process(delivery=json.loads(record.body))


def _to_event(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:peer",
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


def run(queue_url: str) -> None:
    """Poll, process, delete what succeeded; until the process is stopped."""
    from bench.baseline import handler  # noqa: PLC0415 (pay the cold start before polling)

    sqs = boto3.client("sqs")
    processor = BatchProcessor(event_type=EventType.SQS)
    while True:
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            VisibilityTimeout=VISIBILITY_TIMEOUT_SECONDS,
        ).get("Messages", [])
        if not messages:
            continue
        context = cast("LambdaContext", _Context())
        handler.config.register_lambda_context(context)
        answer = process_partial_response(
            event=_to_event(messages),
            record_handler=_record_handler,
            processor=processor,
            context=context,
        )
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                ],
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.async_peer.worker")
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    install_stop_signals()
    exit_with_parent()
    announce_ready(args.ready_file)
    run(os.environ["PEER_QUEUE_URL"])
    return 0


if __name__ == "__main__":
    main()
