"""The worker side of the local stack: Lambda's event-source mappings, emulated.

Runs as its own process (``python -m local.event_sources``), so that it can be
killed and restarted without the front door. Three mappings call the real
handlers, configured from the environment exactly as in Lambda:

* **stream → relay**: reads the table's stream shard by shard (an idle shard four
  times a second, Lambda's base rate) from a persisted
  checkpoint, applies the mapping's filter (outbox inserts), invokes the relay
  with batches of ``RELAY_BATCH_SIZE``, honours partial batch responses (retry
  from the first failed record), halves the batch after a function error (bisect),
  and after ``RELAY_RETRY_ATTEMPTS`` sends the batch's metadata to the relay
  failure queue and moves on. The checkpoint is written only after a batch is
  done, so a kill re-relays at most one batch (at-least-once, as in Lambda). A
  restarted mapping resumes after the checkpoint; a shard whose read fails (an
  iterator expired or forgotten, an answer lost) gets a new iterator after its
  checkpoint at the next poll instead of reading the failed one again, and every
  call to the emulator is bounded (2 s to connect, 30 s to read), so no lost answer
  holds the shard for minutes.
* **SQS → worker**: ``worker_concurrency`` pollers long-poll (20 s, as Lambda's
  pollers do) for up to ``WORKER_BATCH_SIZE`` messages, invoke the worker, delete what succeeded and
  leave reported failures to the visibility timeout; the queue's redrive policy
  (maxReceiveCount) moves poison messages to the dead-letter queue.
* **schedule → reconciler**: every ``reconcile_interval`` seconds.

``--relay-failure-rate`` makes that fraction of relay invocations fail before the
handler runs (a function error), for the fault-injection runs.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

from functions.core import env_names, event_source_limits, table_layout
from local import lambda_logging
from local.child import (
    LambdaContext,
    Stop,
    announce_ready,
    exit_with_parent,
    install_stop_signals,
    quiet_exit,
    refuse_start,
)

if TYPE_CHECKING:
    from types import ModuleType

    from mypy_boto3_dynamodbstreams.client import DynamoDBStreamsClient
    from mypy_boto3_dynamodbstreams.type_defs import (
        GetShardIteratorInputTypeDef,
        RecordTypeDef,
    )
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueOutputTypeDef, MessageTypeDef

log = logging.getLogger("relaylink.local.event_sources")

Handler = Callable[[dict[str, Any], Any], Any]
IDLE_WAIT_SECONDS = 0.05  # after a failed or empty long poll
STREAM_IDLE_SECONDS = 0.25  # Lambda polls a shard four times a second
RECEIVE_WAIT_SECONDS = 20  # Lambda's SQS pollers long-poll
SHARD_REFRESH_SECONDS = 5.0
# The mappings' own calls to the emulator. botocore's defaults (60 s to read, five
# attempts) let one answer that never comes hold the stream's only reader for about
# five minutes, every receipt meanwhile left to the reconciler; Lambda's pollers
# never wait like that. Above the SQS long poll (20 s).
MAPPING_READ_TIMEOUT_SECONDS = RECEIVE_WAIT_SECONDS + 10
INJECTED_RELAY_FAILURE = "injected fault"


def is_outbox_insert(record: Mapping[str, Any]) -> bool:
    """The relay mapping's filter (infra/relay.py ``outbox_insert_filter``)."""
    image = record.get("dynamodb", {}).get("NewImage", {})
    return bool(
        record.get("eventName") == "INSERT"
        and image.get(table_layout.KIND_ATTRIBUTE) == {"S": table_layout.KIND_OUTBOX}
    )


