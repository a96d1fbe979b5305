"""``relaylink-receiver requeue DELIVERY_ID``: give a failed delivery a new work item;
``requeue --state failed [--reason CODE] [--since …] [--until …]``: every one that matches."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ops.commands.bulk_options import add_bulk_arguments, bulk_window, print_bulk
from ops.commands.output import print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call
from ops.time_window import MOMENT_HELP


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "requeue",
        help="give a failed delivery a new work item (refuses completed ones)",
        description=(
            "Reset a failed delivery to pending (attempts 0; last_error kept until the next"
            " attempt) and send its work item to the work queue. A pending delivery gets its"
            " work item again (harmless: one worker claims it). Refuses completed, processing"
            " and ignored deliveries (exit 1), and unknown ids (exit 1)."
            " With --state failed instead of an id: every failed delivery that matches"
            " --reason and the window --since/--until (when it failed), listed through"
            " the state index; each is reset only if it is still failed, so a second"
            " run changes nothing more. More than --limit matches need --yes."
        ),
    )
    parser.add_argument("delivery_id", metavar="DELIVERY_ID", nargs="?")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    bulk = parser.add_argument_group("bulk (instead of DELIVERY_ID)")
    bulk.add_argument(
        "--state", choices=("failed",), help="requeue every delivery in this state that matches"
    )
    bulk.add_argument("--reason", metavar="CODE", help="only those whose last_error is CODE")
    bulk.add_argument("--since", metavar="WHEN", help=f"failed at or after WHEN: {MOMENT_HELP}")
    bulk.add_argument("--until", metavar="WHEN", help="failed before WHEN (same forms)")
    add_bulk_arguments(parser)
    add_target_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cli.errors import CommandError
    from ops import requeue

    bulk_only = [f"--{n}" for n in ("reason", "since", "until") if getattr(args, n) is not None]
    bulk_only += [f"--{n.replace('_', '-')}" for n in ("dry_run", "yes") if getattr(args, n)]
    if (args.delivery_id is None) == (args.state is None):
        raise CommandError("name one DELIVERY_ID, or --state failed for every match")
    if args.delivery_id is not None and bulk_only:
        raise CommandError(f"{', '.join(bulk_only)} go(es) with --state, not with DELIVERY_ID")
    if args.state is not None:
        return run_bulk(args)

    target = open_target(args)
    result = operator_call(requeue.requeue, target, args.delivery_id, now=int(time.time()))
    ok = result.outcome in (requeue.RequeueOutcome.REQUEUED, requeue.RequeueOutcome.RESENT)
    if args.json:
        print_json(result.to_dict())
    elif ok:
        print(f"{result.outcome.value} {result.delivery_id} (was {result.state})")
    if not ok:
        print(f"requeue: {args.delivery_id}: {result.reason}", file=sys.stderr)
    return 0 if ok else 1


def run_bulk(args: argparse.Namespace) -> int:
    from functions.core.models import State
    from ops import bulk

    now = int(time.time())
    window = bulk_window(args, now=now)
    result = operator_call(
        bulk.requeue_matching,
        open_target(args),
        now=now,
        state=State(args.state),
        reason=args.reason,
        since=window["since"],
        until=window["until"],
        limit=args.limit,
        yes=args.yes,
        dry_run=args.dry_run,
    )
    print_bulk(result, verb="requeue", done="requeued", as_json=args.json)
    return 0
