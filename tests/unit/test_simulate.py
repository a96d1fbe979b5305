"""The simulator itself: deterministic, each fault kind really injected, invariants that
catch what they name, a shrinker that keeps what matters, and its command line."""

from __future__ import annotations

import contextvars
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import pytest

from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters.dynamodb_conditions import condition_expression
from functions.core.adapters.dynamodb_items import inbox_key, inbox_to_item
from functions.core.adapters.dynamodb_steps import step_key
from functions.core.claim import ITEM_EXPIRED, ClaimStatus
from functions.core.models import InboxItem, State
from functions.core.ports.steps import StoredResult
from local.simulate.faults import Fault, Killed, Kind
from local.simulate.history import StateWritten, transition_of
from local.simulate.invariants import check
from local.simulate.report import REQUIRED_FAULTS
from local.simulate.run import Simulation, run_seed
from local.simulate.schedule import Schedule
from local.simulate.shrink import ddmin
from local.simulate.world import TABLE_NAME, Budget, Claims, Steps, World
from ops.cli import main


def _calm(workflow: str, seed: int = 3) -> Simulation:
    """A seed replayed without a single fault: every delivery completes once."""
    simulation = Simulation(workflow, seed, replay=[])
    simulation.run()
    return simulation


def test_simulate_same_seed_same_transcript() -> None:
    first = run_seed("agent", 11)
    second = run_seed("agent", 11)

    assert first.transcript == second.transcript
    assert first == second
    assert run_seed("agent", 12).transcript != first.transcript


def test_simulate_replay_of_the_whole_schedule_is_the_same_run() -> None:
    live = run_seed("notify", 21)

    replayed = run_seed("notify", 21, replay=live.faults)

    assert live.faults
    assert replayed.transcript == live.transcript


def test_simulate_without_faults_completes_every_delivery_once() -> None:
    for workflow in ("archive", "notify", "agent"):
        simulation = _calm(workflow)
        world = simulation.world

        assert check(simulation) == []
        assert world.truth.accepted and world.truth.accepted <= world.truth.terminal
        assert {item.state.value for item in world.inbox.values()} == {"completed"}
        for name, side in world.far.items():
            if name not in ("mcp", "model", "archive"):
                assert set(side.applied.values()) == {1}, name


def test_simulate_injects_outages_and_skews_as_configuration_faults() -> None:
    kinds = Counter(
        fault.kind for seed in range(200) for fault in Simulation("archive", seed).schedule.injected
    )

    assert kinds[Kind.OUTAGE] > 0
    assert kinds[Kind.CLOCK_SKEW] > 0
    assert kinds[Kind.DAYS_PASS] > 0


def test_invariants_catch_a_planted_double_effect() -> None:
    simulation = _calm("notify")
    side = simulation.world.far["notify"]
    key = sorted(side.applied)[0]
    side.applied[key] += 1

    assert check(simulation) == [f"effect_once: {key}: notify applied 2 times"]


def test_invariants_allow_a_repeatable_effect_twice() -> None:
    simulation = _calm("notify")  # its archive put is repeatable
    side = simulation.world.far["archive"]
    side.applied[sorted(side.applied)[0]] += 1

    assert check(simulation) == []


def test_invariants_catch_a_completed_delivery_that_lost_its_package() -> None:
    simulation = _calm("archive")
    world = simulation.world
    delivery_id = sorted(world.truth.accepted)[0]
    world.dynamodb.update_item(
        TableName=TABLE_NAME,
        Key=inbox_key(delivery_id),
        UpdateExpression="REMOVE pkg_sha256, pkg_content",
    )

    assert [v.split(":")[0] for v in check(simulation)] == ["package_kept"]


def test_invariants_catch_an_unexplained_model_call() -> None:
    simulation = _calm("agent")
    delivery_id = sorted(simulation.world.truth.model_runs)[0]
    simulation.world.truth.model_runs[delivery_id] += 1

    assert [v.split(":")[0] for v in check(simulation)] == ["model_calls_explained"]


