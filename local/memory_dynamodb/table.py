"""One table in memory: its items by key, its global secondary indexes, its TTL.

Created from a ``CreateTable`` request (the project's own, ``infra.schema``), so the
keys, the indexes and their projections have one definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from local.memory_dynamodb import values as v
from local.memory_dynamodb.values import Item, Value

# An item's identity: its key values, each as DynamoDB orders it.
Identity = tuple[tuple[str, Any], ...]


@dataclass(frozen=True, slots=True)
class KeySchema:
    partition: str
    sort: str | None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.partition,) if self.sort is None else (self.partition, self.sort)


@dataclass(slots=True)
class Index:
    """A global secondary index: sparse (an item is in it when it has both its keys)."""

    name: str
    keys: KeySchema
    projection: str  # ALL, KEYS_ONLY or INCLUDE
    included: tuple[str, ...] = ()
    # index partition (as ordered) -> identities of the table's items in it
    partitions: dict[Any, set[Identity]] = field(default_factory=dict)

    def entry(self, item: Item) -> Any | None:
        """The index partition ``item`` is listed under, or None (not in the index)."""
        if any(name not in item for name in self.keys.names):
            return None
        return v.comparable(item[self.keys.partition])


@dataclass(slots=True)
class Table:
    name: str
    keys: KeySchema
    attribute_types: dict[str, str]
    indexes: dict[str, Index]
    ttl_attribute: str | None = None
    items: dict[Identity, Item] = field(default_factory=dict)
    partitions: dict[Any, set[Identity]] = field(default_factory=dict)
    # (attribute, its type, index name) of every index key: what each write checks
    index_keys: tuple[tuple[str, str, str], ...] = ()
    # (attribute, its type) of the table's keys, and their names: what each request's
    # key is checked against
    key_types: tuple[tuple[str, str | None], ...] = ()
    key_names: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.key_types = tuple((n, self.attribute_types.get(n)) for n in self.keys.names)
        self.key_names = frozenset(self.keys.names)
        self.index_keys = tuple(
            (name, self.attribute_types.get(name, ""), index.name)
            for index in self.indexes.values()
            for name in index.keys.names
        )

    @classmethod
    def from_request(cls, request: Mapping[str, Any]) -> Table:
        types = {a["AttributeName"]: a["AttributeType"] for a in request["AttributeDefinitions"]}
        indexes = {}
        for index in request.get("GlobalSecondaryIndexes", []):
            projection = index.get("Projection", {})
            indexes[index["IndexName"]] = Index(
                index["IndexName"],
                _schema(index["KeySchema"]),
                projection.get("ProjectionType", "ALL"),
                tuple(projection.get("NonKeyAttributes", ())),
            )
        return cls(request["TableName"], _schema(request["KeySchema"]), types, indexes)

    def identity(self, key: Mapping[str, Value]) -> Identity:
        return tuple((name, v.comparable(key[name])) for name in self.keys.names)

    def key_of(self, item: Item) -> Item:
        return {name: item[name] for name in self.keys.names}

    def get(self, identity: Identity) -> Item | None:
        return self.items.get(identity)

    def store(self, identity: Identity, item: Item | None) -> None:
        """Write (or, with None, delete) one item and its index entries."""
        old = self.items.get(identity)
        if item is None:
            if old is None:
                return
            self.partitions[identity[0][1]].discard(identity)
            for index in self.indexes.values():
                entry = index.entry(old)
                if entry is not None:
                    index.partitions[entry].discard(identity)
            del self.items[identity]
            return
        self.items[identity] = item
        if old is None:
            self.partitions.setdefault(identity[0][1], set()).add(identity)
        for index in self.indexes.values():
            if old is not None:
                names = index.keys.names
                if all(old.get(n) == item.get(n) for n in names):
                    continue  # listed where it was (most updates touch no index key)
                entry = index.entry(old)
                if entry is not None:
                    index.partitions[entry].discard(identity)
            entry = index.entry(item)
            if entry is not None:
                index.partitions.setdefault(entry, set()).add(identity)

    def members(self, index: Index | None, value: Value) -> set[Identity] | tuple[()]:
        """The identities of one partition's items, of the table or of ``index``, in no
        order (empty: none)."""
        found = (self.partitions if index is None else index.partitions).get(v.comparable(value))
        return found or ()

    def projected(self, index: Index | None, item: Item) -> Item:
        """What a read of ``index`` returns of ``item`` (its projection)."""
        if index is None or index.projection == "ALL":
            return item
        kept = {*self.keys.names, *index.keys.names}
        if index.projection == "INCLUDE":
            kept.update(index.included)
        return {name: value for name, value in item.items() if name in kept}


def _schema(elements: list[Mapping[str, str]]) -> KeySchema:
    partition = next(e["AttributeName"] for e in elements if e["KeyType"] == "HASH")
    sort = next((e["AttributeName"] for e in elements if e["KeyType"] == "RANGE"), None)
    return KeySchema(partition, sort)
