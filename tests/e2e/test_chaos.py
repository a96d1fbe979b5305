"""The fault-injection run in a small configuration: every fault kind on, every check.

``make chaos`` and docs/reliability.md run the same code with more deliveries and
kills; this one runs on every ``make test`` and takes seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local.chaos.config import ChaosConfig
from local.chaos.run import run_chaos
from ops import cli

pytestmark = pytest.mark.e2e

# Rates higher than the defaults, so that forty deliveries meet every fault kind.
SMALL = ChaosConfig(
    deliveries=40,
    kills=2,
    seed=3,
    mcp_failure_rate=0.15,
    mcp_slow_rate=0.1,
    aws_fault_rate=0.05,
    relay_failure_rate=0.25,
    deadline_seconds=120,
)


def test_chaos_small_run_breaks_no_invariant_while_every_fault_is_injected() -> None:
    report = run_chaos(SMALL)

    assert report.violations == []
    figures = report.figures
    assert figures["kills"] == {
        "front_door": {"sent": 2, "survived": 2},
        "worker": {"sent": 2, "survived": 2},
    }
    faults = figures["faults"]
    assert set(faults) == {
        "dynamodb_throttling",
        "dynamodb_internal_error",
        "mcp_unavailable",
        "mcp_slow",
        "relay_failure",
    }
    assert all(count > 0 for count in faults.values()), faults
    deliveries = figures["deliveries"]
    assert deliveries["genuine"] == 40
    assert min(deliveries[k] for k in ("conflicting", "forged", "replayed")) >= 1
    assert deliveries["missing_package"] >= 1 and deliveries["shared_packages"] >= 1
    assert deliveries["duplicated_by_sender"] >= 1
    # The figures agree with each other, not only with the empty violation list.
    outcomes = figures["outcomes"]
    assert outcomes == {
        "completed": 40 - deliveries["missing_package"],
        "failed": deliveries["missing_package"],
    }
    assert figures["effects_applied"] == outcomes["completed"]
    assert figures["quarantined"] == deliveries["conflicting"]
    assert (figures["lost"], figures["duplicated"], figures["stored_forged_or_replayed"]) == (
        0,
        0,
        0,
    )
    assert figures["answers"]["forged"] == {"401": deliveries["forged"]}
    assert figures["answers"]["conflicting"] == {"409": deliveries["conflicting"]}


def test_chaos_command_rejects_an_impossible_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = cli.main(["chaos", "--deliveries", "3"])

    assert status == 2
    assert "deliveries must be at least 10" in capsys.readouterr().err


def test_chaos_command_prints_the_table_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_file = tmp_path / "report.json"
    # Faults off and no kills: this checks the command's wiring, the run above the rest.
    quiet_run = ["--mcp-failure-rate", "0", "--mcp-slow-rate", "0", "--aws-fault-rate", "0"]
    arguments = ["chaos", "--deliveries", "12", "--kills", "0", "--seed", "5", *quiet_run]

    status = cli.main([*arguments, "--relay-failure-rate", "0", "--report", str(report_file)])

    report = json.loads(report_file.read_text())
    assert status == 0
    assert report["passed"] is True and report["violations"] == []
    assert (report["config"]["deliveries"], report["config"]["seed"]) == (12, 5)
    assert report["deliveries"]["genuine"] == 12
    assert sum(report["faults"].values()) == 0
    table = capsys.readouterr().out
    assert "PASSED: no violation" in table
    assert "effects applied" in table


def test_chaos_kills_the_worker_once_at_a_named_point_and_breaks_no_invariant() -> None:
    """``--kill-worker after:effect:notify``: after a notification's POST, before its done
    record; the next attempt looks the key up (mode checked) and posts nothing again."""
    config = ChaosConfig(deliveries=10, kills=0, seed=3, kill_worker="after:effect:notify")
    report = run_chaos(config)
    assert report.passed, report.violations
    assert report.kill_point["point"] == "after:effect:notify"
    assert report.kill_point["killed_pid"]
    assert report.effects["notify"]["duplicated"] == 0
