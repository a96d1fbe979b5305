"""Effects in doubt in DynamoDB (moto): listed while in doubt, unlisted once resolved."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

from functions.core import table_layout
from functions.core.adapters.dynamodb_effects import DynamoDbEffects, effect_key
from functions.core.effects import EffectLedger
from functions.core.errors import NotApplied
from functions.core.ports.effects import EffectStatus
from local.testkit.botocore_hooks import answer_first, aws_response
from local.testkit.clock import FakeClock
from local.testkit.moto_world import REGION

if TYPE_CHECKING:
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from mypy_boto3_dynamodb.client import DynamoDBClient

DELIVERY = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


@pytest.fixture
def effects(dynamodb: DynamoDBClient, table: str) -> DynamoDbEffects:
    return DynamoDbEffects(client=dynamodb, table_name=table)


def listed(effects: DynamoDbEffects, clock: FakeClock) -> list[str]:
    return [r.name for r in effects.uncertain(intended_before=clock.value + 1, page_size=10)]


@pytest.mark.parametrize("resolve", ["resolve_applied", "resolve_not_applied"])
def test_resolution_leaves_the_index_and_the_operators_list(
    effects: DynamoDbEffects, dynamodb: DynamoDBClient, table: str, resolve: str
) -> None:
    clock = FakeClock()
    effects.record_intent(DELIVERY, "notify", key="k", now=clock.value, expires_at=99)
    assert listed(effects, clock) == ["notify"]
    (record,) = effects.uncertain(intended_before=clock.value + 1, page_size=10)
    assert effects.flag(record, now=clock.value) is True
    assert getattr(effects, resolve)(DELIVERY, "notify", now=clock.value + 1) is True
    item = dynamodb.get_item(TableName=table, Key=effect_key(DELIVERY, "notify"))["Item"]
    assert table_layout.STATE_INDEX_PARTITION_KEY not in item
    assert table_layout.STATE_INDEX_SORT_KEY not in item
    assert "flagged_at" not in item
    assert listed(effects, clock) == []
    assert effects.flag(record, now=clock.value + 2) is False
    assert getattr(effects, resolve)(DELIVERY, "notify", now=clock.value + 2) is False


def test_not_applied_effect_is_written_as_a_new_intent_next_time(
    effects: DynamoDbEffects,
) -> None:
    clock = FakeClock()
    ledger = EffectLedger(DELIVERY, store=effects, clock=clock, expires_at=99)

    def refused(key: str) -> None:
        raise NotApplied("notify_unavailable")

    with pytest.raises(NotApplied):
        ledger.run("notify", refused)
    record = effects.get(DELIVERY, "notify")
    assert record is not None
    assert record.status is EffectStatus.NOT_APPLIED
    assert listed(effects, clock) == []
    clock.advance(30)
    assert effects.record_intent(DELIVERY, "notify", key="k2", now=clock.value, expires_at=99)
    record = effects.get(DELIVERY, "notify")
    assert record is not None
    assert (record.status, record.key, record.intent_at) == (
        EffectStatus.INTENT,
        "k2",
        clock.value,
    )
    assert listed(effects, clock) == ["notify"]
    # An intent (unlike a cleared record) is never overwritten.
    assert not effects.record_intent(DELIVERY, "notify", key="k3", now=clock.value, expires_at=99)


def test_intent_put_retried_by_the_sdk_after_a_lost_answer_is_our_own(
    dynamodb: DynamoDBClient, table: str
) -> None:
    """The first PutItem commits, but its caller hears a 500: botocore puts again, and
    the condition refuses that copy. The ledger must see its own intent, not a rival's."""
    client = boto3.client(
        "dynamodb",
        region_name=REGION,
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
    )
    puts: list[int] = []

    def lose_the_first_answer(request: AWSPreparedRequest, **_: object) -> AWSResponse | None:
        puts.append(1)
        if len(puts) > 1:
            return None
        # moto still executes the request (every before-send handler runs): it commits.
        body = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}'
        return aws_response(
            request, 500, body, content_type="application/x-amz-json-1.0", request_id="lost"
        )

    answer_first(client, "before-send.dynamodb.PutItem", lose_the_first_answer)
    effects = DynamoDbEffects(client=client, table_name=table)
    applied: list[str] = []
    ledger = EffectLedger(DELIVERY, store=effects, clock=FakeClock(), expires_at=99)
    assert ledger.run("notify", applied.append) is True
    assert len(puts) == 2  # the retried put happened, and was refused by the condition
    assert applied == [f"{DELIVERY}:notify"]
    record = effects.get(DELIVERY, "notify")
    assert record is not None
    assert record.status is EffectStatus.DONE
    assert record.attempt == ledger.attempt
