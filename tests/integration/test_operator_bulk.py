"""Bulk requeue and redrive (ops.bulk and the CLI) against moto's server on loopback.

Every listing goes through the by_state index: the AWS calls are counted through
botocore's hooks, and no test may see a Scan.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.models import State, WorkItem
from local.testkit.aws_calls import AwsCalls
from ops import bulk
from ops.commands import bulk_options
from ops.commands.output import iso
from ops.requeue import requeue
from ops.target import Target
from tests.operator_harness import MCP, NOW, Stack, run_cli


def _fail(stack: Stack, *, at: int = NOW + 1, code: str = "mcp_unavailable") -> str:
    """A new delivery that failed at ``at`` with ``code`` (claimed and failed as a worker)."""
    delivery_id = stack.accept(received_at=at - 1)
    claim = stack.claims.claim(delivery_id, owner="w", now=at - 1, lease_seconds=0).claim
    stack.claims.fail(claim, now=at, error_code=code)
    return delivery_id


def _work(delivery_id: str) -> str:
    return WorkItem(delivery_id, "package.received", "pkg_TEST", MCP).to_json()


def _states(stack: Stack, ids: list[str]) -> dict[str, str]:
    return {d: stack.stored(d)["state"]["S"] for d in ids}


@pytest.fixture
def calls(stack: Stack) -> AwsCalls:
    """The AWS calls of the stack's target (its DynamoDB and SQS clients)."""
    watched = AwsCalls()
    watched.watch(stack.target.dynamodb, stack.target.sqs)
    return watched


def _no_scan(calls: AwsCalls) -> None:
    assert calls.count("dynamodb") > 0  # the hooks do see the calls
    assert not any(op.startswith("Scanx") for op in calls.operations("dynamodb"))


# --- requeue --state failed ---------------------------------------------------------------


def test_dry_run_changes_nothing_and_counts_what_would(stack: Stack, calls: AwsCalls) -> None:
    failed = [_fail(stack) for _ in range(3)]
    done = stack.accept()
    stack.finish(done, State.COMPLETED)
    stack.drain(stack.target.work_queue_url)
    before = {d: stack.stored(d) for d in [*failed, done]}

    result = bulk.requeue_matching(stack.target, now=NOW + 100, dry_run=True)

    assert (result.dry_run, result.matched, result.changed, result.unchanged) == (True, 3, 3, 0)
    assert sorted(result.changed_ids) == sorted(failed)
    assert {d: stack.stored(d) for d in before} == before
    assert stack.drain(stack.target.work_queue_url) == []
    _no_scan(calls)


def test_requeue_then_rerun_changes_nothing_more(stack: Stack, calls: AwsCalls) -> None:
    failed = [_fail(stack) for _ in range(4)]
    stack.drain(stack.target.work_queue_url)

    preview = bulk.requeue_matching(stack.target, now=NOW + 100, dry_run=True)
    first = bulk.requeue_matching(stack.target, now=NOW + 100, dry_run=False)
    assert (preview.matched, preview.changed) == (first.matched, first.changed) == (4, 4)
    assert first.not_changed == {}
    assert sorted(stack.drain(stack.target.work_queue_url)) == sorted(_work(d) for d in failed)
    for delivery_id in failed:
        item = dynamodb_items.inbox_from_item(stack.stored(delivery_id))
        assert (item.state, item.attempts, item.state_changed_at) == (State.PENDING, 0, NOW + 100)
        assert item.last_error == "mcp_unavailable"  # kept until the next attempt

    second = bulk.requeue_matching(stack.target, now=NOW + 200, dry_run=False)
    assert (second.matched, second.changed, second.unchanged) == (0, 0, 0)
    assert stack.drain(stack.target.work_queue_url) == []
    assert set(_states(stack, failed).values()) == {"pending"}
    _no_scan(calls)