def test_invariants_catch_spending_the_budget_did_not_count() -> None:
    simulation = _calm("agent")
    day = sorted(simulation.world.truth.consumed)[0]
    simulation.world.truth.consumed[day] += simulation.world.budget_days[day].reserved

    assert [v.split(":")[0] for v in check(simulation)] == ["budget_within_limit"]


def test_invariants_catch_a_delivery_that_vanished_open() -> None:
    simulation = _calm("archive")
    delivery_id = sorted(simulation.world.truth.accepted)[0]
    simulation.world.truth.terminal.discard(delivery_id)
    simulation.world.truth.vanished[delivery_id] = "pending (budget_exhausted)"

    assert [v.split(":")[0] for v in check(simulation)] == ["terminal_or_waiting"]


def test_invariants_catch_an_applied_effect_cleared_as_not_applied() -> None:
    simulation = _calm("notify")
    world = simulation.world
    (delivery_id, name), record = sorted(
        (k, r) for k, r in world.effects.items() if k[1] == "notify"
    )[0]
    world.effects[(delivery_id, name)] = record.__class__(
        delivery_id, name, record.status.__class__("not_applied"), record.key, record.intent_at
    )

    assert [v.split(":")[0] for v in check(simulation)] == ["unknown_outcomes_visible"]


def test_ddmin_keeps_exactly_the_faults_that_matter() -> None:
    faults = [Fault(f"site.{n}", 1, Kind.ERROR) for n in range(9)]
    needed = {faults[2], faults[7]}

    def fails(subset: Sequence[Fault]) -> bool:
        return needed <= set(subset)

    assert ddmin(faults, fails, runs=100) == [faults[2], faults[7]]


def test_ddmin_stops_at_its_run_budget() -> None:
    faults = [Fault(f"site.{n}", 1, Kind.ERROR) for n in range(64)]
    calls = []

    def fails(subset: Sequence[Fault]) -> bool:
        calls.append(len(subset))
        return faults[5] in subset and faults[40] in subset

    ddmin(faults, fails, runs=5)

    assert len(calls) <= 5


def test_simulate_command_prints_the_summary_keys(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["simulate", "--workflow", "archive", "--seeds", "3", "--json"])
    summary = json.loads(capsys.readouterr().out)

    assert status == (0 if summary["violating_seeds"] == 0 else 1)
    assert summary["seeds"] == 3
    assert isinstance(summary["violations"], list)
    assert set(REQUIRED_FAULTS) <= set(summary["faults"])
    assert {"seconds", "seeds_per_second"} <= set(summary)


def test_simulate_command_refuses_a_bad_option(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["simulate", "--seeds", "0"])

    assert status == 2
    assert "bad_option: --seeds must be at least 1" in capsys.readouterr().err


def _world_with_item(expires_in: int = 7 * 24 * 3600) -> tuple[World, Claims]:
    """A world without faults holding one pending delivery ``d1``."""
    world = World(0, Schedule(0, replay=[]))
    now = world.now()
    _put(
        world,
        InboxItem("d1", "package.received", "sha", now, State.PENDING, expires_at=now + expires_in),
    )
    return world, Claims(world)


def _put(world: World, item: InboxItem) -> None:
    """Write ``item`` into the world's table, as it stands (no condition, no fault)."""
    world.dynamodb.put_item(TableName=TABLE_NAME, Item=inbox_to_item(item))


def _state(world: World) -> State:
    return world.inbox["d1"].state


def _failed(world: World, claims: Claims) -> str:
    """Claim ``d1`` and fail it; the failure's name (its claim owner)."""
    attempt = claims.claim("d1", owner=world.new_owner(), now=world.now(), lease_seconds=60)
    assert attempt.claim is not None
    claims.fail(attempt.claim, now=world.now(), error_code="boom")
    return attempt.claim.owner


def test_world_redrive_reopens_only_the_failure_its_mark_names() -> None:
    world, claims = _world_with_item()
    first = _failed(world, claims)
    assert claims.reopen("d1", now=world.now())  # an operator's requeue
    second = _failed(world, claims)

    assert not claims.reopen("d1", now=world.now(), failure=first)
    assert _state(world) is State.FAILED
    assert claims.reopen("d1", now=world.now(), failure=second)
    assert _state(world) is State.PENDING


