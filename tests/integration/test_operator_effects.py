"""Effects in doubt through the operator commands: list, resolve, then requeue and continue.

Records are written by the worker's own ledger and step store (or by the worker's
Processor itself), on moto's server, and the CLI reads them through a state file
(:mod:`tests.operator_harness`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from functions.core.adapters.dynamodb_package_record import DynamoDbPackageRecords
from functions.core.adapters.dynamodb_steps import DynamoDbSteps
from functions.core.effects import idempotency_key
from functions.core.errors import TransientError
from functions.core.models import State, WorkItem
from functions.core.package import Package
from functions.core.package_record import PackageStorage
from functions.core.ports.effects import EffectStatus
from functions.core.ports.steps import StoredResult
from functions.core.ports.workflow import Ledger
from functions.core.process import Decision, Disposition, ProcessConfig, Processor, Result
from local.mcp_server import demo_package
from local.testkit.clock import FakeClock
from ops.effects import Doubt, ResolveOutcome, list_effects, resolve_effect
from ops.inbox import show_progress
from tests.fakes import FakeMetrics
from tests.operator_harness import MCP, Stack, run_cli

HOUR = 3600


def intend(stack: Stack, delivery_id: str, name: str, *, at: int) -> None:
    effects = stack.target.effects()
    key = idempotency_key(delivery_id, name)
    assert effects.record_intent(delivery_id, name, key=key, now=at, expires_at=at + 86400)


def flag(stack: Stack, delivery_id: str, name: str, *, at: int) -> None:
    effects = stack.target.effects()
    record = effects.get(delivery_id, name)
    assert record is not None and effects.flag(record, now=at)


def listed(out: str) -> list[tuple[str, str, str]]:
    document = json.loads(out)
    assert document["count"] == len(document["effects"])
    return [(e["delivery_id"], e["effect"], e["doubt"]) for e in document["effects"]]


def one_line(err: str) -> str:
    """The one stderr line a refusal prints (never a traceback)."""
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    return line


# --- effects list ----------------------------------------------------------------------


def test_effects_list_finds_intents_not_done_or_cleared_effects(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time())
    stale, flagged, fresh, done, cleared = (stack.accept() for _ in range(5))
    intend(stack, stale, "notify", at=now - 2 * HOUR)
    intend(stack, flagged, "alert", at=now - 3 * HOUR)
    flag(stack, flagged, "alert", at=now - HOUR)
    intend(stack, fresh, "notify", at=now - 10)
    intend(stack, done, "notify", at=now - 4 * HOUR)
    stack.target.effects().record_done(done, "notify", now=now - 4 * HOUR)
    intend(stack, cleared, "notify", at=now - 4 * HOUR)
    assert stack.target.effects().resolve_not_applied(cleared, "notify", now=now)

    status, out, _ = run_cli(capsys, stack.cli("effects", "list", "--json"))
    assert status == 0
    assert listed(out) == [
        (flagged, "alert", "flagged"),
        (stale, "notify", "stale"),
        (fresh, "notify", "in_flight"),
    ]
    first = json.loads(out)["effects"][0]
    assert first == {
        "delivery_id": flagged,
        "effect": "alert",
        "idempotency_key": f"{flagged}:alert",
        "intent_at": now - 3 * HOUR,
        "flagged_at": now - HOUR,
        "doubt": "flagged",
    }
    assert list(first) == sorted(first)  # sorted keys

    status, out, _ = run_cli(capsys, stack.cli("effects", "list", "--uncertain", "--json"))
    assert status == 0
    assert listed(out) == [(flagged, "alert", "flagged"), (stale, "notify", "stale")]
    # A shorter age than the reconciler's makes the older intent uncertain too.
    status, out, _ = run_cli(
        capsys, stack.cli("effects", "list", "--uncertain", "--older-than", "5", "--json")
    )
    assert [d for d, _, _ in listed(out)] == [flagged, stale, fresh]

    status, out, _ = run_cli(capsys, stack.cli("effects", "list"))
    assert status == 0
    assert out.strip().endswith("3 effect(s) in doubt")
    # Every column starts where its header does, whatever the effect names' lengths.
    header, _rule, *rows, _count = out.splitlines()
    starts = [header.index(name) for name in ("doubt", "effect ", "idempotency_key")]
    for row in rows:
        assert [row[start - 2 : start] for start in starts] == ["  "] * 3
        assert row[starts[-1]] != " " and row[starts[1]] != " "
    assert f"{stale}:notify" in out and done not in out and cleared not in out
    status, out, err = run_cli(capsys, stack.cli("effects", "list", "--older-than", "-1"))
    assert (status, out) == (2, "")
    assert one_line(err) == (
        "relaylink-receiver effects: error: bad_option: --older-than must not be negative"
    )


def test_effects_list_doubt_follows_the_reconciler_age(stack: Stack) -> None:
    delivery_id = stack.accept()
    intend(stack, delivery_id, "notify", at=1000)
    (effect,) = list_effects(stack.target, now=1000 + HOUR, effect_age_seconds=HOUR)
    assert effect.doubt is Doubt.IN_FLIGHT  # not older than the age: a worker may hold it
    assert (
        list_effects(stack.target, now=1000 + HOUR, effect_age_seconds=HOUR, uncertain_only=True)
        == []
    )
    (effect,) = list_effects(stack.target, now=1001 + HOUR, effect_age_seconds=HOUR)
    assert effect.doubt is Doubt.STALE


# --- effects resolve -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("finding", "status", "message"),
    [
        ("--applied", EffectStatus.DONE, "already done (applied)"),
        ("--not-applied", EffectStatus.NOT_APPLIED, "already cleared as not applied"),
    ],
)
def test_effects_resolve_changes_the_record_once(
    stack: Stack,
    capsys: pytest.CaptureFixture[str],
    finding: str,
    status: EffectStatus,
    message: str,
) -> None:
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.FAILED)
    intend(stack, delivery_id, "notify", at=int(time.time()) - 2 * HOUR)
    other = stack.accept()
    intend(stack, other, "notify", at=int(time.time()) - 2 * HOUR)

    code, out, err = run_cli(
        capsys, stack.cli("effects", "resolve", delivery_id, "notify", finding)
    )
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"{delivery_id} notify: {finding.removeprefix('--').replace('-', '_')}",
        f"continue it with: relaylink-receiver requeue {delivery_id}",
    ]
    record = stack.target.effects().get(delivery_id, "notify")
    assert record is not None and record.status is status
    _, out, _ = run_cli(capsys, stack.cli("effects", "list", "--json"))
    assert listed(out) == [(other, "notify", "stale")]  # gone from the index, the other stays

    before = stack.target.effects().get(delivery_id, "notify")
    for again in ("--applied", "--not-applied"):
        code, out, err = run_cli(
            capsys, stack.cli("effects", "resolve", delivery_id, "notify", again)
        )
        assert (code, out) == (1, "")
        assert one_line(err) == (
            f"effects resolve: {delivery_id} notify: not in doubt: {message}"
            + (" (the next attempt applies it)" if status is EffectStatus.NOT_APPLIED else "")
        )
    assert stack.target.effects().get(delivery_id, "notify") == before


def test_effects_resolve_refuses_what_is_not_in_doubt_or_held(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    code, out, err = run_cli(
        capsys, stack.cli("effects", "resolve", delivery_id, "notify", "--applied", "--json")
    )
    assert code == 1
    assert json.loads(out) == {
        "delivery_id": delivery_id,
        "effect": "notify",
        "outcome": "not_in_doubt",
        "delivery_state": "pending",
        "reason": "not in doubt: no effect notify recorded for this delivery",
    }
    assert "no effect notify recorded" in one_line(err)

    # While a worker holds the delivery it may be applying the effect right now.
    intend(stack, delivery_id, "notify", at=int(time.time()))
    stack.claims.claim(delivery_id, owner="w", now=int(time.time()), lease_seconds=600)
    code, out, err = run_cli(
        capsys, stack.cli("effects", "resolve", delivery_id, "notify", "--not-applied")
    )
    assert (code, out) == (1, "")
    assert "a worker is processing the delivery now" in one_line(err)
    record = stack.target.effects().get(delivery_id, "notify")
    assert record is not None and record.status is EffectStatus.INTENT

    with pytest.raises(SystemExit) as usage:  # one of the two findings is required
        run_cli(capsys, stack.cli("effects", "resolve", delivery_id, "notify"))
    assert usage.value.code == 2
    assert "one of the arguments --applied --not-applied is required" in capsys.readouterr().err


# --- requeue after a resolution --------------------------------------------------------


@dataclass
class ArchiveThenNotify:
    """Archives, then notifies; the first ``lost_notifications`` notify calls time out
    after sending (the outcome is unknown), as a dropped response would."""

    lost_notifications: int = 1
    calls: list[str] = field(default_factory=list)

    def run(self, work: WorkItem, package: Any, effects: Ledger) -> None:
        effects.run("archive", self.calls.append)
        effects.run("notify", self._notify)

    def _notify(self, key: str) -> None:
        self.calls.append(key)
        if self.lost_notifications:
            self.lost_notifications -= 1
            raise TransientError("notify_timeout")


class OnePackage:
    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        return Package.from_mapping(demo_package(package_id))


@pytest.mark.parametrize("finding", ["--applied", "--not-applied"])
def test_requeue_after_resolution_runs_only_the_effect_not_applied(
    stack: Stack, capsys: pytest.CaptureFixture[str], finding: str
) -> None:
    delivery_id = stack.accept()
    work = WorkItem(delivery_id, "package.received", "pkg_TEST", MCP)
    workflow = ArchiveThenNotify()
    clock = FakeClock(int(time.time()) - 2 * HOUR)  # old enough for the reconciler's age
    processor = Processor(
        claims=stack.claims,
        effects=stack.target.effects(),
        workflow=workflow,
        clock=clock,
        metrics=FakeMetrics(),
        config=ProcessConfig(max_attempts=5, lease_seconds=60),
        packages=PackageStorage(
            DynamoDbPackageRecords(client=stack.target.dynamodb, table_name=stack.target.table_name)
        ),
    )

    def attempt() -> Decision:
        clock.advance(120)
        return asyncio.run(processor.process(work, OnePackage()))

    assert attempt().result is Result.RETRYING  # the notification timed out
    assert attempt() == Decision(Result.UNCERTAIN, Disposition.ACK, 0, "uncertain_effect")
    archive, notify = (idempotency_key(delivery_id, n) for n in ("archive", "notify"))
    assert workflow.calls == [archive, notify]
    _, out, _ = run_cli(capsys, stack.cli("effects", "list", "--uncertain", "--json"))
    assert listed(out) == [(delivery_id, "notify", "stale")]

    code, _, _ = run_cli(capsys, stack.cli("effects", "resolve", delivery_id, "notify", finding))
    assert code == 0
    code, _, _ = run_cli(capsys, stack.cli("requeue", delivery_id))
    assert code == 0
    (message,) = stack.drain(stack.target.work_queue_url)
    assert WorkItem.from_json(message) == work
    assert attempt() == Decision(Result.COMPLETED, Disposition.ACK)

    rerun = [notify] if finding == "--not-applied" else []
    assert workflow.calls == [archive, notify, *rerun]  # archive was done: skipped
    progress = show_progress(stack.target, delivery_id)
    assert [(e.name, e.status) for e in progress.effects] == [
        ("archive", EffectStatus.DONE),
        ("notify", EffectStatus.DONE),
    ]
    assert stack.claims.get(delivery_id).state is State.COMPLETED
    assert (
        resolve_effect(
            stack.target, delivery_id, "notify", applied=False, now=int(time.time())
        ).outcome
        is ResolveOutcome.NOT_IN_DOUBT
    )


# --- inbox show: steps and effects -----------------------------------------------------


def test_inbox_show_lists_steps_and_effects_but_no_step_result(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    at = int(time.time()) - HOUR
    steps = DynamoDbSteps(client=stack.target.dynamodb, table_name=stack.target.table_name)
    steps.start(delivery_id, "model", now=at, expires_at=at + 86400)
    summary = json.dumps({"summary": "confidential briefing " + uuid.uuid4().hex})
    steps.record_result(
        delivery_id,
        "model",
        result=StoredResult(size=len(summary), inline=summary),
        now=at + 5,
    )
    steps.start(delivery_id, "lookup", now=at + 1, expires_at=at + 86400)
    intend(stack, delivery_id, "archive", at=at + 6)
    stack.target.effects().record_done(delivery_id, "archive", now=at + 7)
    intend(stack, delivery_id, "alert", at=at + 8)
    flag(stack, delivery_id, "alert", at=at + 9)

    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id, "--json"))
    assert status == 0
    assert "confidential briefing" not in out
    shown = json.loads(out)
    assert shown["state"] == "pending"
    assert shown["steps"] == [
        {
            "name": "model",
            "status": "recorded",
            "runs": 1,
            "started_at": at,
            "recorded_at": at + 5,
            "result_size": len(summary),
            "result_sha256": None,
        },
        {
            "name": "lookup",
            "status": "started",
            "runs": 1,
            "started_at": at + 1,
            "recorded_at": None,
            "result_size": None,
            "result_sha256": None,
        },
    ]
    assert shown["effects"] == [
        {
            "name": "archive",
            "status": "done",
            "idempotency_key": f"{delivery_id}:archive",
            "intent_at": at + 6,
            "done_at": at + 7,
            "flagged_at": None,
        },
        {
            "name": "alert",
            "status": "intent",
            "idempotency_key": f"{delivery_id}:alert",
            "intent_at": at + 8,
            "done_at": None,
            "flagged_at": at + 9,
        },
    ]

    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert status == 0 and "confidential briefing" not in out
    lines = {line.split("  ", 1)[0].strip(): line for line in out.splitlines()}
    assert f"result {len(summary)} bytes" in lines["step model"]
    assert "started" in lines["step lookup"]
    assert lines["effect archive"].split()[2] == "done,"
    assert f"key {delivery_id}:alert" in lines["effect alert"]
    assert "flagged" in lines["effect alert"]