def test_what_failed_again_after_a_requeue_in_the_window_is_not_requeued_again(
    stack: Stack, calls: AwsCalls
) -> None:
    # A cause that outlasts the requeue: every requeued delivery fails again.
    failed = [_fail(stack, at=NOW + 10) for _ in range(3)]
    first = bulk.requeue_matching(stack.target, now=NOW + 100, since=NOW, dry_run=False)
    assert (first.matched, first.changed) == (3, 3)
    for delivery_id in failed:
        claim = stack.claims.claim(delivery_id, owner="w2", now=NOW + 110, lease_seconds=0).claim
        stack.claims.fail(claim, now=NOW + 120, error_code="package_not_found")
    stack.drain(stack.target.work_queue_url)
    requeued = dynamodb_items.inbox_from_item(stack.stored(failed[0]))
    assert (requeued.state, requeued.requeued_at) == (State.FAILED, NOW + 100)

    # The same command again (its window still begins before the requeue): nothing.
    for dry_run in (True, False):
        again = bulk.requeue_matching(stack.target, now=NOW + 200, since=NOW, dry_run=dry_run)
        assert (again.matched, again.changed) == (3, 0)
        assert again.not_changed == {"requeued_in_window": 3}
    assert stack.drain(stack.target.work_queue_url) == []
    assert set(_states(stack, failed).values()) == {"failed"}
    # Without a window, a delivery an operator ever requeued is left alone too.
    open_ended = bulk.requeue_matching(stack.target, now=NOW + 200, dry_run=False)
    assert (open_ended.changed, open_ended.not_changed) == (0, {"requeued_in_window": 3})

    # A window that begins after that requeue takes them again, once.
    later = bulk.requeue_matching(stack.target, now=NOW + 300, since=NOW + 101, dry_run=False)
    assert (later.matched, later.changed, later.not_changed) == (3, 3, {})
    assert sorted(stack.drain(stack.target.work_queue_url)) == sorted(_work(d) for d in failed)
    _no_scan(calls)


@dataclass(frozen=True, slots=True)
class _StaleIndex(Target):
    """A target whose index answers with a listing taken earlier (as a lagging GSI may)."""

    snapshot: tuple[dynamodb_items.Item, ...] = ()

    def state_index(self, label: str, **_: int | None) -> Iterator[dynamodb_items.Item]:
        return iter(self.snapshot)


def test_what_changed_since_the_listing_is_counted_by_reason_never_overwritten(
    stack: Stack,
) -> None:
    requeued, finished, gone, still = (_fail(stack) for _ in range(4))
    snapshot = tuple(stack.target.state_index(State.FAILED.value))
    assert len(snapshot) == 4
    assert requeue(stack.target, requeued, now=NOW + 50).outcome.value == "requeued"
    # Completed by a worker after an earlier requeue: never reopened by a stale listing.
    requeue(stack.target, finished, now=NOW + 50)
    claim = stack.claims.claim(finished, owner="w2", now=NOW + 51, lease_seconds=60).claim
    stack.claims.complete(claim, now=NOW + 52)
    stack.target.dynamodb.delete_item(
        TableName=stack.target.table_name, Key=dynamodb_items.inbox_key(gone)
    )
    stack.drain(stack.target.work_queue_url)
    stale = _StaleIndex(
        **{f: getattr(stack.target, f) for f in _target_fields()}, snapshot=snapshot
    )

    result = bulk.requeue_matching(stale, now=NOW + 100, dry_run=False)

    assert (result.matched, result.changed, result.changed_ids) == (4, 1, [still])
    assert result.not_changed == {"already_requeued": 1, "state_moved": 1, "missing": 1}
    assert result.not_changed_ids == {
        "already_requeued": [requeued],
        "state_moved": [finished],
        "missing": [gone],
    }
    assert stack.stored(finished)["state"]["S"] == "completed"
    assert stack.drain(stack.target.work_queue_url) == [_work(still)]


def _target_fields() -> list[str]:
    return [f for f in Target.__dataclass_fields__]


def test_a_filter_by_reason_and_window_touches_exactly_the_right_items(
    stack: Stack, calls: AwsCalls
) -> None:
    since, until = NOW + 100, NOW + 200
    inside = _fail(stack, at=NOW + 150, code="mcp_unavailable")
    at_since = _fail(stack, at=since, code="mcp_unavailable")  # the window includes since
    other_reason = _fail(stack, at=NOW + 150, code="package_not_found")
    before = _fail(stack, at=NOW + 99, code="mcp_unavailable")
    at_until = _fail(stack, at=until, code="mcp_unavailable")  # ... and excludes until
    later = _fail(stack, at=NOW + 300, code="mcp_unavailable")
    stack.drain(stack.target.work_queue_url)
    everyone = [inside, at_since, other_reason, before, at_until, later]

    result = bulk.requeue_matching(
        stack.target,
        now=NOW + 400,
        reason="mcp_unavailable",
        since=since,
        until=until,
        dry_run=False,
    )

    assert sorted(result.changed_ids) == sorted([inside, at_since])
    assert (result.matched, result.changed) == (2, 2)
    assert result.filters == {
        "state": "failed",
        "reason": "mcp_unavailable",
        "since": since,
        "until": until,
    }
    assert _states(stack, everyone) == {
        inside: "pending",
        at_since: "pending",
        other_reason: "failed",
        before: "failed",
        at_until: "failed",
        later: "failed",
    }
    assert sorted(stack.drain(stack.target.work_queue_url)) == sorted(
        [_work(inside), _work(at_since)]
    )
    # An open end: everything that failed since NOW + 150, whatever the reason.
    rest = bulk.requeue_matching(stack.target, now=NOW + 400, since=NOW + 150, dry_run=True)
    assert sorted(rest.changed_ids) == sorted([other_reason, at_until, later])
    # Ends the wrong way round: an empty window, not a DynamoDB validation error.
    empty = bulk.requeue_matching(stack.target, now=NOW + 400, since=until, until=since)
    assert (empty.matched, empty.changed) == (0, 0)
    _no_scan(calls)


