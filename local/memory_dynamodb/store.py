"""The in-memory DynamoDB: the boto3 low-level client's calls, answered from memory.

See the package docstring for what it takes and answers.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from local.memory_dynamodb import errors
from local.memory_dynamodb import expressions as ex
from local.memory_dynamodb import values as v
from local.memory_dynamodb.expressions import Bindings, ExpressionError
from local.memory_dynamodb.table import Identity, Index, Table
from local.memory_dynamodb.values import Item, Value

_OK: Final = {"ResponseMetadata": {"HTTPStatusCode": 200}}
MAX_TRANSACTION_ACTIONS: Final = 100
MAX_BATCH_GET_KEYS: Final = 100


@dataclass(frozen=True, slots=True)
class Write:
    """One committed change of one item, as the store's listeners see it.

    Attributes:
        table: the table's name.
        key: the item's key attributes.
        old: the item before (None: it did not exist).
        new: the item after (None: deleted).
        operation: ``PutItem``, ``UpdateItem``, ``DeleteItem``, ``TransactWriteItems``,
            or ``TTL`` for a deletion by the table's time to live.
    """

    table: str
    key: Item
    old: Item | None
    new: Item | None
    operation: str


class MemoryDynamoDB:
    """DynamoDB in memory, called as the boto3 low-level client is.

    Args:
        ttl_lag: seconds after an item's TTL time that its deletion becomes due (called
            once each time an item's TTL attribute is written); DynamoDB deletes late.
    """

    def __init__(self, *, ttl_lag: Callable[[], float] | None = None) -> None:
        self._tables: dict[str, Table] = {}
        self._listeners: list[Callable[[Write], None]] = []
        self._ttl_lag = ttl_lag or (lambda: 0.0)
        # (due, sequence, table, identity, expires_at): lazily checked against the item
        self._due: list[tuple[float, int, str, Identity, str]] = []
        self._sequence = 0
        # Each item an update wrote, with its size bound: the next update of it checks
        # only what it changes.
        self._checked: dict[Identity, tuple[Item, int]] = {}

    # --- set-up and inspection ----------------------------------------------------

    def create_table(self, **request: Any) -> dict[str, Any]:
        """``CreateTable``: keys, attribute types and global secondary indexes."""
        table = Table.from_request(request)
        if table.name in self._tables:
            raise errors.validation("CreateTable", f"Table already exists: {table.name}")
        self._tables[table.name] = table
        description = {
            "TableName": table.name,
            "TableStatus": "ACTIVE",
            # The stream itself is the caller's to model (the simulator's relay reads
            # the committed writes, see listen); the ARN names it.
            "LatestStreamArn": f"arn:aws:dynamodb:local:000000000000:table/{table.name}/stream/0",
        }
        return {"TableDescription": description, **_OK}

    def update_time_to_live(
        self,
        *,
        TableName: str,
        TimeToLiveSpecification: Mapping[str, Any],
    ) -> dict[str, Any]:
        table = self._table("UpdateTimeToLive", TableName)
        enabled = bool(TimeToLiveSpecification["Enabled"])
        table.ttl_attribute = TimeToLiveSpecification["AttributeName"] if enabled else None
        return {"TimeToLiveSpecification": dict(TimeToLiveSpecification), **_OK}

    def listen(self, listener: Callable[[Write], None]) -> None:
        """Call ``listener`` with each committed change, in commit order."""
        self._listeners.append(listener)

    def items(self, table_name: str) -> list[Item]:
        """Copies of every item of the table, in key order."""
        table = self._tables[table_name]
        return [v.answer_copy(table.items[i]) for i in sorted(table.items)]

    # --- TTL ------------------------------------------------------------------------

    def next_expiry(self) -> float | None:
        """When the next deletion by TTL is due (None: none is)."""
        while self._due and not self._still_due(self._due[0]):
            heapq.heappop(self._due)
        return self._due[0][0] if self._due else None

    def sweep(self, now: float) -> list[Write]:
        """Delete every item whose TTL deletion is due by ``now`` (its TTL time plus its
        lag), the earliest due first; returns the deletions."""
        deleted = []
        while self._due and self._due[0][0] <= now:
            entry = heapq.heappop(self._due)
            if not self._still_due(entry):
                continue
            table = self._tables[entry[2]]
            old = table.items[entry[3]]
            table.store(entry[3], None)
            deleted.append(self._commit(table, old, None, "TTL"))
        return deleted

    def _still_due(self, entry: tuple[float, int, str, Identity, str]) -> bool:
        table = self._tables[entry[2]]
        item = table.items.get(entry[3])
        attribute = table.ttl_attribute
        return (
            item is not None
            and attribute is not None
            and item.get(attribute, {}).get("N") == entry[4]
        )

    def _schedule_expiry(
        self, table: Table, identity: Identity, old: Item | None, new: Item
    ) -> None:
        attribute = table.ttl_attribute
        if attribute is None:
            return
        expires = new.get(attribute, {}).get("N")
        if expires is None or (old is not None and old.get(attribute, {}).get("N") == expires):
            return
        self._sequence += 1
        due = float(expires) + self._ttl_lag()
        heapq.heappush(self._due, (due, self._sequence, table.name, identity, expires))

    # --- single-item requests ---------------------------------------------------------

    def get_item(
        self,
        *,
        TableName: str,
        Key: Item,
        ConsistentRead: bool = False,
        ProjectionExpression: str | None = None,
        ExpressionAttributeNames: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        operation = "GetItem"
        table = self._table(operation, TableName)
        identity = self._identity(operation, table, Key, exact=True)
        bindings = Bindings(ExpressionAttributeNames or {}, {})
        item = table.get(identity)
        with _Validation(operation):
            answer = None if item is None else ex.project(item, ProjectionExpression, bindings)
            bindings.check_all_used()
        return {**({} if answer is None else {"Item": v.answer_copy(answer)}), **_OK}

    def put_item(
        self,
        *,
        TableName: str,
        Item: Item,
        ConditionExpression: str | None = None,
        ExpressionAttributeNames: Mapping[str, str] | None = None,
        ExpressionAttributeValues: Mapping[str, Any] | None = None,
        ReturnValues: str = "NONE",
        ReturnValuesOnConditionCheckFailure: str = "NONE",
    ) -> dict[str, Any]:
        operation = "PutItem"
        table = self._table(operation, TableName)
        new = v.copy_item(Item)  # the caller may reuse its request
        identity = self._identity(operation, table, new, exact=False)
        bindings = Bindings(ExpressionAttributeNames or {}, ExpressionAttributeValues or {})
        with _Validation(operation):
            self._check_item(table, new)
            old = table.get(identity)
            held = ex.condition(ConditionExpression, old, bindings)
            bindings.check_all_used()
        if not held:
            raise errors.condition_failed(
                operation, _old_if(ReturnValuesOnConditionCheckFailure, old)
            )
        self._write(table, identity, old, new, operation)
        answer = {"Attributes": v.answer_copy(old)} if ReturnValues == "ALL_OLD" and old else {}
        return {**answer, **_OK}

    def update_item(
        self,
        *,
        TableName: str,
        Key: Item,
        UpdateExpression: str,
        ConditionExpression: str | None = None,
        ExpressionAttributeNames: Mapping[str, str] | None = None,
        ExpressionAttributeValues: Mapping[str, Any] | None = None,
        ReturnValues: str = "NONE",
        ReturnValuesOnConditionCheckFailure: str = "NONE",
    ) -> dict[str, Any]:
        operation = "UpdateItem"
        table = self._table(operation, TableName)
        identity = self._identity(operation, table, Key, exact=True)
        bindings = Bindings(ExpressionAttributeNames or {}, ExpressionAttributeValues or {})
        old = table.get(identity)
        with _Validation(operation):
            held = ex.condition(ConditionExpression, old, bindings)
            if not held:
                bindings.use(ex.parse_update(UpdateExpression))
                bindings.check_all_used()
                raise errors.condition_failed(
                    operation, _old_if(ReturnValuesOnConditionCheckFailure, old)
                )
            updated = ex.apply_update(
                UpdateExpression,
                old if old is not None else dict(Key),
                bindings,
                keys=table.key_names,
            )
            bindings.check_all_used()
            self._check_update(table, identity, old, updated)
        self._write(table, identity, old, updated.item, operation)
        return {**_returned(ReturnValues, old, updated), **_OK}

    def delete_item(
        self,
        *,
        TableName: str,
        Key: Item,
        ConditionExpression: str | None = None,
        ExpressionAttributeNames: Mapping[str, str] | None = None,
        ExpressionAttributeValues: Mapping[str, Any] | None = None,
        ReturnValues: str = "NONE",
        ReturnValuesOnConditionCheckFailure: str = "NONE",
    ) -> dict[str, Any]:
        operation = "DeleteItem"
        table = self._table(operation, TableName)
        identity = self._identity(operation, table, Key, exact=True)
        bindings = Bindings(ExpressionAttributeNames or {}, ExpressionAttributeValues or {})
        old = table.get(identity)
        with _Validation(operation):
            held = ex.condition(ConditionExpression, old, bindings)
            bindings.check_all_used()
        if not held:
            raise errors.condition_failed(
                operation, _old_if(ReturnValuesOnConditionCheckFailure, old)
            )
        if old is not None:
            self._write(table, identity, old, None, operation)
        answer = {"Attributes": v.answer_copy(old)} if ReturnValues == "ALL_OLD" and old else {}
        return {**answer, **_OK}

    # --- many items ---------------------------------------------------------------------

    def transact_write_items(  # noqa: PLR0912 (each action kind, each refusal)
        self,
        *,
        TransactItems: list[Mapping[str, Any]],
        ClientRequestToken: str | None = None,
    ) -> dict[str, Any]:
        """All or nothing: every action's condition is checked against the items as they
        are, then every write commits; a refused condition cancels the whole request with
        one reason per action."""
        operation = "TransactWriteItems"
        if not TransactItems or len(TransactItems) > MAX_TRANSACTION_ACTIONS:
            raise errors.validation(
                operation,
                "1 validation error detected: Value at 'transactItems' failed to satisfy"
                " constraint: Member must have length less than or equal to 100",
            )
        planned: list[tuple[Table, Identity, Item | None, Item | None, bool]] = []
        reasons: list[dict[str, Any]] = []
        seen: set[tuple[str, Identity]] = set()
        for action in TransactItems:
            ((kind, request),) = action.items()
            table = self._table(operation, request["TableName"])
            key = request["Item"] if kind == "Put" else request["Key"]
            identity = self._identity(operation, table, key, exact=kind != "Put")
            if (table.name, identity) in seen:
                raise errors.validation(
                    operation, "Transaction request cannot include multiple operations on one item"
                )
            seen.add((table.name, identity))
            bindings = Bindings(
                request.get("ExpressionAttributeNames") or {},
                request.get("ExpressionAttributeValues") or {},
            )
            old = table.get(identity)
            with _Validation(operation):
                held = ex.condition(request.get("ConditionExpression"), old, bindings)
                new: Item | None = old
                if kind == "Put":
                    new = v.copy_item(request["Item"])  # (as put_item)
                elif kind == "Update" and not held:
                    bindings.use(ex.parse_update(request["UpdateExpression"]))
                elif kind == "Update":
                    new = ex.apply_update(
                        request["UpdateExpression"],
                        old if old is not None else dict(key),
                        bindings,
                        keys=table.key_names,
                    ).item
                elif kind == "Delete":
                    new = None
                elif kind != "ConditionCheck":
                    raise ExpressionError(f"Unknown transaction action: {kind}")
                bindings.check_all_used()
            reason: dict[str, Any] = {"Code": "None"}
            if not held:
                reason = {
                    "Code": "ConditionalCheckFailed",
                    "Message": errors.CONDITION_FAILED_MESSAGE,
                }
                stored = _old_if(request.get("ReturnValuesOnConditionCheckFailure", "NONE"), old)
                if stored is not None:
                    reason["Item"] = stored
            elif new is not None and kind != "ConditionCheck":
                try:
                    self._check_item(table, new, update=kind == "Update")
                except ExpressionError as exc:
                    reason = {"Code": "ValidationError", "Message": str(exc)}
            reasons.append(reason)
            planned.append((table, identity, old, new, kind != "ConditionCheck"))
        if any(reason["Code"] != "None" for reason in reasons):
            raise errors.transaction_cancelled(reasons)
        for table, identity, old, new, writes in planned:
            if writes and not (old is None and new is None):
                self._write(table, identity, old, new, operation)
        return dict(_OK)

    def batch_get_item(self, *, RequestItems: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """Every existing item of each table's ``Keys``, in the keys' order; nothing is
        left unprocessed (the store is never throttled; the world injects that)."""
        operation = "BatchGetItem"
        total = sum(len(request["Keys"]) for request in RequestItems.values())
        if total > MAX_BATCH_GET_KEYS:
            raise errors.validation(operation, "Too many items requested for the BatchGetItem call")
        responses: dict[str, list[Item]] = {}
        for table_name, request in RequestItems.items():
            table = self._table(operation, table_name)
            bindings = Bindings(request.get("ExpressionAttributeNames") or {}, {})
            identities = [self._identity(operation, table, k, exact=True) for k in request["Keys"]]
            if len(set(identities)) != len(identities):
                raise errors.validation(operation, "Provided list of item keys contains duplicates")
            found = []
            with _Validation(operation):
                for identity in identities:
                    item = table.get(identity)
                    if item is not None:
                        projection = request.get("ProjectionExpression")
                        found.append(v.answer_copy(ex.project(item, projection, bindings)))
                bindings.check_all_used()
            responses[table_name] = found
        return {"Responses": responses, "UnprocessedKeys": {}, **_OK}

    def query(  # noqa: PLR0912 (each option of the request)
        self,
        *,
        TableName: str,
        KeyConditionExpression: str,
        IndexName: str | None = None,
        FilterExpression: str | None = None,
        ProjectionExpression: str | None = None,
        ExpressionAttributeNames: Mapping[str, str] | None = None,
        ExpressionAttributeValues: Mapping[str, Any] | None = None,
        ScanIndexForward: bool = True,
        Limit: int | None = None,
        ExclusiveStartKey: Item | None = None,
        ConsistentRead: bool = False,
        Select: str = "ALL_ATTRIBUTES",
    ) -> dict[str, Any]:
        """Items in key order (``ScanIndexForward``); ``Limit`` counts the items read
        before the filter, and a page that reached it carries a ``LastEvaluatedKey``
        (even when nothing follows, as DynamoDB does; moto looks ahead)."""
        operation = "Query"
        table = self._table(operation, TableName)
        index: Index | None = None
        if IndexName is not None:
            index = table.indexes.get(IndexName)
            if index is None:
                raise errors.validation(
                    operation, f"The table does not have the specified index: {IndexName}"
                )
            if ConsistentRead:
                raise errors.validation(
                    operation, "Consistent reads are not supported on global secondary indexes"
                )
        keys = table.keys if index is None else index.keys
        bindings = Bindings(ExpressionAttributeNames or {}, ExpressionAttributeValues or {})
        with _Validation(operation):
            condition = ex.key_condition(
                KeyConditionExpression, bindings, partition_key=keys.partition, sort_key=keys.sort
            )
            if FilterExpression is not None:
                bindings.use(ex.parse_condition(FilterExpression))
            if ProjectionExpression is not None:
                bindings.use(ex.parse_projection(ProjectionExpression))
            bindings.check_all_used()
        if Limit is not None and Limit < 1:
            raise errors.validation(
                operation,
                "1 validation error detected: Value at 'limit' failed to satisfy constraint:"
                " Member must have value greater than or equal to 1",
            )

        members = table.members(index, condition.partition)
        if not members and ExclusiveStartKey is None:
            # Nothing to read (most of the received log's shards, in a short history).
            empty: dict[str, Any] = {"Count": 0, "ScannedCount": 0}
            if Select != "COUNT":
                empty["Items"] = []
            return {**empty, **_OK}

        def position(item: Item) -> tuple[Any, ...]:
            sort = () if keys.sort is None else (v.comparable(item[keys.sort]),)
            return (*sort, *(table.identity(item) if index is not None else ()))

        candidates = [
            item
            for item in (table.items[identity] for identity in members)
            if condition.sort is None or condition.sort(item.get(keys.sort or ""))
        ]
        candidates.sort(key=position, reverse=not ScanIndexForward)
        if ExclusiveStartKey is not None:
            start = position(ExclusiveStartKey)
            candidates = [
                item
                for item in candidates
                if (position(item) > start if ScanIndexForward else position(item) < start)
            ]
        page = candidates if Limit is None else candidates[:Limit]
        found = []
        for item in page:
            if FilterExpression is None or ex.condition(FilterExpression, item, bindings):
                found.append(item)
        answer: dict[str, Any] = {"Count": len(found), "ScannedCount": len(page)}
        if Select != "COUNT":
            answer["Items"] = [
                v.answer_copy(
                    ex.project(table.projected(index, item), ProjectionExpression, bindings)
                )
                for item in found
            ]
        if Limit is not None and len(page) == Limit:
            last = page[-1]
            key_names = {*table.keys.names, *(index.keys.names if index is not None else ())}
            answer["LastEvaluatedKey"] = {n: v.copy_value(last[n]) for n in sorted(key_names)}
        return {**answer, **_OK}

    # --- the common parts ------------------------------------------------------------

    def _table(self, operation: str, name: str) -> Table:
        table = self._tables.get(name)
        if table is None:
            raise errors.resource_not_found(operation)
        return table

    def _identity(
        self, operation: str, table: Table, key: Mapping[str, Any], *, exact: bool
    ) -> Identity:
        """The identity of ``key`` (or of an item's key attributes); a key that lacks an
        attribute, has one of the wrong type or (``exact``) more is refused."""
        for name, wanted in table.key_types:
            value = key.get(name)
            if value is None:
                raise errors.validation(
                    operation,
                    f"One or more parameter values were invalid: Missing the key {name} in the item"
                    if not exact
                    else "The provided key element does not match the schema",
                )
            if len(value) != 1 or wanted not in value:
                raise errors.validation(
                    operation,
                    "One or more parameter values were invalid: Type mismatch for key"
                    f" {name} expected: {wanted} actual: {v.kind(value)}"
                    if not exact
                    else "The provided key element does not match the schema",
                )
            if wanted in ("S", "B") and not value[wanted]:
                raise errors.validation(
                    operation,
                    "One or more parameter values are not valid. The AttributeValue for a key"
                    f" attribute cannot contain an empty string value. Key: {name}",
                )
        if exact and len(key) != len(table.keys.names):
            raise errors.validation(operation, "The provided key element does not match the schema")
        return table.identity(key)

    def _check_item(self, table: Table, item: Item, *, update: bool = False) -> int:
        """What DynamoDB refuses in an item: an index key of the wrong type, an empty
        set, more than 400 KB. Returns the item's size bound (see ``_bound``)."""
        return self._check_attributes(table, item, item, 0, update=update)

    def _check_update(
        self, table: Table, identity: Identity, old: Item | None, updated: ex.Updated
    ) -> None:
        """``_check_item`` of an update's result, from the attributes it changed when the
        old item is the one this check last passed (its unchanged attributes passed then)."""
        cached = self._checked.get(identity)
        new = updated.item
        if old is None or cached is None or cached[0] is not old:
            bound = self._check_item(table, new, update=True)
        else:
            bound = cached[1] - sum(_bound(n, old[n]) for n in updated.changed if n in old)
            changed = {n: new[n] for n in updated.changed if n in new}
            bound = self._check_attributes(table, changed, new, bound, update=True)
        self._checked[identity] = (new, bound)

    def _check_attributes(
        self, table: Table, attributes: Item, item: Item, bound: int, *, update: bool
    ) -> int:
        """``_check_item`` of ``attributes`` of ``item``, the rest's size bound given."""
        for name, expected, index_name in table.index_keys:
            value = attributes.get(name)
            if value is not None and expected not in value:
                raise ExpressionError(
                    "One or more parameter values were invalid: Type mismatch for Index Key"
                    f" {name} Expected: {expected} Actual: {v.kind(value)}"
                    f" IndexName: {index_name}"
                )
        # One pass: empty sets, and a bound on the size (a character is at most four
        # bytes in UTF-8); the exact count only when the bound is over the limit.
        for name, value in attributes.items():
            bound += _bound(name, value)
        if 4 * bound > v.MAX_ITEM_BYTES and v.item_bytes(item) > v.MAX_ITEM_BYTES:
            raise ExpressionError(
                "Item size to update has exceeded the maximum allowed size"
                if update
                else "Item size has exceeded the maximum allowed size"
            )
        return bound

    def _write(
        self, table: Table, identity: Identity, old: Item | None, new: Item | None, operation: str
    ) -> None:
        table.store(identity, new)
        if new is not None:
            self._schedule_expiry(table, identity, old, new)
        self._commit(table, old, new, operation)

    def _commit(self, table: Table, old: Item | None, new: Item | None, operation: str) -> Write:
        write = Write(table.name, table.key_of(new or old or {}), old, new, operation)
        for listener in self._listeners:
            listener(write)
        return write

    def scan_items(self, table_name: str) -> Iterator[Item]:
        """The stored items themselves (not copies), in no order: for a caller's
        read-only checks where copying every item would cost too much."""
        yield from self._tables[table_name].items.values()


def _old_if(return_values: str, old: Item | None) -> Item | None:
    return v.answer_copy(old) if return_values == "ALL_OLD" and old is not None else None


def _returned(return_values: str, old: Item | None, updated: ex.Updated) -> dict[str, Any]:
    """``Attributes`` of an UpdateItem's answer, as ``ReturnValues`` asks."""
    new = updated.item
    if return_values == "ALL_NEW":
        return {"Attributes": v.answer_copy(new)}
    if return_values == "ALL_OLD":
        return {"Attributes": v.answer_copy(old)} if old else {}
    if return_values == "UPDATED_NEW":
        kept = {n: new[n] for n in sorted(updated.changed) if n in new}
        return {"Attributes": v.answer_copy(kept)} if kept else {}
    if return_values == "UPDATED_OLD":
        kept = {n: old[n] for n in sorted(updated.changed) if old and n in old}
        return {"Attributes": v.answer_copy(kept)} if kept else {}
    return {}


class _Validation:
    """Answer an :class:`ExpressionError` as the client does: a ValidationException.
    (A class, not ``@contextmanager``: every request enters one, and a generator's
    set-up cost a tenth of a simple request.)"""

    __slots__ = ("operation",)

    def __init__(self, operation: str) -> None:
        self.operation = operation

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, ExpressionError):
            raise errors.validation(self.operation, str(exc)) from exc


__all__ = ["ClientError", "MemoryDynamoDB", "Write"]


def _bound(name: str, value: Value) -> int:
    """An attribute's share of an item's size bound (its exact size when neither a
    string nor a number); raises on an empty set."""
    for t, raw in value.items():
        if t == "S" or t == "N":  # noqa: PLR1714 (the two commonest, first)
            return len(name) + len(raw)
        if t == "BOOL":
            return len(name) + 1
        if t in v.SET_TYPES and not raw:
            described = "number" if t == "NS" else "string"
            raise ExpressionError(
                f"One or more parameter values were invalid: An {described} set  may not be empty"
            )
        return len(name) + v.item_bytes({name: value})
    return len(name)
