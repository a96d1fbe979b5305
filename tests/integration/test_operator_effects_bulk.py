"""``effects resolve --all``: many effects in doubt settled at once, bounded like bulk requeue."""

from __future__ import annotations

import json
import time

import pytest

from functions.core.models import State
from functions.core.ports.effects import EffectStatus
from ops import effects as ops_effects
from ops.bulk import BulkLimitExceeded
from ops.effects import ResolveOutcome
from tests.integration.test_operator_effects import HOUR, flag, intend
from tests.operator_harness import Stack, run_cli


def failed_in_doubt(stack: Stack, name: str, *, at: int) -> str:
    """A failed delivery whose effect ``name`` is in doubt since ``at``, flagged."""
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.FAILED)
    intend(stack, delivery_id, name, at=at)
    flag(stack, delivery_id, name, at=at + 60)
    return delivery_id


def status_of(stack: Stack, delivery_id: str, name: str) -> EffectStatus | None:
    record = stack.target.effects().get(delivery_id, name)
    return None if record is None else record.status


def test_resolve_all_dry_run_lists_one_line_per_match_and_changes_nothing(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time())
    old = [failed_in_doubt(stack, "alert.http", at=now - 5 * HOUR) for _ in range(2)]
    recent = failed_in_doubt(stack, "alert.http", at=now - 2 * HOUR)
    other_effect = failed_in_doubt(stack, "notify", at=now - 5 * HOUR)
    in_flight = stack.accept()
    intend(stack, in_flight, "alert.http", at=now - 10)  # a worker may be applying it

    argv = ["effects", "resolve", "--all", "--effect", "alert.http", "--until", "3h"]
    status, out, err = run_cli(capsys, stack.cli(*argv, "--not-applied", "--dry-run"))
    assert (status, err) == (0, "")
    lines = out.splitlines()
    listed = [line.split()[0] for line in lines if line.split()[1:2] == ["alert.http"]]
    assert sorted(listed) == sorted(old)
    assert "dry run: nothing was changed" in lines
    assert ["would", "resolve", "as", "not", "applied", "2"] in [line.split() for line in lines]
    for delivery_id in (*old, recent, in_flight):
        assert status_of(stack, delivery_id, "alert.http") is EffectStatus.INTENT
    assert status_of(stack, other_effect, "notify") is EffectStatus.INTENT


def test_resolve_all_settles_every_match_once(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time())
    matched = [failed_in_doubt(stack, "alert.http", at=now - 5 * HOUR) for _ in range(3)]
    notify = failed_in_doubt(stack, "notify", at=now - 5 * HOUR)

    argv = ["effects", "resolve", "--all", "--effect", "alert.http", "--applied", "--json"]
    status, out, _ = run_cli(capsys, stack.cli(*argv))
    document = json.loads(out)
    assert status == 0
    assert (document["operation"], document["matched"], document["changed"]) == ("resolve", 3, 3)
    assert sorted(document["changed_ids"]) == sorted(matched)
    assert document["filters"]["finding"] == "applied"
    assert {status_of(stack, d, "alert.http") for d in matched} == {EffectStatus.DONE}
    assert status_of(stack, notify, "notify") is EffectStatus.INTENT  # not named: untouched

    status, out, _ = run_cli(capsys, stack.cli(*argv))
    assert (status, json.loads(out)["matched"], json.loads(out)["changed"]) == (0, 0, 0)


def test_resolve_all_counts_a_held_delivery_and_leaves_it(stack: Stack) -> None:
    now = int(time.time())
    free = failed_in_doubt(stack, "notify", at=now - 5 * HOUR)
    held = stack.accept()
    intend(stack, held, "notify", at=now - 5 * HOUR)
    stack.claims.claim(held, owner="w", now=now, lease_seconds=600)

    preview, _ = ops_effects.resolve_matching(
        stack.target, applied=False, now=now, effect_age_seconds=HOUR
    )
    assert (preview.dry_run, preview.changed) == (True, 1)
    assert preview.not_changed == {ResolveOutcome.REFUSED.value: 1}
    result, matched = ops_effects.resolve_matching(
        stack.target, applied=False, now=now, effect_age_seconds=HOUR, dry_run=False
    )
    assert len(matched) == 2
    assert (result.changed_ids, result.not_changed_ids) == ([free], {"refused": [held]})
    assert status_of(stack, free, "notify") is EffectStatus.NOT_APPLIED
    assert status_of(stack, held, "notify") is EffectStatus.INTENT


def test_resolve_all_over_the_limit_needs_yes(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time())
    matched = [failed_in_doubt(stack, "notify", at=now - 5 * HOUR) for _ in range(3)]
    with pytest.raises(BulkLimitExceeded, match="--yes"):
        ops_effects.resolve_matching(
            stack.target, applied=True, now=now, effect_age_seconds=HOUR, limit=2, dry_run=False
        )
    argv = ["effects", "resolve", "--all", "--applied", "--limit", "2"]
    status, out, err = run_cli(capsys, stack.cli(*argv))
    assert status == 2 and out == ""
    assert "3 item(s) match, more than the 2 one resolve may touch" in err and "--yes" in err
    assert {status_of(stack, d, "notify") for d in matched} == {EffectStatus.INTENT}
    status, out, _ = run_cli(capsys, stack.cli(*argv, "--dry-run"))
    assert status == 0 and "needs --yes" in out
    status, out, _ = run_cli(capsys, stack.cli(*argv, "--yes"))
    assert status == 0
    assert ["resolved", "applied", "3"] in [line.split() for line in out.splitlines()]
    assert {status_of(stack, d, "notify") for d in matched} == {EffectStatus.DONE}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["effects", "resolve", "--applied"], "name DELIVERY_ID and EFFECT, or --all"),
        (["effects", "resolve", "some-id", "--applied"], "name DELIVERY_ID and EFFECT"),
        (["effects", "resolve", "some-id", "notify", "--all", "--applied"], "--all resolves"),
        (
            ["effects", "resolve", "some-id", "notify", "--applied", "--since", "1h"],
            "--since go(es) with --all",
        ),
        (
            ["effects", "resolve", "some-id", "notify", "--applied", "--dry-run"],
            "--dry-run go(es) with --all",
        ),
        (["effects", "resolve", "--all", "--applied", "--since", "soon"], "--since: 'soon'"),
        (["effects", "resolve", "--all", "--applied", "--limit", "0"], "--limit must be"),
    ],
)
def test_resolve_refuses_mixed_or_bad_options(
    stack: Stack, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = run_cli(capsys, stack.cli(*argv))
    assert status == 2 and out == ""
    assert message in err
    assert "Traceback" not in err
