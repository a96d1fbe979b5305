"""The stream mapping resumes a shard whose iterator failed, from its checkpoint.

A fake stream (no sockets): the first iterator it hands out fails on every read, as an
expired iterator, or one the far side forgot, does. The mapping must not read it again
forever (the shard would never be relayed again, every receipt left to the
reconciler): it takes a new iterator after the checkpoint and relays what follows.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from functions.core import table_layout
from local.event_sources import Checkpoints, StreamMapping

SHARD = "shardId-1"
ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/label"


class IteratorLost(Exception):
    """What the far side answers for an iterator it no longer knows."""


def _outbox(sequence: int) -> dict[str, Any]:
    image = {
        table_layout.KIND_ATTRIBUTE: {"S": table_layout.KIND_OUTBOX},
        "delivery_id": {"S": f"d{sequence}"},
    }
    return {
        "eventName": "INSERT",
        "dynamodb": {"SequenceNumber": str(sequence), "NewImage": image},
    }


@dataclass
class FakeStream:
    """One shard; iterators name the position after which they read."""

    records: list[dict[str, Any]] = field(default_factory=list)
    dead: set[str] = field(default_factory=set)
    issued: list[str] = field(default_factory=list)
    numbers: itertools.count[int] = field(default_factory=itertools.count)

    def _issue(self, after: int) -> str:
        self.issued.append(f"{next(self.numbers)}:{after}")
        return self.issued[-1]

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": SHARD}]}}

    def get_shard_iterator(self, **request: Any) -> dict[str, Any]:
        after = int(request.get("SequenceNumber", 0))
        return {"ShardIterator": self._issue(after)}

    def get_records(self, *, ShardIterator: str, Limit: int) -> dict[str, Any]:
        if ShardIterator in self.dead:
            raise IteratorLost
        after = int(ShardIterator.split(":")[1])
        found = [r for r in self.records if int(r["dynamodb"]["SequenceNumber"]) > after][:Limit]
        last = int(found[-1]["dynamodb"]["SequenceNumber"]) if found else after
        return {"Records": found, "NextShardIterator": self._issue(last)}


def test_a_failed_iterator_is_replaced_from_the_checkpoint(tmp_path: Path) -> None:
    stream = FakeStream(records=[_outbox(1)])
    relayed: list[str] = []

    def relay(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        relayed.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])
        return {"batchItemFailures": []}

    checkpoints = Checkpoints(tmp_path / "checkpoints.json")
    mapping = StreamMapping(
        streams=cast(Any, stream),
        sqs=cast(Any, None),
        stream_arn=ARN,
        failure_queue_url="",
        handler=relay,
        checkpoints=checkpoints,
    )
    assert mapping.poll()
    assert relayed == ["1"]
    assert checkpoints.get(SHARD) == "1"

    # Every iterator handed out so far is lost; a receipt arrives after them.
    stream.dead.update(stream.issued)
    stream.records.append(_outbox(2))
    with pytest.raises(IteratorLost):
        mapping.poll()
    for _ in range(3):  # a few polls, as the reader's loop makes them
        mapping.poll()
    assert relayed == ["1", "2"]
    assert checkpoints.get(SHARD) == "2"
