"""``relaylink-receiver inbox show|list``: what the inbox holds (never a body).

Also home of the target options every operator command shares (``--stack``,
``--local``, ``--region``), kept import-light so that ``--help`` stays quick.
"""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ops.operator import Target

STACK_ENV = "RELAYLINK_STACK"
STATES = ("pending", "processing", "completed", "failed", "ignored")


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """``--stack NAME`` (a deployed stack) or ``--local STATE_FILE`` (a local one)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--stack",
        metavar="NAME",
        help=f"deployed stack whose outputs name the resources (default: ${STACK_ENV});"
        " AWS credentials from the default chain",
    )
    where.add_argument(
        "--local",
        metavar="STATE_FILE",
        help="a local stack's state file (relaylink-receiver local)",
    )
    parser.add_argument("--region", help="AWS region of --stack (default: the SDK's)")


def open_target(args: argparse.Namespace) -> Target:
    """The :class:`~local.operator.Target` the options name; user errors raise CommandError."""
    from local.commands import CommandError
    from ops.operator import OperatorError, Target

    if args.local:
        from local.state import LocalState

        try:
            return Target.from_local(LocalState.read(args.local))
        except FileNotFoundError:
            raise CommandError(f"no state file {args.local}: is the local stack running?") from None
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
    stack = args.stack or os.environ.get(STACK_ENV)
    if not stack:
        raise CommandError(f"say where: --stack NAME (or ${STACK_ENV}) or --local STATE_FILE")
    try:
        return Target.from_stack(stack, region=args.region)
    except OperatorError as exc:
        raise CommandError(str(exc)) from None


def print_json(document: Any) -> None:
    print(json.dumps(document, indent=2, sort_keys=True))


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "inbox",
        help="show one delivery's inbox item or list them",
        description="Inspect the inbox: state, attempts, digest, times, last error. Never a body.",
    )
    actions = parser.add_subparsers(dest="inbox_action", metavar="ACTION", required=True)

    show = actions.add_parser("show", help="one delivery's inbox item (exit 1 if unknown)")
    show.add_argument("delivery_id", metavar="DELIVERY_ID")
    show.add_argument("--json", action="store_true", help="one JSON object")
    add_target_arguments(show)
    show.set_defaults(handler=run_show)

    listing = actions.add_parser(
        "list", help="inbox items, oldest received first (by state: the by_state index)"
    )
    listing.add_argument("--state", choices=STATES, help="only items in this state")
    listing.add_argument("--limit", type=int, metavar="N", help="at most N items")
    listing.add_argument("--json", action="store_true", help='one JSON object {"items": [...]}')
    add_target_arguments(listing)
    listing.set_defaults(handler=run_list)


def operator_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call an operator function; its OperatorError becomes a one-line CommandError."""
    from botocore.exceptions import BotoCoreError, ClientError

    from functions.core.errors import StorageUnavailable
    from local.commands import CommandError
    from ops.operator import OperatorError, describe_aws_error

    try:
        return fn(*args, **kwargs)
    except OperatorError as exc:
        raise CommandError(str(exc)) from None
    except StorageUnavailable:
        raise CommandError("AWS is throttling or unavailable; try again") from None
    except (ClientError, BotoCoreError) as exc:
        # The adapters let through what is not weather: a missing table, no credentials.
        raise CommandError(describe_aws_error(exc)) from None


def run_show(args: argparse.Namespace) -> int:
    from ops import operator

    target = open_target(args)
    item = operator_call(operator.show_inbox, target, args.delivery_id)
    if item is None:
        print(f"inbox show: no delivery {args.delivery_id}", file=sys.stderr)
        return 1
    view = operator.inbox_view(item)
    if args.json:
        print_json(view)
        return 0
    width = max(len(k) for k in view)
    for name, value in view.items():
        shown = operator.iso(value) if name.endswith(("_at", "_until")) else value
        print(f"{name:<{width}}  {'-' if shown is None else shown}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from functions.core.models import State
    from local.commands import CommandError
    from ops import operator

    if args.limit is not None and args.limit < 1:
        raise CommandError("--limit must be at least 1")
    target = open_target(args)
    state = State(args.state) if args.state else None
    items = operator_call(operator.list_inbox, target, state=state, limit=args.limit)
    if args.json:
        print_json({"count": len(items), "items": [operator.inbox_view(i) for i in items]})
        return 0
    print(f"{'received_at':<20}  {'state':<10}  {'attempts':>8}  {'delivery_id':<36}  last_error")
    for item in items:
        print(
            f"{operator.iso(item.received_at):<20}  {item.state.value:<10}  {item.attempts:>8}"
            f"  {item.delivery_id:<36}  {item.last_error or '-'}"
        )
    print(f"{len(items)} item(s)")
    return 0