def test_world_claim_refuses_a_lease_past_the_ttl_and_closes_the_item() -> None:
    world, claims = _world_with_item(expires_in=30)
    now = world.now()

    attempt = claims.claim("d1", owner=world.new_owner(), now=now, lease_seconds=60)

    assert attempt.status is ClaimStatus.EXPIRED
    assert not claims.close_expired("d1", now=now, lease_seconds=10)  # a lease would fit
    assert claims.close_expired("d1", now=now, lease_seconds=60)
    assert _state(world) is State.FAILED
    assert world.inbox["d1"].last_error == ITEM_EXPIRED


def test_world_give_back_returns_the_attempt_unrun() -> None:
    world, claims = _world_with_item()
    attempt = claims.claim("d1", owner=world.new_owner(), now=world.now(), lease_seconds=60)
    assert attempt.claim is not None

    claims.give_back(attempt.claim, now=world.now())

    assert _state(world) is State.PENDING
    assert world.inbox["d1"].attempts == 0


def test_world_budget_applies_each_reservation_and_settlement_once() -> None:
    world = World(0, Schedule(0, replay=[]))
    world.budget_limit = 100
    budget = Budget(world)

    assert budget.reserve("2026-01-01", 60, reservation_id="r1")
    assert budget.reserve("2026-01-01", 60, reservation_id="r1")  # resent: admitted once
    assert not budget.reserve("2026-01-01", 60, reservation_id="r2")
    budget.settle("2026-01-01", reservation_id="r1", reserved=60, used=10)
    budget.settle("2026-01-01", reservation_id="r1", reserved=60, used=10)  # resent
    assert budget.reserve("2026-01-01", 60, reservation_id="r3")
    budget.keep("2026-01-01", reservation_id="r3")

    day = budget.get("2026-01-01")
    assert (day.reserved, day.used, day.open_reservations) == (70, 10, 0)


def test_simulate_agent_seed_58_redrives_no_later_failure() -> None:
    # Before the world followed reset_dead_letter, this seed reported a mark of one
    # failure reopening a later one (the code under test already refused it).
    assert run_seed("agent", 58).violations == ()


def test_simulate_batch_mates_die_with_the_message_that_kills_the_invocation() -> None:
    # Seed 5's first batch holds three deliveries: the second one's archive request
    # kills the invocation while the third and fourth hold their claims.
    simulation = Simulation("agent", 5, replay=[Fault("far.archive", 2, Kind.KILL_BEFORE)])
    simulation.run()
    truth = simulation.world.truth

    assert sorted(truth.innocent_deaths.values()) == [1, 1]
    assert check(simulation) == []  # they run again, each with attempts to spare


def test_simulate_each_message_of_a_batch_writes_as_its_own_claim_owner() -> None:
    simulation = _calm("agent", seed=5)
    writers: dict[str, set[str | None]] = {}
    for (delivery_id, _name), owner in simulation.world.intent_writers.items():
        writers.setdefault(delivery_id, set()).add(owner)

    assert len(writers) == len(simulation.world.truth.accepted)
    assert all(len(owners) == 1 for owners in writers.values())
    assert len(set().union(*writers.values())) == len(writers)


def _exhausted(world: World, claims: Claims, *, innocent: int) -> list[str]:
    """``d1`` given up after six unexplained attempts, ``innocent`` of them lost to a
    batch-mate: what the world notes as given up for others' faults."""
    world.max_attempts, world.lost_attempts_allowed = 5, 2
    _put(world, replace(world.inbox["d1"], attempts=5))
    world.truth.innocent_deaths["d1"] = innocent
    attempt = claims.claim("d1", owner=world.new_owner(), now=world.now(), lease_seconds=60)
    assert attempt.claim is not None
    claims.fail(attempt.claim, now=world.now(), error_code="attempts_exhausted")
    return world.truth.innocent_failures


