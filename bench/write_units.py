"""DynamoDB write request units, counted from the items each write really changed.

moto answers ``ReturnConsumedCapacity`` with a constant (1 unit per call, no index
figures), so the units are computed instead, by DynamoDB's published rules, from the
item images around every write request: a botocore hook on boto3's default session
(every client of every function) reads each written item just before the request is
sent and just after it returned, through a client of its own session (not counted,
not metered). Per write:

* table: ``ceil(max(size before, size after) / 1 KB)`` units, at least 1 (a refused
  conditional write is still charged, for the item as it is); doubled for an item of
  ``TransactWriteItems``;
* each global secondary index of ``infra.schema.TABLE``, from the index entry before
  and after (the projected attributes, if the image has both index keys): a new entry
  is a put (``ceil(entry size / 1 KB)``), a removed one a delete (1), a changed key a
  delete and a put, a changed projected attribute under the same key one write, and no
  change costs nothing (with ``KEYS_ONLY``, updating a non-key attribute writes no
  index). Index writes are not doubled in a transaction.

Item sizes are DynamoDB's: attribute names plus values (:func:`item_size`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from functions.core import table_layout
from functions.core.adapters.dynamodb_spend import SK_SPEND
from functions.core.adapters.dynamodb_steps import SK_STEP_PREFIX
from infra.schema import TABLE as TABLE_SCHEMA
from infra.schema import GlobalIndex

if TYPE_CHECKING:
    from botocore.hooks import BaseEventHooks
    from botocore.model import OperationModel
    from mypy_boto3_dynamodb.client import DynamoDBClient

KB: Final = 1024
# The records a workflow writes for itself (its effects and steps), not the pipeline's.
WORKFLOW_RECORD_PREFIXES: Final = (table_layout.SK_EFFECT_PREFIX, SK_STEP_PREFIX, SK_SPEND)
# Where figure 7 counts the capacity units of those records' reads.
WORKFLOW_PHASE: Final = "workflow"
_CHECK: Final = "ConditionCheck"
_SINGLE_WRITES: Final = {"PutItem": "Put", "UpdateItem": "Update", "DeleteItem": "Delete"}
_TABLE_KEYS: Final = (table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY)


def item_size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it (names + values; numbers approximated)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    (kind, inner), *_ = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        digits = len(str(Decimal(str(inner))).replace("-", "").replace(".", "").lstrip("0"))
        return 1 + (digits + 1) // 2
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in inner.items())
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in inner)
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(v).encode()) for v in inner)
    raise ValueError(f"unknown attribute type {kind}")


def _units(size: int) -> int:
    return max(1, math.ceil(size / KB))


def index_entry(index: GlobalIndex, image: dict[str, Any] | None) -> dict[str, Any] | None:
    """What ``index`` holds for an item ``image``: None when the item is not in it."""
    keys = (index.keys.partition.name, index.keys.sort.name)
    if image is None or any(key not in image for key in keys):
        return None
    if index.projection == "ALL":
        return dict(image)
    if index.projection == "KEYS_ONLY":
        return {name: image[name] for name in (*_TABLE_KEYS, *keys)}
    raise ValueError(f"projection {index.projection} is not modelled")


def index_units(
    index: GlobalIndex, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> int:
    """Write units ``index`` consumes when an item goes from ``before`` to ``after``."""
    old, new = index_entry(index, before), index_entry(index, after)
    if old == new:
        return 0
    if old is None:
        assert new is not None
        return _units(item_size(new))  # a put
    if new is None:
        return _units(item_size(old))  # a delete
    keys = (index.keys.partition.name, index.keys.sort.name)
    if any(old[key] != new[key] for key in keys):
        return _units(item_size(old)) + _units(item_size(new))  # a delete and a put
    return _units(max(item_size(old), item_size(new)))  # an update in place


@dataclass(frozen=True)
class Write:
    """One item written by one request, and what it cost."""

    phase: str  # the function that wrote it
    action: str  # Put, Update, Delete; "Transact Put" for an item of a transaction
    record: str  # the item's sort key (its kind: inbox, outbox, effect#<name>, ...)
    change: str  # e.g. "pending -> processing" for an inbox item, "new", "refused"
    table_wru: int
    index_wru: int

    @property
    def label(self) -> str:
        return f"{self.phase}: {self.action} {self.record} ({self.change})"


@dataclass
class _Pending:
    action: str
    key: dict[str, Any]
    transactional: bool
    before: dict[str, Any] | None


class WriteMeter:
    """Meters every write request of every client of one botocore session."""

    def __init__(self, reader: DynamoDBClient, table: str, phase: Callable[[], str]) -> None:
        """Args:
        reader: a client outside the metered session, to read item images.
        table: the table whose writes are metered.
        phase: names the function running now.
        """
        self._reader = reader
        self._table = table
        self._phase = phase
        self._lock = threading.Lock()
        self.writes: list[Write] = []

    def register(self, events: BaseEventHooks) -> None:
        events.register("provide-client-params.dynamodb", self._before)
        events.register("after-call.dynamodb", self._after)

    def _before(
        self, params: dict[str, Any], model: OperationModel, context: dict[str, Any], **_: Any
    ) -> None:
        pending: list[_Pending] = []
        if model.name in _SINGLE_WRITES and params.get("TableName") == self._table:
            key = params.get("Key") or _key_of(params["Item"])
            pending.append(_Pending(_SINGLE_WRITES[model.name], key, False, None))
        elif model.name == "TransactWriteItems":
            for entry in params.get("TransactItems", []):
                for action, request in entry.items():
                    if request.get("TableName") == self._table:
                        key = request.get("Key") or _key_of(request["Item"])
                        pending.append(_Pending(action, key, True, None))
        for write in pending:
            write.before = self._read(write.key)
        if pending:
            context["metered_writes"] = pending

    def _after(
        self, http_response: Any, model: OperationModel, context: dict[str, Any], **_: Any
    ) -> None:
        pending: list[_Pending] = context.pop("metered_writes", [])
        refused = getattr(http_response, "status_code", 200) >= 400
        for write in pending:
            unchanged = refused or write.action == _CHECK
            after = write.before if unchanged else self._read(write.key)
            self._record(write, after, refused=refused)

    def _record(self, write: _Pending, after: dict[str, Any] | None, *, refused: bool) -> None:
        before = write.before
        sizes = [item_size(image) for image in (before, after) if image is not None]
        table_wru = _units(max(sizes, default=0)) * (2 if write.transactional else 1)
        index_wru = sum(index_units(index, before, after) for index in TABLE_SCHEMA.indexes)
        metered = Write(
            phase=self._phase(),
            action=("Transact " if write.transactional else "") + write.action,
            record=_record(write.key),
            change="refused"
            if refused
            else "checked"
            if write.action == _CHECK
            else _change(before, after),
            table_wru=table_wru,
            index_wru=index_wru,
        )
        with self._lock:
            self.writes.append(metered)

    def _read(self, key: dict[str, Any]) -> dict[str, Any] | None:
        response = self._reader.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item


def _record(key: dict[str, Any]) -> str:
    """Which record a key names: its sort key, or ``outbox`` for an outbox record (keyed
    by its place in the received log, which differs for every delivery)."""
    if str(key[table_layout.TABLE_PARTITION_KEY]["S"]).startswith(table_layout.RECEIVED_LOG_PREFIX):
        return table_layout.KIND_OUTBOX
    return str(key[table_layout.TABLE_SORT_KEY]["S"])


def _key_of(item: dict[str, Any]) -> dict[str, Any]:
    return {name: item[name] for name in _TABLE_KEYS}


def _change(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    def state(image: dict[str, Any] | None) -> str | None:
        value = None if image is None else image.get("state") or image.get("status")
        return None if value is None else str(value["S"])

    if before is None:
        return "new" if state(after) is None else f"new, {state(after)}"
    return f"{state(before) or 'present'} -> {state(after) or 'present'}"


@dataclass(frozen=True)
class WriteUnits:
    """Write units per delivery, total and per kind of write."""

    deliveries: int
    writes: list[Write]

    @property
    def table_wru(self) -> float:
        return sum(w.table_wru for w in self.writes) / self.deliveries

    @property
    def index_wru(self) -> float:
        return sum(w.index_wru for w in self.writes) / self.deliveries

    @property
    def total(self) -> float:
        return self.table_wru + self.index_wru

    def by_phase(self) -> dict[str, dict[str, float]]:
        """phase -> {"table_wru", "index_wru"} per delivery (the cost model's inputs)."""
        found: dict[str, dict[str, float]] = {}
        for write in self.writes:
            units = found.setdefault(write.phase, {"index_wru": 0.0, "table_wru": 0.0})
            units["table_wru"] += write.table_wru / self.deliveries
            units["index_wru"] += write.index_wru / self.deliveries
        return found

    def breakdown(self) -> list[dict[str, Any]]:
        """Each kind of write: how many per delivery and its units, in first-seen order."""
        rows: dict[str, dict[str, Any]] = {}
        for write in self.writes:
            row = rows.setdefault(
                write.label,
                {
                    "write": write.label,
                    "function": write.phase,
                    "record": write.record,
                    "count": 0.0,
                    "table_wru": 0.0,
                    "index_wru": 0.0,
                },
            )
            row["count"] += 1 / self.deliveries
            row["table_wru"] += write.table_wru / self.deliveries
            row["index_wru"] += write.index_wru / self.deliveries
        return list(rows.values())
