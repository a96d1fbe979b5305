"""The simulated agent's approvals and packages: the person's decisions as drawn, and the
invariants one_package, what_ran_is_approved and decision_once catching what they name."""

from __future__ import annotations

from functions.core import table_layout
from functions.core.models import State
from functions.workflows.agent import ALERT_EFFECT, ALERT_HTTP_EFFECT
from functions.workflows.tool_loop import tool_record_name
from local.simulate.approvals import Choice
from local.simulate.far_side import TICKET_USE_ID
from local.simulate.faults import Fault, Kind
from local.simulate.invariants import check
from local.simulate.run import Simulation
from local.simulate.world import TABLE_NAME

HOUR = 3600


def _with_approvals(choice: Choice | None, *, seed: int = 3, tools: bool = False) -> Simulation:
    """A seed without faults but the approval (2 h), the acting tool if ``tools``, and
    each decision as ``choice`` (None: nobody decides)."""
    replay = [Fault("config.approval", 1, Kind.APPROVAL, 2 * HOUR)]
    if tools:
        replay.append(Fault("config.tools", 1, Kind.TOOLS, 1))
    if choice is not None:
        replay += [
            Fault("config.decision", call, Kind.DECISION, choice * 10_000 + 5_000)
            for call in range(1, 20)
        ]
    simulation = Simulation("agent", seed, replay=replay)
    simulation.run()
    return simulation


def _alerts(simulation: Simulation) -> int:
    far = simulation.world.far
    return sum(len(far[n].received) for n in (ALERT_EFFECT, ALERT_HTTP_EFFECT) if n in far)


def _names(simulation: Simulation) -> list[str]:
    return sorted({v.split(":")[0] for v in check(simulation)})


def test_simulate_approved_alerts_go_out_once_approved() -> None:
    simulation = _with_approvals(Choice.APPROVE)

    states = {i.state for i in simulation.world.inbox.values()}
    assert states == {State.COMPLETED}
    assert _alerts(simulation) >= len(simulation.world.inbox)
    assert check(simulation) == []


def test_simulate_refused_decisions_send_nothing_and_the_timeout_ends_them() -> None:
    for choice in (Choice.DENY, Choice.LATE, Choice.OTHER, None):
        simulation = _with_approvals(choice)

        errors = {i.last_error for i in simulation.world.inbox.values()}
        assert {i.state for i in simulation.world.inbox.values()} == {State.FAILED}
        assert errors == {"approval_denied" if choice is Choice.DENY else "approval_expired"}
        assert _alerts(simulation) == 0
        assert check(simulation) == []


def test_simulate_an_alert_nobody_approved_is_found() -> None:
    simulation = _with_approvals(Choice.APPROVE)
    delivery_id = sorted(simulation.world.inbox)[0]

    side = simulation.world.far_side(ALERT_HTTP_EFFECT)
    side.received.append((f"{delivery_id}:alert", '{"summary":"not what was approved"}'))

    assert _names(simulation) == ["what_ran_is_approved"]


def test_simulate_a_decision_changed_once_set_is_found() -> None:
    simulation = _with_approvals(Choice.DENY)
    delivery_id = sorted(simulation.world.inbox)[0]

    simulation.world.dynamodb.update_item(
        TableName=TABLE_NAME,
        Key={
            table_layout.TABLE_PARTITION_KEY: {"S": delivery_id},
            table_layout.TABLE_SORT_KEY: {"S": table_layout.SK_APPROVAL_PREFIX + "alert"},
        },
        UpdateExpression="SET decision = :approved",
        ExpressionAttributeValues={":approved": {"S": "approved"}},
    )

    assert _names(simulation) == ["decision_once"]


def test_simulate_a_workflow_run_on_two_packages_is_found() -> None:
    simulation = Simulation("agent", 3, replay=[])
    simulation.run()
    delivery_id = sorted(simulation.world.inbox)[0]

    simulation.world.history.packages[delivery_id].add("another digest")

    assert _names(simulation) == ["one_package"]


def test_simulate_an_acting_tool_acts_once_approved_and_never_denied() -> None:
    ticket = tool_record_name(TICKET_USE_ID)
    approved = _with_approvals(Choice.APPROVE, tools=True)
    denied = _with_approvals(Choice.DENY, tools=True)

    assert len(approved.world.far[ticket].received) == len(approved.world.inbox)
    assert check(approved) == []
    assert ticket not in denied.world.far or not denied.world.far[ticket].received
    assert check(denied) == []


def test_simulate_a_tool_call_nobody_approved_is_found() -> None:
    simulation = _with_approvals(Choice.APPROVE, tools=True)
    delivery_id = sorted(simulation.world.inbox)[0]

    side = simulation.world.far_side(tool_record_name(TICKET_USE_ID))
    side.received.append((f"{delivery_id}:tool:{TICKET_USE_ID}", '{"about":"something else"}'))

    assert _names(simulation) == ["what_ran_is_approved"]
