"""The worker over moto and the SDK's MCP server: a delivery's package is fetched once and
recorded, and the claimed inbox item, not the queue message, names it."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError

from functions.core import metric_names
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_package_record import DynamoDbPackageRecords
from functions.core.claim import Claim, ClaimLost
from functions.core.models import State, WorkItem
from functions.core.package import Package
from functions.core.package_record import RECORD_UNKNOWN
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.steps import StoredResult
from local.mcp_server import CHANGED_TITLE, RunningServer, demo_package
from local.notify_sink import NotifySinkServer
from local.testkit.moto_world import BUCKET, REGION, TABLE, MotoWorld
from local.testkit.worker_rig import WorkerRig, make_worker
from tests.integration.test_worker import redeliver, sink, submit, work, worker
from tests.processing_harness import emitted_metrics

if TYPE_CHECKING:
    from functions.worker.handler import Deps

__all__ = ["sink", "worker"]  # fixtures, shared with the worker's tests


def first_version(package_id: str) -> Package:
    return Package.from_mapping(demo_package(package_id))


def archived_title(aws: MotoWorld, delivery_id: str) -> str:
    body = aws.s3.get_object(Bucket=BUCKET, Key=f"packages/{delivery_id}.json")["Body"].read()
    title: str = json.loads(body)["package"]["title"]
    return title


def test_a_retried_delivery_runs_on_its_first_fetch_and_fetches_it_once(
    aws: MotoWorld, worker: WorkerRig, mcp_server: RunningServer, sink: NotifySinkServer
) -> None:
    item = work(mcp_server, package="pkg_changing_0001")
    submit(aws, item)
    sink.sink.fail_next(1, 503)  # the first notification fails: the delivery is retried
    redeliver(aws, worker, 1)
    redeliver(aws, worker, 2)
    assert aws.inbox(item.delivery_id).state is State.COMPLETED
    first = first_version(item.package_id)
    assert mcp_server.controls.packages_requested() == {item.package_id: 1}
    assert sink.sink.body(f"{item.delivery_id}:notify")["title"] == first.title != CHANGED_TITLE
    assert archived_title(aws, item.delivery_id) == first.title
    recorded = DynamoDbPackageRecords(client=aws.dynamodb, table_name=TABLE).get(item.delivery_id)
    assert recorded is not None and recorded.digest == first.digest()


def test_a_message_naming_another_package_is_refused_and_nothing_is_fetched_or_archived(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    item = work(mcp_server)
    aws.accept(item)
    aws.enqueue(dataclasses.replace(item, package_id="pkg_someone_else"))
    _, response = worker.run_visible()
    assert response == {"batchItemFailures": []}  # acknowledged, not retried
    assert mcp_server.controls.packages_requested() == {}
    listed = aws.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    assert [o["Key"] for o in listed if o["Key"].startswith("packages/")] == []
    assert sink.sink.counts() == {}
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.attempts) == (State.PENDING, 0)  # left for its own work item
    assert emitted_metrics(capsys.readouterr().out)[metric_names.METRIC_WORK_REFUSED] == 1


class LostAnswer:
    """The package record's update is written and its answer is lost, once.

    ``resend``: botocore sends it again (as after a timeout); ``raise``: the client
    raises a read timeout, as when its retries are spent.
    """

    def __init__(self, client: Any, how: str) -> None:
        self.lost = 0
        event = "needs-retry" if how == "resend" else "after-call"
        handler = self._resend if how == "resend" else self._raise
        client.meta.events.register(f"{event}.dynamodb.UpdateItem", handler)

    def _first(self, status: int) -> bool:
        if self.lost or status != 200:
            return False
        self.lost += 1
        return True

    def _resend(self, response: Any, **_: object) -> Any:
        if response is not None and self._first(response[0].status_code):
            return 0
        return None

    def _raise(self, http_response: Any, **_: object) -> None:
        if self._first(http_response.status_code):
            raise ReadTimeoutError(endpoint_url="https://dynamodb.invalid")


@pytest.mark.parametrize("how", ["resend", "raise"])
def test_a_lost_answer_on_the_package_record_is_never_taken_for_not_recorded(
    aws: MotoWorld, mcp_server: RunningServer, sink: NotifySinkServer, how: str
) -> None:
    lost: list[LostAnswer] = []

    def losing(deps: Deps) -> Deps:
        client = boto3.client("dynamodb", region_name=REGION)
        lost.append(LostAnswer(client, how))
        records = DynamoDbPackageRecords(client=client, table_name=TABLE)
        packages = dataclasses.replace(deps.processor.packages, records=records)
        processor = dataclasses.replace(deps.processor, packages=packages)
        return dataclasses.replace(deps, processor=processor)

    worker = make_worker(aws, token=mcp_server.token, notify_url=sink.url, wrap=losing)
    item = work(mcp_server, package="pkg_changing_0002")
    submit(aws, item)
    redeliver(aws, worker, 1)
    if how == "raise":  # unknown: retried, nothing ran on the unrecorded answer
        assert aws.inbox(item.delivery_id).last_error == RECORD_UNKNOWN
        assert sink.sink.counts() == {}
        redeliver(aws, worker, 2)
    assert lost[0].lost == 1
    assert aws.inbox(item.delivery_id).state is State.COMPLETED
    assert mcp_server.controls.packages_requested() == {item.package_id: 1}
    first = first_version(item.package_id)
    assert sink.sink.body(f"{item.delivery_id}:notify")["title"] == first.title
    stored = aws.dynamodb.get_item(TableName=TABLE, Key=dynamodb_items.inbox_key(item.delivery_id))
    assert stored["Item"]["pkg_sha256"]["S"] == first.digest()  # on the inbox item


def accepted(aws: MotoWorld, mcp_server: RunningServer) -> tuple[WorkItem, DynamoDbClaims, int]:
    item = work(mcp_server)
    aws.accept(item)
    return item, DynamoDbClaims(client=aws.dynamodb, table_name=TABLE), aws.clock.now()


def test_only_the_claims_holder_records_a_package(
    aws: MotoWorld, mcp_server: RunningServer
) -> None:
    """The record's update checks the claim: a stale owner's write changes nothing."""
    item, claims, now = accepted(aws, mcp_server)
    stale = claims.claim(item.delivery_id, owner="a", now=now, lease_seconds=10).claim
    holder = claims.claim(item.delivery_id, owner="b", now=now + 10, lease_seconds=10).claim
    assert stale is not None and holder is not None
    records = DynamoDbPackageRecords(client=aws.dynamodb, table_name=TABLE)
    body = first_version(item.package_id).canonical()

    def record(by: str, digest: str) -> PackageRecord:
        content = StoredResult(size=len(body), inline=body.decode())
        return PackageRecord(item.delivery_id, digest, content, now, recorded_by=by)

    with pytest.raises(ClaimLost):
        records.record(stale, record("a", "a" * 64), expires_at=0)
    assert records.get(item.delivery_id) is None
    assert records.record(holder, record("b", "b" * 64), expires_at=0) is None
    again = records.record(holder, record("b", "c" * 64), expires_at=0)
    assert again is not None and again.digest == "b" * 64  # the first record wins
    records.record_refetch(item.delivery_id, digest="d" * 64, now=now + 20)
    kept = records.get(item.delivery_id)
    assert kept is not None
    assert (kept.digest, kept.refetched_digest, kept.refetched_at) == ("b" * 64, "d" * 64, now + 20)
    assert kept.content.inline == body.decode()


def test_a_record_an_earlier_version_kept_apart_is_still_replayed_and_noted_on(
    aws: MotoWorld, mcp_server: RunningServer
) -> None:
    """Deliveries in flight across an upgrade keep the package they were recorded with."""
    item, claims, now = accepted(aws, mcp_server)
    first = claims.claim(item.delivery_id, owner="a", now=now, lease_seconds=10).claim
    assert first is not None
    legacy = {
        **dynamodb_items.key(item.delivery_id, "package"),
        "kind": {"S": "package"},
        "delivery_id": {"S": item.delivery_id},
        "package_sha256": {"S": "e" * 64},
        "content_size": {"N": "2"},
        "content": {"S": "{}"},
        "recorded_at": {"N": str(now)},
        "recorded_by": {"S": "a"},
    }
    aws.dynamodb.put_item(TableName=TABLE, Item=legacy)
    records = DynamoDbPackageRecords(client=aws.dynamodb, table_name=TABLE)
    assert records.get(item.delivery_id) is None  # a first attempt reads its own item only
    second = claims.claim(item.delivery_id, owner="b", now=now + 10, lease_seconds=10).claim
    assert second is not None
    kept = records.get(item.delivery_id)
    assert kept is not None and (kept.digest, kept.content.inline) == ("e" * 64, "{}")
    records.record_refetch(item.delivery_id, digest="f" * 64, now=now + 20)
    noted = records.get(item.delivery_id)
    assert noted is not None and (noted.refetched_digest, noted.refetched_at) == (
        "f" * 64,
        now + 20,
    )
    inbox = aws.dynamodb.get_item(TableName=TABLE, Key=dynamodb_items.inbox_key(item.delivery_id))
    assert "pkg_refetched_sha256" not in inbox["Item"]  # noted where the record is


def test_a_finished_attempt_records_nothing(aws: MotoWorld, mcp_server: RunningServer) -> None:
    item = work(mcp_server)
    aws.accept(item, state={"S": State.COMPLETED.value}, lease_owner={"S": "a"})
    records = DynamoDbPackageRecords(client=aws.dynamodb, table_name=TABLE)
    claim = Claim(item.delivery_id, owner="a", lease_until=aws.clock.now() + 10, attempts=1)
    content = StoredResult(size=2, inline="{}")
    with pytest.raises(ClaimLost):
        records.record(
            claim, PackageRecord(item.delivery_id, "a" * 64, content, 0, "a"), expires_at=0
        )
    assert records.get(item.delivery_id) is None
