"""Durable steps: a step's result is recorded once per delivery and read back on retries.

``ledger.step(name, fn)`` (:meth:`~functions.core.effects.EffectLedger.step`) calls
``fn`` the first time and keeps what it returns; every later attempt of the delivery
gets the kept result without calling ``fn``. A workflow puts its expensive or
non-deterministic work (a model call) in steps and feeds their *recorded* results
to its effects::

    summary = ledger.step("model", lambda: call_model(package))
    ledger.run("alert", lambda key: publish(summary, key))

so a retry can never publish a second, different summary.

A step's record moves like this:

* none -> ``started`` (a run begins; ``runs`` counts the runs);
* ``started`` -> ``recorded``: ``fn`` returned; its result is kept for good;
* ``started`` -> ``failed``: ``fn`` raised; the next attempt runs it again;
* ``started`` -> ``started``: the worker died inside ``fn`` (or lost its result), so
  the next attempt runs it again. That is a *rerun*, counted as ``StepReruns``
  because its work was done and paid for twice; at most one per attempt.

The first recorded result wins: a worker that finishes after another one recorded
a result (its lease ran out meanwhile) returns the recorded result, not its own.
Results are stored as compact JSON, and the first run also returns the stored form
(decoded again), so it sees exactly what every retry will see.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from functions.core.clock import Clock
from functions.core.errors import PermanentError, StorageUnavailable
from functions.core.metric_names import METRIC_STEP_RERUNS
from functions.core.observability import logger
from functions.core.ports.steps import ObjectStore, StepRecord, StepStatus, StepStore, StoredResult

if TYPE_CHECKING:
    from functions.core.ports.metrics import MetricsSink

# Results up to this many bytes of compact JSON live in the step record; DynamoDB
# caps an item at 400 KB, so larger ones go to the object store by content digest.
INLINE_RESULT_LIMIT: Final = 64 * 1024
RESULT_OBJECT_PREFIX: Final = "step-results/sha256/"


@dataclass(frozen=True, slots=True)
class StepStorage:
    """What steps need beyond the ledger: built once, shared by every delivery's ledger.

    Attributes:
        records: the step records.
        metrics: counts reruns (``StepReruns``); the step's name goes to the log.
        objects: holds results over ``inline_limit``; without it such a result is an error.
    """

    records: StepStore
    metrics: MetricsSink
    objects: ObjectStore | None = None
    inline_limit: int = INLINE_RESULT_LIMIT


def encode_result(value: object) -> bytes:
    """Compact JSON; raises ``TypeError``/``ValueError`` on what JSON cannot hold."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def result_object_key(digest: str) -> str:
    """Where a large result lives: its digest names it, so a repeated put is harmless."""
    return RESULT_OBJECT_PREFIX + digest


def keep_result(body: bytes, *, objects: ObjectStore | None, inline_limit: int) -> StoredResult:
    """``body`` as its record keeps it: inline up to ``inline_limit`` bytes, else put in
    ``objects`` under its digest (a package's record keeps its content the same way).

    Raises:
        ValueError: ``body`` is over the limit and there is no object store.
    """
    if len(body) <= inline_limit:
        return StoredResult(size=len(body), inline=body.decode())
    if objects is None:
        raise ValueError(
            f"a result of {len(body)} bytes is over the inline limit ({inline_limit})"
            " and no object store is configured"
        )
    digest = hashlib.sha256(body).hexdigest()
    objects.put(result_object_key(digest), body)
    return StoredResult(size=len(body), digest=digest)


class StepRecorder:
    """The steps of one delivery, behind :meth:`~functions.core.effects.EffectLedger.step`."""

    def __init__(
        self, delivery_id: str, *, storage: StepStorage, clock: Clock, expires_at: int = 0
    ) -> None:
        self.delivery_id = delivery_id
        self._storage = storage
        self._records = storage.records
        self._clock = clock
        self._expires_at = expires_at

    def run(self, name: str, fn: Callable[[], object]) -> Any:
        """The recorded result of step ``name``, running ``fn`` when there is none yet.

        ``name`` is checked by the ledger.

        Returns:
            The result as JSON decodes it (lists for tuples, string keys).

        Raises:
            PermanentError: ``step_result_lost``: a large result's object is gone.
            Whatever ``fn`` raises.
        """
        record = self._records.get(self.delivery_id, name)
        if record is not None and record.status is StepStatus.RECORDED:
            return self._load(record)
        before = self._records.start(
            self.delivery_id, name, now=self._clock.now(), expires_at=self._expires_at
        )
        if before is not None and before.status is StepStatus.RECORDED:
            return self._load(before)  # another worker recorded it since our read
        run = (before.runs if before is not None else 0) + 1
        if before is not None and before.status is StepStatus.STARTED:
            self._count_rerun(name, run)
        try:
            body = encode_result(fn())
        except Exception:
            # Any failure of fn (ours to record, not to judge): marking the run failed
            # keeps the next attempt from counting as a rerun. If the mark cannot be
            # written, it will count as one, which errs on the safe side.
            with suppress(StorageUnavailable):
                self._records.record_failed(self.delivery_id, name, run=run, now=self._clock.now())
            raise
        first = self._records.record_result(
            self.delivery_id, name, result=self._keep(body), now=self._clock.now()
        )
        if first is not None:
            return self._load(first)
        return json.loads(body)

    def _count_rerun(self, name: str, run: int) -> None:
        # One metric to alarm on; the step's name is in the log line (the metrics port
        # has no dimensions, and a metric per step name would multiply alarms).
        self._storage.metrics.count(METRIC_STEP_RERUNS)
        logger.warning(
            "step rerun: an earlier attempt died inside it",
            extra={"delivery_id": self.delivery_id, "step": name, "run": run},
        )

    def _keep(self, body: bytes) -> StoredResult:
        storage = self._storage
        return keep_result(body, objects=storage.objects, inline_limit=storage.inline_limit)

    def _load(self, record: StepRecord) -> Any:
        result = record.result
        if result is None:
            raise ValueError(f"step {record.name!r} is recorded without a result")
        if result.inline is not None:
            return json.loads(result.inline)
        digest = str(result.digest)
        body = self._objects(result.size).get(result_object_key(digest))
        if body is None or hashlib.sha256(body).hexdigest() != digest:
            raise PermanentError("step_result_lost")
        return json.loads(body)

    def _objects(self, size: int) -> ObjectStore:
        if self._storage.objects is None:
            raise ValueError(
                f"a step result of {size} bytes is over the inline limit"
                f" ({self._storage.inline_limit}) and no object store is configured"
            )
        return self._storage.objects