def test_world_notes_a_delivery_given_up_for_its_batch_mates_faults() -> None:
    assert _exhausted(*_world_with_item(), innocent=2) == []  # runs alone after two
    assert _exhausted(*_world_with_item(), innocent=3) == [
        "d1: 3 of its 5 unexplained attempts died while a batch-mate's step ran (at most 2 may)"
    ]


def test_invariants_catch_a_delivery_given_up_for_its_batch_mates_faults() -> None:
    simulation = _calm("archive")
    simulation.world.truth.innocent_failures.append("d1: 6 of its 6 unexplained attempts")

    assert [v.split(":")[0] for v in check(simulation)] == ["fails_for_its_own_faults"]


def test_world_charges_a_timeout_to_the_message_whose_step_took_the_time() -> None:
    world = World(0, Schedule(0, replay=[]))
    world.begin("worker", skew=0, seconds=180)
    slow, finder = contextvars.copy_context(), contextvars.copy_context()

    def step(delivery_id: str, seconds: float) -> None:
        world.new_owner()
        world.notes.delivery = delivery_id
        world.t += seconds

    slow.run(step, "slow", 200)  # a slow request: its client gives up, no call yet
    with pytest.raises(Killed):
        finder.run(lambda: world.call("ddb.release", lambda: None))

    assert world.inv.killer == "slow"


# --- the invariants on the mechanisms (the seed's history) -------------------------


def _first_claim(simulation: Simulation) -> StateWritten:
    return next(e for e in simulation.world.history.states if e.transition == "claim")


def _invariants(simulation: Simulation) -> list[str]:
    return [v.split(":")[0] for v in check(simulation)]


def test_history_of_a_calm_seed_claims_and_completes_each_delivery_once() -> None:
    simulation = _calm("notify")
    history = simulation.world.history
    for delivery_id in simulation.world.truth.accepted:
        moves = [e.transition for e in history.states if e.delivery_id == delivery_id]
        assert moves == ["accept", "claim", "complete_with_effects"]
    relayed = Counter(e.delivery_id for e in history.enqueued if e.role == "relay")
    assert set(relayed) == simulation.world.truth.accepted
    assert set(relayed.values()) == {1}
    assert {(d, n) for d, n in history.marked_done} == {
        (d, n) for d in simulation.world.truth.accepted for n in ("archive", "notify")
    }


def test_invariants_catch_a_second_live_holder() -> None:
    simulation = _calm("notify")
    claim = _first_claim(simulation)
    assert claim.now is not None and claim.lease_until is not None
    history = simulation.world.history
    at = history.states.index(claim) + 1
    history.states.insert(
        at, replace(claim, writer="owner-rival", now=claim.lease_until - 1, lease_until=0)
    )

    # The rival's claim while the lease lived; then the first owner's completion is
    # written by an owner that no longer holds it.
    assert _invariants(simulation) == ["one_live_holder", "holder_writes_outcome"]


def test_invariants_allow_a_claim_once_the_lease_ran_out() -> None:
    simulation = _calm("notify")
    claim = _first_claim(simulation)
    assert claim.lease_until is not None
    history = simulation.world.history
    at = history.states.index(claim) + 1
    rival = replace(claim, writer="owner-rival", now=claim.lease_until)
    history.states.insert(at, rival)
    completion = next(
        e for e in history.states[at + 1 :] if e.delivery_id == claim.delivery_id and e.writer
    )
    history.states[history.states.index(completion)] = replace(completion, writer="owner-rival")

    assert check(simulation) == []


def test_invariants_catch_an_outcome_written_by_another_worker() -> None:
    simulation = _calm("archive")
    history = simulation.world.history
    index, completion = next(
        (n, e) for n, e in enumerate(history.states) if e.to_state is State.COMPLETED
    )
    history.states[index] = replace(completion, writer="owner-stranger")

    assert _invariants(simulation) == ["holder_writes_outcome"]


def test_invariants_catch_a_state_move_off_the_transition_table() -> None:
    simulation = _calm("archive")
    history = simulation.world.history
    completion = next(e for e in history.states if e.to_state is State.COMPLETED)
    history.states.append(
        replace(completion, transition="reset_failed", from_state=State.COMPLETED, writer=None)
    )

    assert _invariants(simulation) == ["transitions_documented"]


