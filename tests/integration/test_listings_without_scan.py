"""Every list the reconciler and the operator commands read is a Query, never a Scan.

The state index holds keys only, each record under a label (open, failed, completed and
ignored inbox items, quarantine records, effect intents); each listing below must still
find exactly its items, and read only the labels it needs (the reconciler's index lists
never read a completed entry). Open items the receiver did not list are found in the
received log (a Query of the table by time). A botocore hook on the target's client
records every DynamoDB operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_received_log import DynamoDbReceivedLog
from functions.core.effects import idempotency_key
from functions.core.models import QuarantineRecord, State
from ops.budget import set_budget, show_budget
from ops.effects import list_effects
from ops.inbox import list_inbox
from ops.quarantine import list_quarantine
from ops.requeue import redrive, requeue
from tests.operator_harness import NOW, Stack

if TYPE_CHECKING:
    from botocore.model import OperationModel

HOUR = 3600


class Operations:
    """The names of the DynamoDB operations one client sends."""

    def __init__(self, stack: Stack) -> None:
        self.names: list[str] = []
        self.shards: list[str] = []  # the index partitions queried
        self.read_keys: list[str] = []  # the delivery ids read by BatchGetItem
        events = stack.target.dynamodb.meta.events
        events.register("before-call.dynamodb", self._seen)
        events.register("provide-client-params.dynamodb", self._asked)

    def _seen(self, model: OperationModel, **_: Any) -> None:
        self.names.append(model.name)

    def _asked(self, model: OperationModel, params: dict[str, Any], **_: Any) -> None:
        if model.name == "Query":
            self.shards.append(params["ExpressionAttributeValues"][":shard"]["S"])
        if model.name == "BatchGetItem":
            for request in params["RequestItems"].values():
                self.read_keys += [key["pk"]["S"] for key in request["Keys"]]

    def labels(self) -> set[str]:
        return {shard.split("#")[0] for shard in self.shards}


def ids(items: Any) -> list[str]:
    return [item.delivery_id for item in items]


def list_received(stack: Stack) -> list[str]:
    """What the reconciler does with the received log: list every open receipt (here,
    every one before now) under ``open``; the ids it listed."""
    log = DynamoDbReceivedLog(client=stack.target.dynamodb, table_name=stack.target.table_name)
    found = list(log.unlisted_open(since=0, before=NOW, page_size=2))
    assert all(log.list_open(item) for item in found)
    return sorted(ids(found))


def test_reconciler_and_operator_listings_query_the_index_never_scan(stack: Stack) -> None:
    pending = stack.accept(received_at=NOW - 2 * HOUR)
    processing = stack.accept(received_at=NOW - HOUR)
    stack.claims.claim(processing, owner="w", now=NOW - HOUR, lease_seconds=60)  # expired
    failed = stack.accept(received_at=NOW - 3 * HOUR)
    stack.finish(failed, State.FAILED)
    done = stack.accept(received_at=NOW - 4 * HOUR)
    stack.finish(done, State.COMPLETED)
    effects = stack.target.effects()
    key = idempotency_key(failed, "notify")
    assert effects.record_intent(failed, "notify", key=key, now=NOW - HOUR, expires_at=0)
    stack.target.dynamodb.put_item(
        TableName=stack.target.table_name,
        Item=dynamodb_items.quarantine_to_item(
            QuarantineRecord(done, "package.received", "aa" * 32, "bb" * 32, NOW, NOW + HOUR)
        ),
    )
    seen = Operations(stack)

    # The operator's lists.
    assert ids(list_inbox(stack.target, state=State.PENDING)) == [pending]
    assert ids(list_inbox(stack.target, state=State.PROCESSING)) == [processing]
    assert ids(list_inbox(stack.target, state=State.FAILED)) == [failed]
    assert ids(list_quarantine(stack.target)) == [done]
    in_doubt = list_effects(stack.target, now=NOW, effect_age_seconds=60)
    assert [(e.record.delivery_id, e.record.name) for e in in_doubt] == [(failed, "notify")]
    # The reconciler's lists: the received log first (the receiver lists no open item).
    assert list_received(stack) == sorted([pending, processing])
    claims = stack.claims
    assert ids(claims.stale_pending(changed_before=NOW - HOUR, page_size=2)) == [pending]
    assert ids(claims.expired_leases(now=NOW, page_size=2)) == [processing]
    uncertain = list(effects.uncertain(intended_before=NOW, page_size=2))
    assert [(r.delivery_id, r.name) for r in uncertain] == [(failed, "notify")]
    # The operator's writes that read first.
    assert requeue(stack.target, failed, now=NOW).outcome.value == "requeued"
    assert redrive(stack.target, now=NOW).moved == 0
    set_budget(stack.target, 1000, now=NOW)
    assert show_budget(stack.target, now=NOW).limit == 1000

    assert "Scan" not in seen.names
    assert {"Query", "BatchGetItem"} <= set(seen.names)
    # The completed delivery is listed under its own label: no list above read it.
    assert "completed" not in seen.labels()
    assert done not in ids(list_inbox(stack.target, state=State.PENDING))
    assert ids(list_inbox(stack.target, state=State.COMPLETED)) == [done]
    assert "Scan" not in seen.names


def test_the_reconciler_reads_only_open_work_and_effect_intents(stack: Stack) -> None:
    done = [stack.accept(received_at=NOW - HOUR - t) for t in range(3)]
    for delivery_id in done:
        stack.finish(delivery_id, State.COMPLETED)
    ping = stack.accept(received_at=NOW - HOUR, package=False)
    pending = stack.accept(received_at=NOW - 2 * HOUR)
    # The received log names every receipt with work (not the ping): each is read once,
    # and only the open one is listed.
    seen = Operations(stack)
    assert list_received(stack) == [pending]
    assert sorted(seen.read_keys) == sorted([*done, pending])
    assert seen.labels() == {"received"}
    seen = Operations(stack)
    claims, effects = stack.claims, stack.target.effects()
    assert ids(claims.stale_pending(changed_before=NOW - HOUR, page_size=2)) == [pending]
    assert ids(claims.expired_leases(now=NOW, page_size=2)) == []
    assert list(effects.uncertain(intended_before=NOW, page_size=2)) == []
    assert seen.labels() == {"open", "effect_intent"}
    assert set(seen.read_keys) == {pending}  # no completed or ignored item read
    assert ping not in seen.read_keys
    assert "Scan" not in seen.names
