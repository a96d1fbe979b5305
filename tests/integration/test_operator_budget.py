"""The daily token budget through the operator commands (moto's server, a state file)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cli.state import LocalState
from functions.core.adapters.dynamodb_budget import DynamoDbBudget
from functions.core.budget import DAY_SECONDS, TokenBudget, budget_day
from ops.budget import set_budget, show_budget
from tests.operator_harness import NOW, Stack, run_cli


def worker_budget(stack: Stack, *, default_limit: int) -> TokenBudget:
    """The budget as a worker with ``daily_token_budget = default_limit`` sees it."""
    store = DynamoDbBudget(
        client=stack.target.dynamodb,
        table_name=stack.target.table_name,
        default_limit=default_limit,
    )
    return TokenBudget(store)


def test_budget_show_before_anything_set_or_spent(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    status = show_budget(stack.target, now=NOW)
    assert (status.day, status.limit, status.reserved, status.used) == (budget_day(NOW), None, 0, 0)
    code, out, _ = run_cli(capsys, stack.cli("budget", "show", "--json"))
    assert code == 0
    shown = json.loads(out)
    assert (shown["limit"], shown["remaining"], shown["reserved"], shown["used"]) == (
        None,
        None,
        0,
        0,
    )
    code, out, _ = run_cli(capsys, stack.cli("budget", "show"))
    assert code == 0
    assert "not set (the workflow's daily_token_budget setting)" in out


def test_budget_shows_what_the_workers_spent_and_the_limit_they_opened_the_day_with(
    stack: Stack,
) -> None:
    worker = worker_budget(stack, default_limit=1000)
    reservation = worker.require(300, NOW)
    worker.settle(reservation, 120)
    worker.require(200, NOW)  # still open: counted at its estimate
    status = show_budget(stack.target, now=NOW)
    assert (status.limit, status.reserved, status.used, status.remaining) == (1000, 320, 120, 680)
    assert status.open_reservations == 1
    assert status.to_dict()["open_reservations"] == 1
    # Another day is not opened yet: no limit the operator could know.
    assert show_budget(stack.target, now=NOW + DAY_SECONDS).limit is None


def test_budget_set_applies_today_and_later_days(stack: Stack) -> None:
    worker = worker_budget(stack, default_limit=1000)
    worker.require(900, NOW)
    status = set_budget(stack.target, 950, now=NOW)
    assert (status.limit, status.reserved, status.remaining) == (950, 900, 50)
    assert worker.reserve(100, NOW) is None  # over the new limit
    assert worker.reserve(50, NOW) is not None
    tomorrow = show_budget(stack.target, now=NOW + DAY_SECONDS)
    assert (tomorrow.limit, tomorrow.remaining) == (950, 950)
    set_budget(stack.target, 0, now=NOW + DAY_SECONDS)  # stops every model call
    assert worker.reserve(1, NOW + DAY_SECONDS) is None


def test_budget_set_cli(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, stack.cli("budget", "set", "5000", "--json"))
    assert (code, err) == (0, "")
    shown = json.loads(out)
    assert (shown["limit"], shown["remaining"]) == (5000, 5000)
    assert list(shown) == sorted(shown)
    code, out, _ = run_cli(capsys, stack.cli("budget", "show"))
    assert code == 0
    assert {line.split()[0]: line.split()[1] for line in out.splitlines()}["limit"] == "5000"

    code, out, err = run_cli(capsys, stack.cli("budget", "set", "-5"))
    assert (code, out) == (2, "")
    assert err.strip() == (
        "relaylink-receiver budget: error: bad_option: TOKENS must not be negative"
    )
    code, out, _ = run_cli(capsys, stack.cli("budget", "show", "--json"))
    assert json.loads(out)["limit"] == 5000


@pytest.mark.parametrize("workflow", ["archive", "notify"])
def test_budget_show_says_a_workflow_without_a_model_has_no_budget(
    stack: Stack, capsys: pytest.CaptureFixture[str], workflow: str
) -> None:
    state = replace(LocalState.read(stack.state_file), workflow=workflow)
    state.write(stack.state_file)
    code, out, err = run_cli(capsys, stack.cli("budget", "show"))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"workflow {workflow} calls no model: it has no model budget"
        " (the agent workflow, or your own that calls a model, has one)"
    ]
    code, out, _ = run_cli(capsys, stack.cli("budget", "show", "--json"))
    assert (code, json.loads(out)) == (0, {"model_budget": False, "workflow": workflow})


def test_budget_show_for_the_agent_shows_the_budget(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    replace(LocalState.read(stack.state_file), workflow="agent").write(stack.state_file)
    code, out, _ = run_cli(capsys, stack.cli("budget", "show", "--json"))
    assert code == 0
    assert json.loads(out)["limit"] is None