class Checkpoints:
    """Last processed sequence number per shard, in a JSON file (survives a kill)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._values: dict[str, str] = {}
        if path is not None and path.exists():
            self._values = dict(json.loads(path.read_text(encoding="utf-8")))

    def get(self, shard_id: str) -> str | None:
        return self._values.get(shard_id)

    def set(self, shard_id: str, sequence_number: str) -> None:
        self._values[shard_id] = sequence_number
        if self._path is not None:
            temporary = self._path.with_name(self._path.name + ".tmp")
            temporary.write_text(json.dumps(self._values), encoding="utf-8")
            temporary.replace(self._path)


@dataclass
class _Shard:
    shard_id: str
    iterator: str | None
    buffer: list[RecordTypeDef] = field(default_factory=list)
    attempts: int = 0  # failed invocations of the record at the head of the buffer
    batch_size: int = event_source_limits.RELAY_BATCH_SIZE


def records_as_json(streams: DynamoDBStreamsClient) -> None:
    """Make ``streams`` hand back ``GetRecords`` answers as their JSON, unparsed.

    The mapping stands in for Lambda's poller, which passes the records on as the JSON
    it read: ``ApproximateCreationDateTime`` stays epoch seconds (botocore would make
    it a ``datetime``, which no Lambda event holds), and no time goes on botocore's
    walk over every record's images, filtered out or not (the filter runs inside AWS,
    on no function's CPU). Errors are parsed as before.
    """

    def keep_json(
        response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
    ) -> None:
        if response_dict.get("status_code") == HTTPStatus.OK:
            customized_response_dict.update(json.loads(response_dict["body"]))
            response_dict["body"] = b"{}"

    streams.meta.events.register("before-parse.dynamodb-streams.GetRecords", keep_json)


class StreamMapping:
    """DynamoDB stream → relay, with Lambda's retry, bisect and on-failure semantics.

    Give it a client made by :func:`records_as_json`: the relay then gets records as
    Lambda gives them.
    """

    def __init__(
        self,
        *,
        streams: DynamoDBStreamsClient,
        sqs: SQSClient,
        stream_arn: str,
        failure_queue_url: str,
        handler: Handler,
        checkpoints: Checkpoints,
        failure_rate: float = 0.0,
        seed: int = 0,
    ) -> None:
        self._streams = streams
        self._sqs = sqs
        self._stream_arn = stream_arn
        self._failure_queue_url = failure_queue_url
        self._handler = handler
        self._checkpoints = checkpoints
        self._failure_rate = failure_rate
        self._random = random.Random(seed)  # noqa: S311 (reproducible faults, not secrets)
        self._shards: dict[str, _Shard] = {}
        self._refreshed_at = 0.0
        self.invocations = 0
        self.injected_failures = 0
        self.sent_to_failure_queue = 0

    def poll(self) -> bool:
        """One round over the shards; True when any record was handled."""
        lost = any(shard.iterator is None and not shard.buffer for shard in self._shards.values())
        stale = time.monotonic() - self._refreshed_at > SHARD_REFRESH_SECONDS
        if stale or lost or not self._shards:
            self._refresh_shards()
        worked = False
        for shard in self._shards.values():
            worked = self._step(shard) or worked
        return worked

    def _refresh_shards(self) -> None:
        description = self._streams.describe_stream(StreamArn=self._stream_arn)
        for shard in description["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            known = self._shards.get(shard_id)
            if known is not None and (known.iterator is not None or known.buffer):
                continue
            # New, or its iterator was lost (a failed read): from the checkpoint again.
            checkpoint = self._checkpoints.get(shard_id)
            position: GetShardIteratorInputTypeDef = {
                "StreamArn": self._stream_arn,
                "ShardId": shard_id,
                "ShardIteratorType": "TRIM_HORIZON",
            }
            if checkpoint:
                position["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER"
                position["SequenceNumber"] = checkpoint
            iterator = self._streams.get_shard_iterator(**position)["ShardIterator"]
            self._shards[shard_id] = _Shard(shard_id, iterator)
        self._refreshed_at = time.monotonic()

    def _step(self, shard: _Shard) -> bool:
        """One read and invocation; True when records were read (more may be waiting)."""
        read = False
        if not shard.buffer and shard.iterator is not None:
            try:
                response = self._streams.get_records(ShardIterator=shard.iterator, Limit=100)
            except Exception:
                # An iterator that failed once (expired, unknown after a restart of the
                # far side, an answer lost) may fail forever: reading it again would
                # stall the shard for good. The next poll takes a new one from the
                # checkpoint, as Lambda's poller does.
                shard.iterator = None
                raise
            shard.iterator = response.get("NextShardIterator")
            shard.buffer.extend(response.get("Records", []))
            read = bool(shard.buffer)
        skipped = 0  # records the filter drops, checkpointed at once
        while skipped < len(shard.buffer) and not is_outbox_insert(shard.buffer[skipped]):
            skipped += 1
        self._done(shard, skipped)
        if not shard.buffer:
            return read
        window: list[RecordTypeDef] = []
        matching = 0
        for record in shard.buffer:
            window.append(record)
            matching += is_outbox_insert(record)
            if matching == shard.batch_size:
                break
        batch: list[dict[str, Any]] = [
            {**r, "eventSourceARN": self._stream_arn} for r in window if is_outbox_insert(r)
        ]
        failed_at = self._invoke(batch)
        if failed_at is None:
            self._done(shard, len(window))
            shard.attempts = 0
            shard.batch_size = event_source_limits.RELAY_BATCH_SIZE
            return True
        # Everything before the first failed record is done; retry from it.
        failed = batch[failed_at]["dynamodb"]["SequenceNumber"]
        progress = next(
            i for i, r in enumerate(window) if r["dynamodb"]["SequenceNumber"] == failed
        )
        if progress:
            self._done(shard, progress)
            shard.attempts = 0
        shard.attempts += 1
        shard.batch_size = max(1, shard.batch_size // 2)
        if shard.attempts > event_source_limits.RELAY_RETRY_ATTEMPTS:
            self._send_to_failure_queue(shard, batch)
            self._done(shard, len(window))
            shard.attempts = 0
            shard.batch_size = event_source_limits.RELAY_BATCH_SIZE
        return True

    def _invoke(self, batch: list[dict[str, Any]]) -> int | None:
        """None on success; else the index in ``batch`` of the first failed record."""
        self.invocations += 1
        if self._failure_rate and self._random.random() < self._failure_rate:
            self.injected_failures += 1
            # One line each: the chaos run counts them in this process's log (a kill
            # would lose an in-memory count).
            log.warning("relay invocation failed: %s", INJECTED_RELAY_FAILURE)
            return 0
        try:
            response = self._handler({"Records": batch}, LambdaContext("relay")) or {}
        except Exception as exc:  # noqa: BLE001 (a function error: Lambda retries the batch)
            log.warning("relay invocation failed: %s", _describe(exc))
            return 0
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        for index, record in enumerate(batch):
            if record["dynamodb"]["SequenceNumber"] in failed:
                return index
        return None

    def _done(self, shard: _Shard, count: int) -> None:
        if count <= 0:
            return
        last = shard.buffer[count - 1]
        del shard.buffer[:count]
        self._checkpoints.set(shard.shard_id, last["dynamodb"]["SequenceNumber"])

    def _send_to_failure_queue(self, shard: _Shard, batch: list[dict[str, Any]]) -> None:
        """What Lambda's on-failure destination gets: metadata, never the records."""
        numbers = [r["dynamodb"]["SequenceNumber"] for r in batch]
        body = {
            "requestContext": {"condition": "RetryAttemptsExhausted"},
            "DDBStreamBatchInfo": {
                "shardId": shard.shard_id,
                "startSequenceNumber": numbers[0],
                "endSequenceNumber": numbers[-1],
                "batchSize": len(batch),
                "streamArn": self._stream_arn,
            },
        }
        self._sqs.send_message(QueueUrl=self._failure_queue_url, MessageBody=json.dumps(body))
        self.sent_to_failure_queue += 1