def test_the_listing_pages_through_the_index(stack: Stack, calls: AwsCalls) -> None:
    failed = [_fail(stack) for _ in range(12)]
    stack.drain(stack.target.work_queue_url)
    calls.reset()

    result = bulk.requeue_matching(stack.target, now=NOW + 100, dry_run=False, page_size=1)

    assert result.changed == 12 and sorted(result.changed_ids) == sorted(failed)
    # One item a page: a page per item at least, and more pages than the index has
    # shards (12 items over 8 shards: some shard has two, so two pages or more).
    queries = calls.calls[("dynamodb", "Query")]
    assert queries >= 12 > table_layout.STATE_INDEX_SHARDS
    assert calls.calls[("sqs", "SendMessageBatch")] == 2  # 10 then 2 work items
    _no_scan(calls)


def test_more_than_the_limit_needs_yes(stack: Stack) -> None:
    failed = [_fail(stack) for _ in range(5)]
    stack.drain(stack.target.work_queue_url)
    before = {d: stack.stored(d) for d in failed}

    with pytest.raises(bulk.BulkLimitExceeded, match="--yes") as refused:
        bulk.requeue_matching(stack.target, now=NOW + 100, limit=4, dry_run=False)
    assert (refused.value.matched, refused.value.limit) == (5, 4)
    assert {d: stack.stored(d) for d in failed} == before
    preview = bulk.requeue_matching(stack.target, now=NOW + 100, limit=4, dry_run=True)
    assert preview.needs_yes and preview.changed == 5
    assert stack.drain(stack.target.work_queue_url) == []

    done = bulk.requeue_matching(stack.target, now=NOW + 100, limit=4, yes=True, dry_run=False)
    assert (done.changed, done.needs_yes) == (5, False)
    assert set(_states(stack, failed).values()) == {"pending"}


def test_ids_are_bounded_and_counts_are_whole(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "LISTED_IDS", 2)
    for _ in range(3):
        _fail(stack)
    document = bulk.requeue_matching(stack.target, now=NOW + 100, dry_run=True).to_dict()
    assert document["changed"] == 3 and len(document["changed_ids"]) == 2
    assert document["ids_truncated"] is True


# --- the CLI: requeue --state failed ---------------------------------------------------------


