"""The reconciler passes' cursors in DynamoDB (moto): kept beside the watermark, read back
as saved, and a pass from one goes on after its entry, shard after shard."""

from __future__ import annotations

from typing import Any

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_approvals import DynamoDbApprovals
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_effects import DynamoDbEffects
from functions.core.ports.recovery import IntentCursor, OpenCursor
from local.testkit.moto_world import TABLE, MotoWorld

NAME = "notify"


def delivery(n: int) -> str:
    return f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}"


def test_each_pass_keeps_its_own_cursor(aws: MotoWorld) -> None:
    claims = DynamoDbClaims(client=aws.dynamodb, table_name=TABLE)
    effects = DynamoDbEffects(client=aws.dynamodb, table_name=TABLE)
    approvals = DynamoDbApprovals(client=aws.dynamodb, table_name=TABLE)
    claims.save_open_cursor(OpenCursor(3, (100, delivery(1))))
    effects.save_intent_cursor(IntentCursor(5, (200, delivery(2), NAME)))
    approvals.save_waiting_cursor(OpenCursor(7))
    assert claims.open_cursor() == OpenCursor(3, (100, delivery(1)))
    assert effects.intent_cursor() == IntentCursor(5, (200, delivery(2), NAME))
    assert approvals.waiting_cursor() == OpenCursor(7)
    effects.save_intent_cursor(IntentCursor(6))  # the next shard's start: no entry left
    assert effects.intent_cursor() == IntentCursor(6)
    effects.save_intent_cursor(None)
    assert effects.intent_cursor() is None
    assert claims.open_cursor() == OpenCursor(3, (100, delivery(1)))


def test_an_open_cursor_saved_before_the_record_was_kept_reads_as_an_inbox_entry(
    aws: MotoWorld,
) -> None:
    aws.dynamodb.put_item(
        TableName=TABLE,
        Item={
            **dynamodb_items.key(
                table_layout.WATERMARK_PARTITION, table_layout.OPEN_CURSOR_SORT_KEY
            ),
            "cursor_shard": {"N": "2"},
            "cursor_listed_at": {"N": "100"},
            "cursor_id": {"S": delivery(1)},
        },
    )
    claims = DynamoDbClaims(client=aws.dynamodb, table_name=TABLE)
    assert claims.open_cursor() == OpenCursor(2, (100, delivery(1)))
    assert [page.resume for page in claims.open_pages(start=claims.open_cursor(), page_size=5)][
        -1
    ] is None


def intents(aws: MotoWorld, count: int, *, at: int) -> DynamoDbEffects:
    effects = DynamoDbEffects(client=aws.dynamodb, table_name=TABLE)
    for n in range(count):
        effects.record_intent(delivery(n), NAME, key="k", now=at + n, expires_at=0)
    return effects


def test_a_pass_from_a_saved_cursor_reads_each_intent_after_it_once(aws: MotoWorld) -> None:
    effects = intents(aws, 40, at=1000)
    whole = [p for p in effects.uncertain_pages(start=None, intended_before=2000, page_size=3)]
    order = [(r.delivery_id, r.name) for page in whole for r in page.items]
    assert sorted(order) == sorted((delivery(n), NAME) for n in range(40))
    # From the cursor after each page: exactly the intents after that page.
    for index, page in enumerate(whole):
        if page.resume is None:
            continue
        rest = effects.uncertain_pages(start=page.resume, intended_before=2000, page_size=3)
        read = [(r.delivery_id, r.name) for p in rest for r in p.items]
        done = sum(len(p.items) for p in whole[: index + 1])
        assert read == order[done:]


def test_a_cursor_past_a_shorter_window_goes_on_with_the_next_shard(aws: MotoWorld) -> None:
    effects = intents(aws, 40, at=1000)
    whole = list(effects.uncertain_pages(start=None, intended_before=2000, page_size=100))
    first = whole[0]
    assert first.resume == IntentCursor(1)
    last = first.items[-1]
    # Saved in a run whose window reached this intent; the next run's window ends before
    # it (a raised effect age): DynamoDB refuses a start key outside the key condition,
    # and nothing after it in that shard is in the window anyway.
    saved = IntentCursor(0, (last.intent_at, last.delivery_id, last.name))
    before = last.intent_at
    outside: list[dict[str, Any]] = []  # moto does not refuse them: noted here

    def check(params: dict[str, Any], **_: Any) -> None:
        start = params.get("ExclusiveStartKey")
        window_end = params["ExpressionAttributeValues"].get(":before")
        if start is None or window_end is None:
            return
        if int(start[table_layout.STATE_INDEX_SORT_KEY]["N"]) >= int(window_end["N"]):
            outside.append(start)

    aws.dynamodb.meta.events.register("provide-client-params.dynamodb.Query", check)
    rest = list(effects.uncertain_pages(start=saved, intended_before=before, page_size=100))
    assert outside == []
    read = {r.delivery_id for page in rest for r in page.items}
    later_shards = [r for page in whole[1:] for r in page.items]
    assert read == {r.delivery_id for r in later_shards if r.intent_at < before}
    assert rest[-1].resume is None