def sqs_event(messages: Sequence[MessageTypeDef], queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda SQS event for received messages (received with every attribute)."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {
                    name: lambda_message_attribute(value)
                    for name, value in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


def lambda_message_attribute(received: MessageAttributeValueOutputTypeDef) -> dict[str, Any]:
    """A message attribute as Lambda's SQS event spells it (``ReceiveMessage`` says
    ``StringValue``, the event ``stringValue``; binary values arrive base64-encoded)."""
    attribute: dict[str, Any] = {
        "dataType": received["DataType"],
        "stringListValues": [],
        "binaryListValues": [],
    }
    if "StringValue" in received:
        attribute["stringValue"] = received["StringValue"]
    if "BinaryValue" in received:
        attribute["binaryValue"] = base64.b64encode(received["BinaryValue"]).decode("ascii")
    return attribute


class QueueMapping:
    """SQS → worker: partial batch responses; failures wait out the visibility timeout."""

    def __init__(self, *, sqs: SQSClient, queue_url: str, handler: Handler, region: str) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._handler = handler
        self._region = region
        self._queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]

    def poll(self) -> bool:
        messages = self._sqs.receive_message(
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=event_source_limits.WORKER_BATCH_SIZE,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            WaitTimeSeconds=RECEIVE_WAIT_SECONDS,
        ).get("Messages", [])
        if not messages:
            return False
        event = sqs_event(messages, self._queue_arn, self._region)
        try:
            response = self._handler(event, LambdaContext("worker")) or {}
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception as exc:  # noqa: BLE001 (a function error: the whole batch returns)
            log.warning("worker invocation failed: %s", _describe(exc))
            return True
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self._sqs.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                ],
            )
        return True


