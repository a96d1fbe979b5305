"""``relaylink-receiver budget show|set``: the daily token budget of the model calls."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from ops.commands.output import print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call

if TYPE_CHECKING:
    from ops.budget import BudgetStatus


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "budget",
        help="show today's token spend and limit, or set the daily limit",
        description=(
            "The agent workflow reserves tokens from a budget per UTC day before each"
            " model call; a delivery that finds the day spent waits for the next day."
            " For a workflow that calls no model (archive, notify), show says so in one"
            " line and exits 0."
        ),
    )
    actions = parser.add_subparsers(dest="budget_action", metavar="ACTION", required=True)

    show = actions.add_parser("show", help="today's (UTC) limit, reserved and used tokens")
    show.add_argument("--json", action="store_true", help="one JSON object")
    add_target_arguments(show)
    show.set_defaults(handler=run_show)

    change = actions.add_parser(
        "set",
        help="the daily token limit, from today (UTC) on",
        description=(
            "Set the daily token limit: it applies to today at once (tokens already"
            " reserved stay counted) and to every later day, over the workflow's"
            " daily_token_budget setting. 0 stops every model call."
        ),
    )
    change.add_argument(
        "tokens", type=int, metavar="TOKENS", help="the daily limit (model tokens; 0 stops calls)"
    )
    change.add_argument("--json", action="store_true", help="one JSON object (today, after)")
    add_target_arguments(change)
    change.set_defaults(handler=run_set)


def _print(status: BudgetStatus, *, as_json: bool) -> None:
    if as_json:
        print_json(status.to_dict())
        return
    limit = "not set (the workflow's daily_token_budget setting)"
    print(f"day        {status.day} (UTC)")
    print(f"limit      {limit if status.limit is None else status.limit}")
    print(f"reserved   {status.reserved}")
    print(f"used       {status.used}")
    print(f"remaining  {'-' if status.remaining is None else status.remaining}")
    print(f"open       {status.open_reservations} (reservations at their estimate)")


def run_show(args: argparse.Namespace) -> int:
    """Today's budget; for a workflow that calls no model, one line that says so (exit 0:
    the answer is complete, not an error; ``--json`` gives ``model_budget: false``)."""
    from ops import budget

    target = open_target(args)
    if budget.has_no_model_budget(target.workflow):
        if args.json:
            print_json({"model_budget": False, "workflow": target.workflow})
        else:
            print(
                f"workflow {target.workflow} calls no model: it has no model budget"
                " (the agent workflow, or your own that calls a model, has one)"
            )
        return 0
    status = operator_call(budget.show_budget, target, now=int(time.time()))
    _print(status, as_json=args.json)
    return 0


def run_set(args: argparse.Namespace) -> int:
    from cli.errors import CommandError, ErrorCode
    from ops import budget

    if args.tokens < 0:
        raise CommandError("TOKENS must not be negative", code=ErrorCode.BAD_OPTION)
    target = open_target(args)
    status = operator_call(budget.set_budget, target, args.tokens, now=int(time.time()))
    _print(status, as_json=args.json)
    return 0
