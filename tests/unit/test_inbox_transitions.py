"""The inbox item's transition table: its invariants, its requests, one row on moto."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from functions.core import accept, table_layout
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_inbox_transitions import IndexMove
from functions.core.delivery import Delivery
from functions.core.models import InboxItem, State
from local.testkit import builders

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import PutTypeDef

NOW = 1_760_000_000
DELIVERY = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"
ROWS = transitions.TRANSITIONS


def condition_states(row: transitions.Transition) -> set[State]:
    text = " ".join(part for part, _reason in row.condition)
    return {State(value) for value in re.findall(r"#state = :(\w+)", text)}


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_row_from_states_are_the_states_its_condition_admits(row: transitions.Transition) -> None:
    assert condition_states(row) == set(row.from_states)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_row_moves_the_item_in_the_index_only_when_its_label_changes(
    row: transitions.Transition,
) -> None:
    to_label = dynamodb_items.state_label(row.to_state)
    from_labels = {dynamodb_items.state_label(state) for state in row.from_states}
    update = row.update_expression()
    if row.listing_only:
        # Only the listing: the state and the clock are not written, the time is given.
        assert row.index is IndexMove.LIST
        assert update == (
            f"SET {table_layout.STATE_INDEX_PARTITION_KEY} = :shard,"
            f" {table_layout.STATE_INDEX_SORT_KEY} = :listed"
        )
    elif from_labels == {to_label}:
        # An open item stays open: no index key in the update, so no index write.
        assert row.index is IndexMove.KEEP
        assert table_layout.STATE_INDEX_PARTITION_KEY not in update
        assert table_layout.STATE_INDEX_SORT_KEY not in update
    else:
        assert row.index is IndexMove.LIST
        assert f"{table_layout.STATE_INDEX_PARTITION_KEY} = :shard" in update
        assert f"{table_layout.STATE_INDEX_SORT_KEY} = :now" in update


def test_the_happy_path_writes_the_index_once() -> None:
    # accept does not list the item; claim keeps it so; complete lists it completed.
    put = accept_put()
    assert table_layout.STATE_INDEX_PARTITION_KEY not in put["Item"]
    assert table_layout.STATE_INDEX_SORT_KEY not in put["Item"]
    ignored = accept_put(state=State.IGNORED)["Item"]
    assert ignored[table_layout.STATE_INDEX_PARTITION_KEY] == {
        "S": dynamodb_items.state_shard(table_layout.STATE_LABEL_IGNORED, DELIVERY)
    }
    assert dynamodb_items.state_label(State.PENDING) == table_layout.STATE_LABEL_OPEN
    assert transitions.CLAIM.index is IndexMove.KEEP
    assert transitions.COMPLETE.index is IndexMove.LIST
    assert transitions.COMPLETE_WITH_EFFECTS.index is IndexMove.LIST
    assert dynamodb_items.state_label(State.COMPLETED) == table_layout.STATE_LABEL_COMPLETED


def test_every_state_has_its_own_label_but_open_work_shares_one() -> None:
    labels = {state: dynamodb_items.state_label(state) for state in State}
    assert labels[State.PENDING] == labels[State.PROCESSING] == table_layout.STATE_LABEL_OPEN
    assert labels[State.IGNORED] == table_layout.STATE_LABEL_IGNORED
    assert len(set(labels.values())) == len(State) - 1


def test_completion_with_repeatable_effects_sets_their_names_as_a_string_set() -> None:
    request = transitions.update_request(
        "t",
        transitions.COMPLETE_WITH_EFFECTS,
        "d1",
        now=5,
        owner="o",
        effects=frozenset({"b", "a"}),
    )
    assert request["ExpressionAttributeValues"][":effects"] == {"SS": ["a", "b"]}
    assert f"{dynamodb_items.EFFECTS_DONE} = :effects" in request["UpdateExpression"]
    with pytest.raises(ValueError, match="empty set"):
        transitions.update_request(
            "t", transitions.COMPLETE_WITH_EFFECTS, "d1", now=5, owner="o", effects=frozenset()
        )


def test_rows_state_their_condition_reasons() -> None:
    for row in ROWS:
        assert row.condition
        assert all(reason.strip() for _part, reason in row.condition), row.name


def test_table_keeps_the_exactly_once_argument() -> None:
    # Final states: nothing leaves them.
    assert not any({State.COMPLETED, State.IGNORED} & set(row.from_states) for row in ROWS)
    # One way into processing, and it checks the lease.
    (entering,) = [row for row in ROWS if row.to_state is State.PROCESSING]
    assert entering is transitions.CLAIM
    # Leaving processing: only the lease owner, or the reconciler once the lease ran out.
    for row in ROWS:
        if State.PROCESSING in row.from_states and row is not transitions.CLAIM:
            if row.listing_only:
                assert "#state" not in row.update_expression(), row.name
                continue
            parts = " ".join(part for part, _reason in row.condition)
            assert "lease_owner = :owner" in parts or "lease_until <= :now" in parts, row.name
    # Only the operator's resets leave failed; a dead letter's only for its own failure.
    assert [row for row in ROWS if State.FAILED in row.from_states] == [
        transitions.RESET_FAILED,
        transitions.RESET_DEAD_LETTER,
    ]
    own = ("failed_by = :failure", *(part for part, _ in transitions.RESET_FAILED.condition))
    assert {part for part, _ in transitions.RESET_DEAD_LETTER.condition} == set(own)


def test_names_are_unique() -> None:
    assert len({row.name for row in ROWS}) == len(ROWS)


def test_update_request_of_a_claim() -> None:
    request = transitions.update_request(
        "t", transitions.CLAIM, DELIVERY, now=NOW, owner="w", lease=NOW + 60
    )
    assert request["Key"] == dynamodb_items.inbox_key(DELIVERY)
    assert request["ExpressionAttributeNames"] == {"#state": "state"}
    assert request["ExpressionAttributeValues"] == {
        ":lease": {"N": str(NOW + 60)},
        ":now": {"N": str(NOW)},
        ":one": {"N": "1"},
        ":owner": {"S": "w"},
        ":pending": {"S": "pending"},
        ":processing": {"S": "processing"},
        ":zero": {"N": "0"},
    }
    update = request["UpdateExpression"]
    assert update.startswith("SET #state = :processing, ")
    assert table_layout.STATE_INDEX_PARTITION_KEY not in update
    assert table_layout.STATE_INDEX_SORT_KEY not in update


def test_update_request_restarting_the_clock_leaves_state_and_shard() -> None:
    request = transitions.update_request(
        "t", transitions.TOUCH_PENDING, DELIVERY, now=NOW, seen=NOW - 1
    )
    assert request["UpdateExpression"] == f"SET {dynamodb_items.STATE_CHANGED_AT} = :now"


def test_update_request_refuses_a_missing_or_an_unused_value() -> None:
    with pytest.raises(TypeError, match=":owner"):
        transitions.update_request("t", transitions.COMPLETE, DELIVERY, now=NOW)
    with pytest.raises(TypeError, match=":error"):
        transitions.update_request(
            "t", transitions.COMPLETE, DELIVERY, now=NOW, owner="w", error="x"
        )


def inbox(**changes: Any) -> InboxItem:
    return builders.inbox_item(DELIVERY, received_at=NOW - 10, **changes)


def accept_put(**changes: Any) -> PutTypeDef:
    return transitions.accept_put("t", dynamodb_items.inbox_to_item(inbox(**changes)))


def test_accept_put_creates_only_pending_or_ignored_items() -> None:
    put = accept_put()
    assert put["ConditionExpression"] == "(attribute_not_exists(#pk))"
    assert put["ExpressionAttributeNames"] == {"#pk": table_layout.TABLE_PARTITION_KEY}
    assert accept_put(state=State.IGNORED)["Item"]["state"] == {"S": "ignored"}
    with pytest.raises(ValueError, match="pending or ignored"):
        accept_put(state=State.FAILED)


def test_reset_failed_moves_a_failed_item_once(dynamodb: DynamoDBClient, table: str) -> None:
    failed = inbox(
        state=State.FAILED, attempts=105, transient_failures=100, last_error="mcp_unavailable"
    )
    dynamodb.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(failed))

    first = transitions.apply(dynamodb, table, transitions.RESET_FAILED, DELIVERY, now=NOW)
    second = transitions.apply(dynamodb, table, transitions.RESET_FAILED, DELIVERY, now=NOW + 1)

    assert first.moved and first.item is not None
    item = dynamodb_items.inbox_from_item(first.item)
    assert (item.state, item.attempts, item.last_error, item.state_changed_at) == (
        State.PENDING,
        0,
        "mcp_unavailable",
        NOW,
    )
    # A fresh budget: both counters, and the retry horizon restarts now.
    assert (item.transient_failures, item.reset_at, item.retry_window_start) == (0, NOW, NOW)
    assert first.item[table_layout.STATE_INDEX_PARTITION_KEY]["S"] == dynamodb_items.state_shard(
        table_layout.STATE_LABEL_OPEN, DELIVERY
    )
    assert first.item[table_layout.STATE_INDEX_SORT_KEY] == {"N": str(NOW)}
    assert not second.moved  # refused, and the refusal reports the item as it is
    assert second.item == first.item


def test_a_refused_row_on_a_missing_item_reports_none(dynamodb: DynamoDBClient, table: str) -> None:
    refused = transitions.apply(dynamodb, table, transitions.RESET_FAILED, DELIVERY, now=NOW)
    assert refused == transitions.Applied(moved=False, item=None)


def test_list_open_lists_an_unlisted_open_item_once_as_of_its_receipt(
    dynamodb: DynamoDBClient, table: str
) -> None:
    dynamodb.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(inbox()))
    received_at = NOW - 10

    def list_open() -> transitions.Applied:
        return transitions.apply(
            dynamodb, table, transitions.LIST_OPEN, DELIVERY, now=NOW, listed=received_at
        )

    first = list_open()
    assert first.moved and first.item is not None
    assert first.item[table_layout.STATE_INDEX_PARTITION_KEY] == {
        "S": dynamodb_items.state_shard(table_layout.STATE_LABEL_OPEN, DELIVERY)
    }
    assert first.item[table_layout.STATE_INDEX_SORT_KEY] == {"N": str(received_at)}
    # Neither the state nor the reconciler's clock changed.
    assert dynamodb_items.inbox_from_item(first.item) == inbox()
    assert not list_open().moved  # listed already


def test_list_open_leaves_an_ended_item_alone(dynamodb: DynamoDBClient, table: str) -> None:
    done = inbox(state=State.COMPLETED, completed_at=NOW)
    dynamodb.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(done))
    refused = transitions.apply(
        dynamodb, table, transitions.LIST_OPEN, DELIVERY, now=NOW, listed=NOW - 10
    )
    assert not refused.moved and refused.item is not None
    assert refused.item[table_layout.STATE_INDEX_PARTITION_KEY] == {
        "S": dynamodb_items.state_shard(table_layout.STATE_LABEL_COMPLETED, DELIVERY)
    }


@pytest.mark.parametrize(
    "delivery",
    [
        Delivery(DELIVERY, "package.received", builders.PACKAGE_ID, builders.MCP_URL),
        Delivery(DELIVERY, "ping"),
    ],
)
def test_the_receivers_item_is_the_accepted_inbox_items(delivery: Delivery) -> None:
    # The receiver builds its item from the delivery's fields (no InboxItem per request):
    # it must be exactly the stored form of the item the port describes.
    work = delivery.work_item()
    digest, expires = "ab" * 32, NOW + 86400
    built = dynamodb_items.accepted_to_item(
        delivery, work, body_sha256=digest, received_at=NOW, expires_at=expires
    )
    stored = accept.inbox_item(
        delivery, work, body_sha256=digest, received_at=NOW, expires_at=expires
    )
    assert built == dynamodb_items.inbox_to_item(stored)
    assert built["state"] == {"S": "pending" if work is not None else "ignored"}
