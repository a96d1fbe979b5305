"""``relaylink-receiver requeue DELIVERY_ID``: give a failed delivery a new work item."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ops.commands.output import print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "requeue",
        help="give a failed delivery a new work item (refuses completed ones)",
        description=(
            "Reset a failed delivery to pending (attempts 0; last_error kept until the next"
            " attempt) and send its work item to the work queue. A pending delivery gets its"
            " work item again (harmless: one worker claims it). Refuses completed, processing"
            " and ignored deliveries (exit 1), and unknown ids (exit 1)."
        ),
    )
    parser.add_argument("delivery_id", metavar="DELIVERY_ID")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    add_target_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ops import requeue

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