def test_cli_dry_run_then_run_then_rerun(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    # The CLI's clock is the real one: these failed within the last hour.
    now = int(time.time())
    recent = [_fail(stack, at=now - 600) for _ in range(3)]
    old = _fail(stack, at=now - 7200)
    stack.drain(stack.target.work_queue_url)
    argv = ["requeue", "--state", "failed", "--since", "1h"]

    status, out, _ = run_cli(capsys, stack.cli(*argv, "--dry-run", "--json"))
    assert status == 0
    preview = json.loads(out)
    assert out == json.dumps(preview, indent=2, sort_keys=True) + "\n"
    assert (preview["dry_run"], preview["matched"], preview["changed"]) == (True, 3, 3)
    assert _states(stack, [*recent, old]) == dict.fromkeys([*recent, old], "failed")

    status, out, _ = run_cli(capsys, stack.cli(*argv))
    assert status == 0
    lines = [line.split() for line in out.splitlines()]
    assert lines[0][:3] == ["matched", "3", "(since"]
    assert lines[0][3] in {f"{iso(now - 3600 + s)})" for s in range(60)}  # the CLI's now
    assert lines[1:] == [["requeued", "3"], ["unchanged", "0"]]
    assert _states(stack, [*recent, old]) == {**dict.fromkeys(recent, "pending"), old: "failed"}

    status, out, _ = run_cli(capsys, stack.cli(*argv, "--json"))
    assert status == 0
    again = json.loads(out)
    assert (again["matched"], again["changed"], again["unchanged"]) == (0, 0, 0)
    assert len(stack.drain(stack.target.work_queue_url)) == 3


def test_cli_over_the_limit_exits_2_naming_yes(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = [_fail(stack) for _ in range(3)]
    argv = ["requeue", "--state", "failed", "--limit", "2"]
    status, out, err = run_cli(capsys, stack.cli(*argv))
    assert status == 2 and out == ""
    assert "3 item(s) match, more than the 2" in err and "--yes" in err
    assert set(_states(stack, failed).values()) == {"failed"}
    status, out, _ = run_cli(capsys, stack.cli(*argv, "--dry-run"))
    assert status == 0 and "needs --yes" in out
    status, out, _ = run_cli(capsys, stack.cli(*argv, "--yes"))
    assert status == 0 and ["requeued", "3"] in [line.split() for line in out.splitlines()]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["requeue"], "name one DELIVERY_ID, or --state failed"),
        (["requeue", "some-id", "--state", "failed"], "name one DELIVERY_ID"),
        (["requeue", "some-id", "--since", "1h"], "--since go(es) with --state"),
        (["requeue", "some-id", "--dry-run"], "--dry-run go(es) with --state"),
        (["requeue", "--state", "failed", "--since", "yesterday"], "--since: 'yesterday' is not"),
        (["requeue", "--state", "failed", "--limit", "0"], "--limit must be at least 1"),
        (["redrive", "--all", "--max", "3"], "--max goes without --all"),
        (["redrive", "some-id", "--all"], "DELIVERY_ID goes without --all"),
    ],
)
def test_cli_refuses_mixed_or_bad_options(
    stack: Stack, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    delivery_id = _fail(stack)
    status, out, err = run_cli(capsys, stack.cli(*argv))
    assert status == 2 and out == ""
    assert message in err
    assert stack.stored(delivery_id)["state"]["S"] == "failed"


def test_the_clis_default_limit_is_the_apis() -> None:
    assert bulk_options.DEFAULT_LIMIT == bulk.DEFAULT_LIMIT


# --- redrive --all -----------------------------------------------------------------------


def test_redrive_all_dry_run_keeps_every_letter_then_moves_them_once(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = [_fail(stack) for _ in range(3)]
    done = stack.accept()
    stack.finish(done, State.COMPLETED)
    for delivery_id in [*failed, done]:
        stack.dead_letter(_work(delivery_id))
    stack.dead_letter("not a work item")
    stack.drain(stack.target.work_queue_url)

    status, out, _ = run_cli(capsys, stack.cli("redrive", "--all", "--dry-run", "--json"))
    assert status == 0
    preview = json.loads(out)
    assert (preview["matched"], preview["changed"]) == (5, 3)
    assert preview["not_changed"] == {"already_done": 1, "malformed": 1}
    assert set(_states(stack, failed).values()) == {"failed"}
    assert stack.drain(stack.target.work_queue_url) == []
    assert bulk.redrive_all(stack.target, now=NOW + 100).matched == 5  # all still there

    result = bulk.redrive_all(stack.target, now=NOW + 100, dry_run=False)
    assert (result.matched, result.changed) == (preview["matched"], preview["changed"])
    assert sorted(result.changed_ids) == sorted(failed)
    assert set(_states(stack, failed).values()) == {"pending"}
    assert sorted(stack.drain(stack.target.work_queue_url)) == sorted(_work(d) for d in failed)

    status, out, _ = run_cli(capsys, stack.cli("redrive", "--all"))
    assert status == 0
    assert [line.split() for line in out.splitlines()] == [
        ["matched", "1"],
        ["redriven", "0"],
        ["unchanged", "1"],
        ["malformed", "1"],  # the malformed letter stays for a person to look at
    ]
    assert stack.drain(stack.target.work_queue_url) == []


def test_redrive_all_over_the_limit_needs_yes(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = [_fail(stack) for _ in range(3)]
    for delivery_id in failed:
        stack.dead_letter(_work(delivery_id))
    status, _, err = run_cli(capsys, stack.cli("redrive", "--all", "--limit", "2"))
    assert status == 2 and "--yes" in err
    assert set(_states(stack, failed).values()) == {"failed"}
    status, out, _ = run_cli(capsys, stack.cli("redrive", "--all", "--limit", "2", "--yes"))
    assert status == 0 and ["redriven", "3"] in [line.split() for line in out.splitlines()]
    assert stack.drain(stack.target.dead_letter_queue_url) == []


def test_redrive_one_delivery_leaves_the_other_letters(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    wanted, other = _fail(stack), _fail(stack)
    for body in (_work(other), _work(wanted), "not a work item", _work(wanted)):
        stack.dead_letter(body)
    stack.drain(stack.target.work_queue_url)

    status, out, _ = run_cli(capsys, stack.cli("redrive", wanted, "--json"))
    assert status == 0
    document = json.loads(out)
    assert document["messages"] == [
        {"delivery_id": wanted, "outcome": "moved"},
        {"delivery_id": wanted, "outcome": "moved"},  # a second letter: resent, harmless
    ]
    assert _states(stack, [wanted, other]) == {wanted: "pending", other: "failed"}
    assert stack.drain(stack.target.work_queue_url) == [_work(wanted)] * 2
    assert sorted(stack.drain(stack.target.dead_letter_queue_url)) == sorted(
        [_work(other), "not a work item"]
    )
    status, _, err = run_cli(capsys, stack.cli("redrive", wanted))
    assert status == 1 and f"no dead letter for {wanted}" in err
