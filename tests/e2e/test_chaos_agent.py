"""The fault-injection run with the agent workflow: Bedrock emulated, alerts over SNS.

Every alert reaches the topic's subscriber at most once, none is lost, and each shows
the recorded model result; the model step runs again only for a run a worker kill
interrupted (started, not recorded), at most once per such run.
"""

from __future__ import annotations

import pytest

from local.chaos.config import ChaosConfig
from local.chaos.run import run_chaos

pytestmark = pytest.mark.e2e

SMALL_AGENT = ChaosConfig(
    deliveries=30, kills=2, seed=5, workflow="agent", bedrock_latency_ms=300, deadline_seconds=120
)


def test_chaos_agent_run_loses_and_duplicates_no_alert_and_reruns_only_after_kills() -> None:
    report = run_chaos(SMALL_AGENT)

    assert report.violations == []
    alerts = report.effects["alert"]
    assert alerts["lost"] == 0 and alerts["duplicated"] == 0
    assert alerts["text_not_recorded"] == 0
    missing = report.deliveries.missing_package
    assert alerts["applied"] + alerts["in_doubt"] == 30 - missing
    model = report.model
    assert model["kills_in_window"] <= 2
    assert model["reruns"] <= model["steps_interrupted"]
    assert model["reruns_unattributed"] == 0
    # Every call that reached Bedrock is counted in its delivery's spend record (a call
    # killed just before sending is counted too: the record never counts fewer).
    assert model["calls_uncounted"] == 0
    assert model["calls_counted"] >= model["calls"]
    # A kill in the window interrupted at least one run; a batch can hold several.
    assert model["kills_in_window"] <= model["steps_interrupted"]
    # Every delivery with a package met the model at least once (and only those).
    assert model["deliveries_called"] == 30 - missing
    assert report.kills["worker"].survived == 2


SMALL_AGENT_WITH_TOOLS = ChaosConfig(
    deliveries=30,
    kills=3,
    seed=7,
    workflow="agent",
    bedrock_latency_ms=200,
    deadline_seconds=180,
    tools=True,
)


def test_chaos_agent_with_tools_acts_once_per_tool_use_and_alerts_once() -> None:
    """Each delivery: a lookup, then a ticket (mode none) POSTed to the notification
    target, then the summary; the worker is killed during the run, tool windows included."""
    report = run_chaos(SMALL_AGENT_WITH_TOOLS)

    assert report.violations == []
    missing = report.deliveries.missing_package
    alerts = report.effects["alert"]
    assert alerts["lost"] == 0 and alerts["duplicated"] == 0
    assert alerts["text_not_recorded"] == 0
    tickets = report.effects["tool open_ticket"]
    assert tickets["duplicated"] == 0
    # A ticket whose worker died after the POST waits in doubt (its alert with it);
    # every other delivery with a package opened one ticket and sent one alert.
    assert tickets["applied"] + tickets["in_doubt"] >= 30 - missing - alerts["in_doubt"]
    assert alerts["applied"] + alerts["in_doubt"] == 30 - missing
    assert report.model["calls_uncounted"] == 0
    # Three model turns per alerted delivery (two asking for tools, one answering), two
    # at least for one stopped in doubt (at its ticket, or at its alert).
    assert report.model["calls"] >= 3 * alerts["applied"] + 2 * alerts["in_doubt"]
