"""The write-unit meter's rules (bench figure 11): what an index write costs, per change."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.write_units import index_units, item_size
from functions.core import table_layout
from infra.schema import TABLE

(INDEX,) = TABLE.indexes
SHARD, LISTED = table_layout.STATE_INDEX_PARTITION_KEY, table_layout.STATE_INDEX_SORT_KEY


def item(**extra: Any) -> dict[str, Any]:
    return {"pk": {"S": "d"}, "sk": {"S": "inbox"}, "state": {"S": "pending"}, **extra}


def listed(label: str = "open#01", at: str = "5", **extra: Any) -> dict[str, Any]:
    return item(**{SHARD: {"S": label}, LISTED: {"N": at}}, **extra)


def test_the_state_index_is_keys_only() -> None:
    assert INDEX.projection == "KEYS_ONLY"


def test_index_units_per_change_keys_only() -> None:
    assert index_units(INDEX, None, listed()) == 1  # a put
    assert index_units(INDEX, listed(), item()) == 1  # a delete
    assert index_units(INDEX, listed(), listed("failed#01", "9")) == 2  # a delete and a put
    # A non-key attribute changes (a claim): the keys-only entry is untouched.
    assert index_units(INDEX, listed(), listed(state={"S": "processing"})) == 0
    assert index_units(INDEX, item(), item(state={"S": "completed"})) == 0  # not listed


def test_index_units_with_all_projected_count_every_change_of_a_listed_item() -> None:
    everything = replace(INDEX, projection="ALL")
    assert index_units(everything, listed(), listed(state={"S": "processing"})) == 1
    big = {"S": "x" * 1500}
    assert index_units(everything, None, listed(blob=big)) == 2  # ceil(size / 1 KB)


def test_item_size_is_names_plus_values() -> None:
    assert item_size({"pk": {"S": "abc"}}) == 5
    assert item_size({"n": {"N": "123"}}) == 1 + 1 + 2
