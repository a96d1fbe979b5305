"""The operator commands against moto's server on loopback (in this process).

The target, its state file and the CLI runner: :mod:`tests.operator_harness`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import boto3
import pytest

from cli.state import LocalState
from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.dynamodb_package_record import DynamoDbPackageRecords
from functions.core.adapters.dynamodb_received_log import DynamoDbReceivedLog
from functions.core.models import QuarantineRecord, State, WorkItem
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.steps import StoredResult
from functions.core.spend import ModelSpend
from ops.inbox import inbox_view, list_inbox, show_inbox
from ops.requeue import RedriveOutcome, RequeueOutcome, redrive, requeue, reset_failed
from ops.target import OperatorError, Target
from tests.operator_harness import MCP, NOW, Stack, run_cli

# --- inbox ------------------------------------------------------------------------


def test_inbox_show_json_matches_the_store_and_has_no_body(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.FAILED, attempts=2)
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id, "--json"))
    assert status == 0
    shown = json.loads(out)
    stored = stack.stored(delivery_id)
    assert "body" not in stored  # the store holds none: nothing to leak
    assert shown["state"] == stored["state"]["S"] == "failed"
    assert shown["attempts"] == int(stored["attempts"]["N"]) == 2
    assert shown["body_sha256"] == stored["body_sha256"]["S"]
    assert shown["received_at"] == int(stored["received_at"]["N"]) == NOW
    assert shown["state_changed_at"] == int(stored["state_changed_at"]["N"])
    assert shown["last_error"] == stored["last_error"]["S"] == "mcp_unavailable"
    assert shown["completed_at"] is None
    assert shown == {
        **inbox_view(dynamodb_items.inbox_from_item(stored)),
        **ModelSpend().to_dict(),
        "package": None,
        "steps": [],
        "effects": [],
        "approvals": [],
    }


def test_inbox_show_prints_the_recorded_and_the_refetched_package_digest(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    claim = stack.claims.claim(delivery_id, owner="w", now=NOW, lease_seconds=60).claim
    records = DynamoDbPackageRecords(
        client=stack.target.dynamodb, table_name=stack.target.table_name
    )
    recorded, refetched = "a" * 64, "b" * 64
    content = StoredResult(size=2, inline="{}")
    records.record(claim, PackageRecord(delivery_id, recorded, content, NOW, "w"), expires_at=0)
    records.record_refetch(delivery_id, digest=refetched, now=NOW + 5)
    stack.claims.fail(claim, now=NOW + 5, error_code="package_changed")
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert status == 0
    lines = dict(line.split("  ", 1) for line in out.splitlines())
    assert lines["package"].strip().startswith(f"{recorded} (2 bytes, recorded ")
    assert lines["package refetched"].strip().startswith(f"{refetched} at 2027-01-15T08:00:05Z")
    assert "package_changed" in lines["package refetched"]
    assert "{}" not in out  # the digest and size, never the content
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id, "--json"))
    assert json.loads(out)["package"] == {
        "sha256": recorded,
        "size": 2,
        "recorded_at": NOW,
        "refetched_sha256": refetched,
        "refetched_at": NOW + 5,
    }


def test_inbox_show_text_and_unknown_id(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.COMPLETED)
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert status == 0
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert lines["state"] == "completed"
    assert lines["completed_at"] == "2027-01-15T08:00:01Z"  # NOW + 1, readable
    assert lines["last_error"] == "-"
    unknown = str(uuid.uuid4())
    status, out, err = run_cli(capsys, stack.cli("inbox", "show", unknown))
    assert status == 1 and out == ""
    assert err == (
        f"relaylink-receiver inbox: error: unknown_delivery: no delivery {unknown} in the inbox\n"
    )


def test_inbox_list_by_state_with_a_limit_reads_only_the_most_recently_listed(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # Received and completed in the same order, one second apart.
    done = [stack.accept(received_at=NOW + 30 + n) for n in range(3)]
    for attempts, delivery_id in enumerate(done, start=1):
        stack.finish(delivery_id, State.COMPLETED, attempts=attempts)

    newest_two = list_inbox(stack.target, state=State.COMPLETED, limit=2)
    # The two completed last (not the two received first), oldest received first.
    assert [i.delivery_id for i in newest_two] == [done[1], done[2]]
    status, out, err = run_cli(
        capsys, stack.cli("inbox", "list", "--state", "completed", "--limit", "1", "--json")
    )
    assert status == 0 and err == ""
    assert [i["delivery_id"] for i in json.loads(out)["items"]] == [done[2]]


def test_open_work_is_the_open_label_and_the_fresh_receipts_each_once(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    old, fresh = stack.accept(received_at=NOW - 3600), stack.accept(received_at=NOW - 10)
    done = stack.accept(received_at=NOW - 20)
    stack.finish(done, State.COMPLETED)
    # The reconciler looked at the log up to NOW - 900: it listed the old receipt open.
    log = DynamoDbReceivedLog(client=stack.target.dynamodb, table_name=stack.target.table_name)
    for item in log.unlisted_open(since=0, before=NOW - 900, page_size=10):
        assert log.list_open(item)
    log.advance(NOW - 900)
    assert dynamodb_items.is_listed(stack.stored(old))
    assert not dynamodb_items.is_listed(stack.stored(fresh))

    read: list[str] = []
    stack.target.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem",
        lambda params, **_: read.extend(
            key["pk"]["S"] for request in params["RequestItems"].values() for key in request["Keys"]
        ),
    )
    assert [i.delivery_id for i in list_inbox(stack.target, state=State.PENDING)] == [old, fresh]
    newest = list_inbox(stack.target, state=State.PENDING, limit=1)
    assert [i.delivery_id for i in newest] == [fresh]  # by receipt, merged with the index
    assert stack.target.count_listed(table_layout.STATE_LABEL_OPEN) == 2
    assert stack.target.count_listed(table_layout.STATE_LABEL_OPEN) == 2
    # The completed receipt is read once: a refreshing console reads only what may be open.
    assert read.count(done) == 1
    assert read.count(fresh) == 4
    stack.claims.claim(fresh, owner="w", now=NOW, lease_seconds=60)
    assert [i.delivery_id for i in list_inbox(stack.target, state=State.PROCESSING)] == [fresh]
    status, out, _ = run_cli(capsys, stack.cli("inbox", "list", "--state", "pending", "--json"))
    assert status == 0
    assert [i["delivery_id"] for i in json.loads(out)["items"]] == [old]


def test_inbox_list_by_state_uses_the_index_and_orders_by_received_time(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    late_done = stack.accept(received_at=NOW + 50)
    early_done = stack.accept(received_at=NOW + 10)
    failed = stack.accept(received_at=NOW + 30)
    pending = [stack.accept(received_at=NOW + t) for t in (40, 20)]
    ping = stack.accept(received_at=NOW + 5, package=False)
    stack.finish(late_done, State.COMPLETED)
    stack.finish(early_done, State.COMPLETED)
    stack.finish(failed, State.FAILED)
    _quarantine(stack, early_done, "ab" * 32)  # listed in the index too, but not an inbox item

    processing = stack.accept(received_at=NOW + 15)
    stack.claims.claim(processing, owner="w", now=NOW + 16, lease_seconds=60)

    # Completed and ignored items have their own labels: listed through the index too.
    assert [i.delivery_id for i in list_inbox(stack.target, state=State.COMPLETED)] == [
        early_done,
        late_done,
    ]
    assert [i.delivery_id for i in list_inbox(stack.target, state=State.IGNORED)] == [ping]
    status, out, err = run_cli(capsys, stack.cli("inbox", "list", "--state", "completed", "--json"))
    assert status == 0 and err == ""
    listed = json.loads(out)["items"]
    assert [(i["delivery_id"], i["state"]) for i in listed] == [
        (early_done, "completed"),
        (late_done, "completed"),
    ]
    # pending and processing share the index's open label; each lists its own state.
    assert [i.delivery_id for i in list_inbox(stack.target, state=State.PENDING)] == [
        pending[1],
        pending[0],
    ]
    assert [i.delivery_id for i in list_inbox(stack.target, state=State.PROCESSING)] == [processing]
    everything = list_inbox(stack.target)
    assert [i.delivery_id for i in everything] == [
        ping,
        early_done,
        processing,
        pending[1],
        failed,
        pending[0],
        late_done,
    ]
    assert len(list_inbox(stack.target, limit=2)) == 2

    status, out, _ = run_cli(capsys, stack.cli("inbox", "list", "--state", "failed", "--json"))
    assert status == 0
    document = json.loads(out)
    assert document["count"] == 1
    assert document["items"] == [inbox_view(dynamodb_items.inbox_from_item(stack.stored(failed)))]
    status, out, _ = run_cli(capsys, stack.cli("inbox", "list", "--limit", "3"))
    assert status == 0 and out.strip().endswith("3 item(s)")
    assert ping in out and late_done not in out


def _quarantine(stack: Stack, delivery_id: str, digest: str, at: int = NOW) -> None:
    stored = stack.stored(delivery_id)["body_sha256"]["S"]
    record = QuarantineRecord(delivery_id, "package.received", stored, digest, at, at + 86400)
    DynamoDbInbox(stack.target.dynamodb, stack.target.table_name).quarantine(record)


# --- quarantine ---------------------------------------------------------------------


def test_quarantine_list_and_show(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = stack.accept(), stack.accept()
    _quarantine(stack, second, "cd" * 32, at=NOW + 9)
    _quarantine(stack, first, "ef" * 32, at=NOW + 3)
    _quarantine(stack, first, "01" * 32, at=NOW + 7)

    status, out, _ = run_cli(capsys, stack.cli("quarantine", "list", "--json"))
    assert status == 0
    records = json.loads(out)["records"]
    assert [(r["delivery_id"], r["received_sha256"]) for r in records] == [
        (first, "ef" * 32),
        (first, "01" * 32),
        (second, "cd" * 32),
    ]
    assert records[0]["stored_sha256"] == stack.stored(first)["body_sha256"]["S"]
    assert set(records[0]) == {
        "delivery_id",
        "event",
        "stored_sha256",
        "received_sha256",
        "quarantined_at",
    }
    status, out, _ = run_cli(capsys, stack.cli("quarantine", "show", first, "--json"))
    assert status == 0
    assert [r["quarantined_at"] for r in json.loads(out)["records"]] == [NOW + 3, NOW + 7]
    status, _, err = run_cli(capsys, stack.cli("quarantine", "show", str(uuid.uuid4())))
    assert status == 1 and "no quarantine record" in err


# --- redrive --------------------------------------------------------------------------


def _work(delivery_id: str) -> str:
    return WorkItem(delivery_id, "package.received", "pkg_TEST", MCP).to_json()


def test_redrive_moves_failed_work_back_and_resets_the_state(stack: Stack) -> None:
    failed = [stack.accept() for _ in range(3)]
    for delivery_id in failed:
        stack.finish(delivery_id, State.FAILED, attempts=5)
        stack.dead_letter(_work(delivery_id))
    done = stack.accept()
    stack.finish(done, State.COMPLETED)
    stack.dead_letter(_work(done))
    stack.dead_letter("not a work item")

    report = redrive(stack.target, now=NOW + 100)
    assert report.moved == 3
    assert report.count(RedriveOutcome.ALREADY_DONE) == 1
    assert report.count(RedriveOutcome.MALFORMED) == 1
    assert sorted(stack.drain(stack.target.work_queue_url)) == sorted(_work(d) for d in failed)
    for delivery_id in failed:
        item = dynamodb_items.inbox_from_item(stack.stored(delivery_id))
        assert (item.state, item.attempts, item.state_changed_at) == (State.PENDING, 0, NOW + 100)
        assert item.last_error == "mcp_unavailable"  # kept until the next attempt
    pending = {i.delivery_id for i in list_inbox(stack.target, state=State.PENDING)}
    assert pending == set(failed)  # the index lists them under their new state
    # A worker can claim a redriven delivery with a full budget again.
    attempt = stack.claims.claim(failed[0], owner="w", now=NOW + 200, lease_seconds=60)
    assert attempt.claim is not None and attempt.claim.attempts == 1
    # Only the malformed letter stays, visible again for a person to look at.
    assert stack.drain(stack.target.dead_letter_queue_url) == ["not a work item"]


def test_redrive_of_a_workers_letter_reopens_only_the_failure_it_was_sent_for(
    stack: Stack,
) -> None:
    current, old = stack.accept(), stack.accept()
    for delivery_id in (current, old):
        stack.finish(delivery_id, State.FAILED)  # failed by the claim of owner "w0"
    stack.dead_letter(_work(current), failure="w0")
    # Sent for an earlier failure; the delivery was requeued and failed again since.
    stack.dead_letter(_work(old), failure="an-earlier-attempt")

    preview = redrive(stack.target, now=NOW + 100, dry_run=True)
    assert sorted(preview.outcomes) == sorted(
        [(current, RedriveOutcome.MOVED), (old, RedriveOutcome.SUPERSEDED)]
    )
    report = redrive(stack.target, now=NOW + 100)
    assert sorted(report.outcomes) == sorted(
        [(current, RedriveOutcome.MOVED), (old, RedriveOutcome.SUPERSEDED)]
    )
    assert stack.drain(stack.target.work_queue_url) == [_work(current)]
    assert stack.stored(current)["state"]["S"] == "pending"
    assert stack.stored(old)["state"]["S"] == "failed"
    assert stack.drain(stack.target.dead_letter_queue_url) == []  # both letters handled


def test_redrive_is_idempotent_when_rerun(stack: Stack) -> None:
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.FAILED, attempts=5)
    stack.dead_letter(_work(delivery_id))
    # An interrupted earlier run: the reset happened, the send and the delete did not.
    assert reset_failed(stack.target, delivery_id, now=NOW + 1)
    assert not reset_failed(stack.target, delivery_id, now=NOW + 2)
    first = redrive(stack.target, now=NOW + 3)
    assert first.outcomes == [(delivery_id, RedriveOutcome.MOVED)]
    second = redrive(stack.target, now=NOW + 4)
    assert second.outcomes == []
    assert stack.drain(stack.target.work_queue_url) == [_work(delivery_id)]
    assert stack.stored(delivery_id)["state"]["S"] == "pending"


def test_redrive_cli_honours_max(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(5):
        delivery_id = stack.accept()
        stack.finish(delivery_id, State.FAILED)
        stack.dead_letter(_work(delivery_id))
    status, out, _ = run_cli(capsys, stack.cli("redrive", "--max", "2", "--json"))
    assert status == 0
    document = json.loads(out)
    assert document["moved"] == 2 and len(document["messages"]) == 2
    assert len(stack.drain(stack.target.work_queue_url)) == 2
    status, out, _ = run_cli(capsys, stack.cli("redrive"))
    assert status == 0 and out.startswith("moved 3 dead letter(s)")
    assert stack.drain(stack.target.dead_letter_queue_url) == []


# --- requeue --------------------------------------------------------------------------


def test_requeue_gives_a_failed_delivery_a_new_work_item(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.FAILED, attempts=3)
    status, out, _ = run_cli(capsys, stack.cli("requeue", delivery_id, "--json"))
    assert status == 0
    assert json.loads(out) == {
        "delivery_id": delivery_id,
        "outcome": "requeued",
        "previous_state": "failed",
        "reason": None,
    }
    assert stack.drain(stack.target.work_queue_url) == [_work(delivery_id)]
    stored = stack.stored(delivery_id)
    assert (stored["state"]["S"], stored["attempts"]["N"]) == ("pending", "0")
    assert stored[table_layout.STATE_INDEX_PARTITION_KEY]["S"].startswith(
        f"{table_layout.STATE_LABEL_OPEN}#"
    )
    # Run again (e.g. the send seemed to fail): a second work item, still pending.
    result = requeue(stack.target, delivery_id, now=NOW)
    assert result.outcome is RequeueOutcome.RESENT
    assert stack.drain(stack.target.work_queue_url) == [_work(delivery_id)]


@pytest.mark.parametrize("state", [State.COMPLETED, State.PROCESSING, State.IGNORED])
def test_requeue_refuses_what_is_not_failed(
    stack: Stack, capsys: pytest.CaptureFixture[str], state: State
) -> None:
    delivery_id = stack.accept(package=state is not State.IGNORED)
    if state is State.COMPLETED:
        stack.finish(delivery_id, State.COMPLETED)
    elif state is State.PROCESSING:
        stack.claims.claim(delivery_id, owner="w", now=NOW, lease_seconds=600)
    stack.drain(stack.target.work_queue_url)
    before = stack.stored(delivery_id)
    status, out, err = run_cli(capsys, stack.cli("requeue", delivery_id))
    assert status == 1 and out == ""
    assert delivery_id in err
    assert stack.stored(delivery_id) == before
    assert stack.drain(stack.target.work_queue_url) == []


def test_requeue_unknown_id_exits_1(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_cli(capsys, stack.cli("requeue", str(uuid.uuid4())))
    assert status == 1 and "no such delivery" in err


def test_requeue_refusal_reason_for_completed(stack: Stack) -> None:
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.COMPLETED)
    result = requeue(stack.target, delivery_id, now=NOW)
    assert result.outcome is RequeueOutcome.REFUSED
    assert result.state == "completed" and "completed" in (result.reason or "")


def test_requeue_and_redrive_refuse_an_expired_delivery(stack: Stack) -> None:
    # Past its TTL (accept: a day) its effect records may be deleted already: a retry
    # could apply a done effect again, so nothing reopens it.
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.FAILED, attempts=5)
    stack.dead_letter(_work(delivery_id))
    expired = NOW + 86400
    result = requeue(stack.target, delivery_id, now=expired)
    assert result.outcome is RequeueOutcome.REFUSED and "expired" in (result.reason or "")
    assert not reset_failed(stack.target, delivery_id, now=expired)
    assert redrive(stack.target, now=expired, dry_run=True).outcomes == [
        (delivery_id, RedriveOutcome.EXPIRED)
    ]
    report = redrive(stack.target, now=expired)
    assert report.outcomes == [(delivery_id, RedriveOutcome.EXPIRED)]
    assert stack.drain(stack.target.work_queue_url) == []  # no work item sent
    assert stack.drain(stack.target.dead_letter_queue_url) == []  # the letter is dropped
    assert stack.stored(delivery_id)["state"]["S"] == "failed"


# --- targets --------------------------------------------------------------------------


def test_commands_need_a_target(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RELAYLINK_STACK", raising=False)
    status, _, err = run_cli(capsys, ["inbox", "list"])
    assert status == 2 and "--stack NAME" in err
    status, _, err = run_cli(capsys, ["redrive", "--local", str(tmp_path / "nope.json")])
    assert status == 2 and "is `relaylink-receiver local` running?" in err
    (tmp_path / "bad.json").write_text("{}")
    status, _, err = run_cli(capsys, ["quarantine", "list", "--local", str(tmp_path / "bad.json")])
    assert status == 2 and "not a local stack state file" in err


def test_an_aws_error_is_one_line_exit_2(
    stack: Stack, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = LocalState.read(stack.state_file)
    missing = replace(state, resources=replace(state.resources, table_name="no-such-table"))
    missing.write(tmp_path / "missing.json")
    status, out, err = run_cli(
        capsys, ["inbox", "show", str(uuid.uuid4()), "--local", str(tmp_path / "missing.json")]
    )
    assert status == 2 and out == ""
    assert "ResourceNotFoundException" in err and len(err.strip().splitlines()) == 1


def test_stack_target_reads_the_cloudformation_outputs(
    stack: Stack, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--stack: names from the stack's outputs (moto answers as CloudFormation would)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    outputs = {
        "TableName": stack.target.table_name,
        "WorkQueueUrl": stack.target.work_queue_url,
        "WorkDeadLetterQueueUrl": stack.target.dead_letter_queue_url,
    }
    name = f"receiver-{uuid.uuid4().hex[:8]}"
    _create_stack(moto_endpoint, name, outputs)
    target = Target.from_stack(name, region="us-east-1")
    assert (target.table_name, target.work_queue_url, target.dead_letter_queue_url) == (
        stack.target.table_name,
        stack.target.work_queue_url,
        stack.target.dead_letter_queue_url,
    )
    delivery_id = stack.accept()
    item = show_inbox(target, delivery_id)
    assert item is not None and item.state is State.PENDING

    del outputs["WorkQueueUrl"]
    _create_stack(moto_endpoint, name + "-old", outputs)
    with pytest.raises(OperatorError, match="lacks the outputs WorkQueueUrl"):
        Target.from_stack(name + "-old", region="us-east-1")
    with pytest.raises(OperatorError, match="cannot describe stack nope"):
        Target.from_stack("nope", region="us-east-1")


def _create_stack(endpoint: str, name: str, outputs: dict[str, str]) -> None:
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, region_name="us-east-1")
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))
