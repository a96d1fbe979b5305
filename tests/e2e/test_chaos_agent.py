"""The fault-injection run with the agent workflow: Bedrock emulated, alerts over SNS.

Every alert reaches the topic's subscriber at most once and none is lost; the model
step runs again only when a worker kill landed while a model answer was unrecorded.
"""

from __future__ import annotations

import pytest

from local.chaos import ChaosConfig, run_chaos

pytestmark = pytest.mark.e2e

SMALL_AGENT = ChaosConfig(
    deliveries=30, kills=2, seed=5, workflow="agent", bedrock_latency_ms=300, deadline_seconds=120
)


def test_chaos_agent_run_loses_and_duplicates_no_alert_and_reruns_only_after_kills() -> None:
    report = run_chaos(SMALL_AGENT)

    assert report.violations == []
    alerts = report.effects["alert"]
    assert alerts["lost"] == 0 and alerts["duplicated"] == 0
    missing = report.deliveries.missing_package
    assert alerts["applied"] + alerts["in_doubt"] == 30 - missing
    model = report.model
    assert model["kills_in_window"] <= 2
    assert model["reruns"] == 0 or model["kills_in_window"] > 0
    # Every delivery with a package met the model at least once (and only those).
    assert model["deliveries_called"] == 30 - missing
    assert report.kills["worker"].survived == 2
