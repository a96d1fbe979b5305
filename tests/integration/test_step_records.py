"""Step records in DynamoDB and large results in S3 (moto), through the ledger and directly."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
import pytest

from functions.core import table_layout
from functions.core.adapters.dynamodb_steps import KIND_STEP, DynamoDbSteps, step_key
from functions.core.adapters.object_store_s3 import S3ObjectStore
from functions.core.effects import EffectLedger
from functions.core.errors import TransientError
from functions.core.metric_names import METRIC_STEP_RERUNS
from functions.core.ports.steps import StepStatus, StoredResult
from functions.core.steps import RESULT_OBJECT_PREFIX, StepStorage
from local.testkit.clock import FakeClock
from local.testkit.moto_world import REGION
from tests.fakes import FakeEffects, FakeMetrics

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

DELIVERY = "5d2a7c3e-1f4b-4a6d-8e9c-2b1a0f3e4d5c"
BUCKET = "relaylink-archive"
EXPIRES_AT = 1_762_592_000


class Crash(BaseException):
    """The worker dies inside the step."""


@pytest.fixture
def steps(dynamodb: DynamoDBClient, table: str) -> DynamoDbSteps:
    return DynamoDbSteps(client=dynamodb, table_name=table)


@pytest.fixture
def objects(moto_aws: None) -> S3ObjectStore:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    return S3ObjectStore(client=s3, bucket=BUCKET)


def ledger(storage: StepStorage) -> EffectLedger:
    return EffectLedger(
        DELIVERY, store=FakeEffects(), clock=FakeClock(), expires_at=EXPIRES_AT, steps=storage
    )


def test_step_record_sits_beside_the_effects_and_out_of_the_index(
    steps: DynamoDbSteps, dynamodb: DynamoDBClient, table: str
) -> None:
    storage = StepStorage(records=steps, metrics=FakeMetrics())
    assert ledger(storage).step("model", lambda: {"summary": "ok"}) == {"summary": "ok"}
    item = dynamodb.get_item(TableName=table, Key=step_key(DELIVERY, "model"))["Item"]
    assert item[table_layout.TABLE_SORT_KEY]["S"] == "step#model"
    assert item[table_layout.KIND_ATTRIBUTE]["S"] == KIND_STEP
    assert item[table_layout.TTL_ATTRIBUTE]["N"] == str(EXPIRES_AT)
    assert item["result"]["S"] == '{"summary":"ok"}'
    assert table_layout.STATE_INDEX_PARTITION_KEY not in item
    assert table_layout.STATE_INDEX_SORT_KEY not in item


def test_rerun_after_a_crash_is_counted_and_the_first_result_is_kept(
    steps: DynamoDbSteps,
) -> None:
    metrics = FakeMetrics()
    storage = StepStorage(records=steps, metrics=metrics)
    with pytest.raises(Crash):
        ledger(storage).step("model", lambda: (_ for _ in ()).throw(Crash()))
    assert ledger(storage).step("model", lambda: "second run") == "second run"
    assert ledger(storage).step("model", lambda: "third run") == "second run"
    assert metrics.counts[METRIC_STEP_RERUNS] == 1
    record = steps.get(DELIVERY, "model")
    assert record is not None
    assert (record.status, record.runs) == (StepStatus.RECORDED, 2)


def test_failed_run_is_marked_only_while_it_is_the_latest(steps: DynamoDbSteps) -> None:
    assert steps.start(DELIVERY, "model", now=1, expires_at=0) is None
    before = steps.start(DELIVERY, "model", now=2, expires_at=0)  # a second worker
    assert before is not None
    assert (before.status, before.runs) == (StepStatus.STARTED, 1)
    assert steps.record_failed(DELIVERY, "model", run=1, now=3) is False
    assert steps.record_failed(DELIVERY, "model", run=2, now=3) is True
    record = steps.get(DELIVERY, "model")
    assert record is not None
    assert record.status is StepStatus.FAILED


def test_recorded_result_refuses_new_runs_and_later_results(steps: DynamoDbSteps) -> None:
    steps.start(DELIVERY, "model", now=1, expires_at=0)
    first = StoredResult(size=7, inline='"first"')
    assert steps.record_result(DELIVERY, "model", result=first, now=2) is None
    refused = steps.start(DELIVERY, "model", now=3, expires_at=0)
    assert refused is not None
    assert (refused.status, refused.result, refused.runs) == (StepStatus.RECORDED, first, 1)
    kept = steps.record_result(
        DELIVERY, "model", result=StoredResult(size=8, inline='"second"'), now=4
    )
    assert kept is not None
    assert kept.result == first
    assert steps.record_failed(DELIVERY, "model", run=1, now=5) is False


def test_result_without_a_started_run_is_a_conflict(steps: DynamoDbSteps) -> None:
    with pytest.raises(TransientError, match="step_conflict"):
        steps.record_result(DELIVERY, "model", result=StoredResult(size=1, inline="1"), now=1)


def test_large_result_is_kept_in_s3_by_digest(
    steps: DynamoDbSteps, objects: S3ObjectStore, dynamodb: DynamoDBClient, table: str
) -> None:
    storage = StepStorage(records=steps, metrics=FakeMetrics(), objects=objects)
    big = {"summary": "y" * (70 * 1024)}  # over the 64 KiB inline limit
    assert ledger(storage).step("model", lambda: big) == big
    item = dynamodb.get_item(TableName=table, Key=step_key(DELIVERY, "model"))["Item"]
    assert "result" not in item
    digest = item["result_sha256"]["S"]
    assert objects.get(RESULT_OBJECT_PREFIX + digest) is not None
    assert ledger(storage).step("model", lambda: "not called") == big


def test_missing_object_reads_as_none(objects: S3ObjectStore) -> None:
    assert objects.get(RESULT_OBJECT_PREFIX + "0" * 64) is None