def _describe(exc: BaseException) -> str:
    """The exception's type; a settings error's message too (it names a variable only)."""
    from functions.core.env_parsers import SettingsError  # noqa: PLC0415

    return f"{type(exc).__name__}: {exc}" if isinstance(exc, SettingsError) else type(exc).__name__


def _run(
    poll: Callable[[], bool], stop: threading.Event, name: str, idle: float = IDLE_WAIT_SECONDS
) -> None:
    """Poll until stopped; wait ``idle`` seconds when idle. A failing poll is retried."""
    while not stop.is_set():
        try:
            worked = poll()
        except Exception as exc:  # noqa: BLE001 (e.g. the emulator throttled us: keep going)
            log.warning("%s poll failed: %s", name, type(exc).__name__)
            worked = False
        if not worked:
            stop.wait(idle)


def _run_every(call: Callable[[], Any], interval: float, stop: threading.Event) -> None:
    while not stop.wait(interval):
        try:
            call()
        except Exception as exc:  # noqa: BLE001 (the next schedule tick retries)
            log.warning("scheduled invocation failed: %s", _describe(exc))


def scheduled_event() -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "resources": [],
        "detail": {},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.event_sources", description=__doc__)
    parser.add_argument("--stream-arn", required=True)
    parser.add_argument("--relay-failure-queue-url", required=True)
    parser.add_argument("--checkpoint-file", type=Path)
    parser.add_argument("--worker-concurrency", type=int, default=2)
    parser.add_argument("--reconcile-interval", type=float, default=5.0)
    parser.add_argument("--relay-failure-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    # The mappings' own warnings are the emulator's, not a function's: on stderr, past
    # the functions' log handling.
    own = logging.StreamHandler(sys.stderr)
    own.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    log.addHandler(own)
    log.setLevel(logging.WARNING)
    log.propagate = False
    install_stop_signals()
    exit_with_parent()
    lambda_logging.install()  # as Lambda's runtime does, before it imports the handlers

    import boto3  # noqa: PLC0415 (after the signals: a stop during import is quiet)

    from functions.reconciler import handler as reconciler  # noqa: PLC0415
    from functions.relay import handler as relay  # noqa: PLC0415
    from functions.worker import handler as worker  # noqa: PLC0415

    _build_the_worker(worker)
    region = os.environ.get("AWS_REGION", "us-east-1")
    from botocore.config import Config  # noqa: PLC0415 (as boto3, after the signals)

    bounded = Config(
        connect_timeout=2, read_timeout=MAPPING_READ_TIMEOUT_SECONDS, retries={"mode": "standard"}
    )
    sqs = boto3.client("sqs", config=bounded)
    streams = boto3.client("dynamodbstreams", config=bounded)
    records_as_json(streams)
    stream = StreamMapping(
        streams=streams,
        sqs=sqs,
        stream_arn=args.stream_arn,
        failure_queue_url=args.relay_failure_queue_url,
        handler=relay.lambda_handler,
        checkpoints=Checkpoints(args.checkpoint_file),
        failure_rate=args.relay_failure_rate,
        seed=args.seed,
    )
    queue = QueueMapping(
        sqs=sqs,
        queue_url=os.environ[env_names.ENV_WORK_QUEUE_URL],
        handler=worker.lambda_handler,
        region=region,
    )
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_run, args=(stream.poll, stop, "stream", STREAM_IDLE_SECONDS), daemon=True
        )
    ]
    threads += [
        threading.Thread(target=_run, args=(queue.poll, stop, "queue"), daemon=True)
        for _ in range(args.worker_concurrency)
    ]
    threads.append(
        threading.Thread(
            target=_run_every,
            args=(
                lambda: reconciler.lambda_handler(scheduled_event(), LambdaContext("reconciler")),
                args.reconcile_interval,
                stop,
            ),
            daemon=True,
        )
    )
    for thread in threads:
        thread.start()
    announce_ready(args.ready_file)
    try:
        while True:
            time.sleep(3600)
    except Stop:
        stop.set()
    quiet_exit()
    return 0


def _build_the_worker(worker: ModuleType) -> None:
    """Build the worker's dependencies, its workflow included, before serving: a
    workflow that cannot be loaded or built refuses the start, naming it, instead of
    leaving every delivery pending behind a ready stack."""
    try:
        worker.container_deps.get()
    except Exception as exc:  # noqa: BLE001 (whatever the team's factory raises: reported)
        workflow = os.environ.get(env_names.ENV_WORKFLOW, "")
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        refuse_start(f"the worker cannot build workflow {workflow!r}: {detail}")


if __name__ == "__main__":
    main()
