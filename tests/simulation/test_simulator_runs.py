"""The simulator's longer runs: the same transcript under another hash seed (new
processes), and every fault kind injected over a few dozen seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from local.simulate.campaign import simulate
from local.simulate.report import REQUIRED_FAULTS
from local.simulate.run import run_seed

pytestmark = pytest.mark.simulation
ROOT = Path(__file__).resolve().parents[2]


def test_simulate_transcript_does_not_depend_on_hash_randomisation() -> None:
    code = "from local.simulate.run import run_seed;print(run_seed('notify', 5).transcript)"
    transcripts = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for hash_seed in ("1", "2")
    }

    assert len(transcripts) == 1
    assert transcripts == {run_seed("notify", 5).transcript + "\n"}


def test_simulate_injects_every_fault_kind() -> None:
    summary = simulate(["notify", "agent"], seeds=60, shrink_limit=0)
    faults = summary.to_dict()["faults"]
    injected = Counter({key: value for key, value in faults.items() if value})

    for key in (
        *REQUIRED_FAULTS,
        "errors",
        "sdk_retries",
        "timeouts",
        "slow_calls",
        "acted_then_failed",
        "far_side_refused",
        "far_side_rejected",
        "far_side_unavailable",
        "far_sides_without_dedup",
        "days_passed",
        "operator_visits",
        "budget_limits",
    ):
        assert injected[key] > 0, key
