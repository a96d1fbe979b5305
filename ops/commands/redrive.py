"""``relaylink-receiver redrive``: move dead-lettered work back to the work queue
(``--all``: bounded, with ``--dry-run`` and ``--yes``)."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ops.commands.bulk_options import add_bulk_arguments, print_bulk
from ops.commands.output import print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "redrive",
        help="move dead-lettered work items back to the work queue",
        description=(
            "For each message on the work dead-letter queue: reset its failed delivery to"
            " pending (attempts 0; last_error kept until the next attempt), send the work"
            " item to the work queue, delete the dead letter. Deliveries completed or being"
            " processed meanwhile are dropped from the DLQ; malformed messages stay. Safe to"
            " run again after an interruption. --all does the same with a bound: when the"
            " queue holds more than --limit letters, nothing is done without --yes;"
            " --dry-run says what each letter would come to and leaves them all. With a"
            " DELIVERY_ID: only that delivery's dead letters (exit 1 if it has none)."
        ),
    )
    parser.add_argument(
        "delivery_id",
        metavar="DELIVERY_ID",
        nargs="?",
        help="only this delivery's dead letters (the queue is looked through)",
    )
    parser.add_argument("--max", type=int, metavar="N", help="handle at most N dead letters")
    parser.add_argument(
        "--all",
        action="store_true",
        help="every dead letter, bounded by --limit unless --yes (the bulk report)",
    )
    add_bulk_arguments(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object (counts, messages)")
    add_target_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cli.errors import CommandError
    from ops import requeue

    if args.max is not None and args.max < 1:
        raise CommandError("--max must be at least 1")
    bulk = args.all or args.dry_run or args.yes
    if args.delivery_id is not None and (bulk or args.max is not None):
        raise CommandError("DELIVERY_ID goes without --all/--dry-run/--yes/--max")
    if bulk:
        if args.max is not None:
            raise CommandError("--max goes without --all/--dry-run/--yes (use --limit there)")
        return run_all(args)
    target = open_target(args)
    report = operator_call(
        requeue.redrive,
        target,
        now=int(time.time()),
        max_messages=args.max,
        delivery_id=args.delivery_id,
    )
    if args.delivery_id is not None and not report.outcomes:
        print(f"redrive: no dead letter for {args.delivery_id}", file=sys.stderr)
        return 1
    if args.json:
        print_json(report.to_dict())
        return 0
    print(f"moved {report.moved} dead letter(s) back to the work queue")
    for outcome in requeue.RedriveOutcome:
        if outcome is not requeue.RedriveOutcome.MOVED and report.count(outcome):
            print(f"{outcome.value}: {report.count(outcome)}")
    return 0


def run_all(args: argparse.Namespace) -> int:
    from cli.errors import CommandError
    from ops import bulk

    if args.limit < 1:
        raise CommandError("--limit must be at least 1")
    result = operator_call(
        bulk.redrive_all,
        open_target(args),
        now=int(time.time()),
        limit=args.limit,
        yes=args.yes,
        dry_run=args.dry_run,
    )
    print_bulk(result, verb="redrive", done="redriven", as_json=args.json)
    return 0