def test_invariants_catch_an_effect_recorded_done_that_never_happened() -> None:
    simulation = _calm("notify")
    side = simulation.world.far["notify"]
    key = sorted(side.applied)[0]
    side.applied[key] = 0  # the far side never acted: done was written before it

    found = check(simulation)
    assert [v.split(":")[0] for v in found] == ["effect_applied"]
    assert "notify recorded done by the ledger, never applied" in found[0]


def test_invariants_catch_a_relay_answer_the_queue_does_not_back() -> None:
    simulation = _calm("archive")
    simulation.world.history.relay_lies.append("d1: reported sent, never reached the queue")

    assert _invariants(simulation) == ["relay_reaches_queue"]


def test_invariants_catch_a_resend_of_what_nothing_lost() -> None:
    simulation = _calm("archive")
    sends = simulation.world.history.reconciler_sends
    sends.append((simulation.world.t, "d1", "", 10.0, "0"))  # queued, changed 10 s ago
    sends.append((simulation.world.t, "d2", "its message was gone", 10.0, ""))
    sends.append((simulation.world.t, "d3", "", 3600.0, "40"))  # stale: the reconciler's rule

    assert _invariants(simulation) == ["reconciler_resends_only_lost"]


def test_other_bytes_under_a_known_id_end_quarantined() -> None:
    seeds = [
        s
        for s in range(60)
        if any(f.kind is Kind.OTHER_BYTES for f in run_seed("archive", s).faults)
    ]
    assert seeds
    simulation = Simulation("archive", seeds[0])
    simulation.run()

    assert check(simulation) == []
    assert simulation.world.history.other_bytes == []
    assert all(
        e.transition != "accept" or e.from_state is None for e in simulation.world.history.states
    )


def test_overlapping_attempts_are_staged_and_the_second_container_takes_over() -> None:
    for seed in range(100):
        simulation = Simulation("agent", seed)
        simulation.run()
        overlaps = simulation.world.history.overlaps
        if overlaps:
            break
    else:
        pytest.fail("no overlap in 100 agent seeds")
    delivery_id = sorted(overlaps)[0]
    owners = [
        e.writer
        for e in simulation.world.history.states
        if e.delivery_id == delivery_id and e.transition == "claim"
    ]

    assert check(simulation) == []
    assert len(set(owners)) >= 2  # the stalled attempt's and the other container's
    assert any(f.kind is Kind.OVERLAP for f in simulation.schedule.injected)


@pytest.mark.parametrize("row", transitions.TRANSITIONS, ids=lambda row: row.name)
def test_a_write_of_the_real_adapter_names_its_transition(row: transitions.Transition) -> None:
    values: dict[str, transitions.Value] = {}
    parts = f"{row.update_expression()} {condition_expression(row.condition)}"
    for name in sorted(set(re.findall(r":(\w+)", parts))):
        if name in ("now", "shard", "zero", "one") or name in {s.value for s in State}:
            continue
        values[name] = frozenset({"archive"}) if name == "effects" else "x"
    request = transitions.update_request("table", row, "d1", now=1, **values)

    assert transition_of(request["UpdateExpression"], request["ConditionExpression"]) == row.name


def test_world_notes_a_step_record_that_leaves_its_recorded_result() -> None:
    world = World(0, Schedule(0, replay=[]))
    steps = Steps(world)
    assert steps.start("d1", "model", now=1, expires_at=2_000_000_000) is None
    steps.record_result("d1", "model", result=StoredResult(size=1, inline="x"), now=2)
    again = steps.start("d1", "model", now=3, expires_at=2_000_000_000)  # refused

    assert again is not None
    assert world.history.step_restarts == []
    world.dynamodb.update_item(  # what a start without its condition would write
        TableName=TABLE_NAME,
        Key=step_key("d1", "model"),
        UpdateExpression="SET #status = :started",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={":started": {"S": "started"}},
    )
    assert world.history.step_restarts == [
        "d1 model: its recorded result was left for started (run 1)"
    ]
