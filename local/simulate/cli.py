"""``relaylink-receiver simulate``: seeded fault schedules against the real core, in memory."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Final

from cli.errors import CommandError, ErrorCode
from cli.json_output import json_text

WORKFLOW_CHOICES: Final = ("archive", "notify", "agent", "all")
MAX_DELIVERIES: Final = 50


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="deterministic simulation: seeded fault schedules; exit 1 on any violation",
        description=(
            "Run the real receiver, relay, worker (batch, process, effects, steps, the"
            " workflow's own adapters), reconciler and operator actions in one process on"
            " an in-memory world with a virtual clock, once per seed; each seed is one"
            " fault schedule (lost answers, SDK retries, kills, timeouts, duplicates, far"
            " sides that act then fail, TTL expiry, clock skew, days that pass). After"
            " each seed every invariant is checked (docs/simulation.md). A violation"
            " prints the seed and its shrunk fault schedule; exit 1 if any, else 0."
        ),
    )
    parser.add_argument(
        "--workflow", choices=WORKFLOW_CHOICES, default="all", help="the workflow (all)"
    )
    parser.add_argument("--seeds", type=int, default=1000, metavar="N", help="seeds (1000)")
    parser.add_argument("--first-seed", type=int, default=0, metavar="S", help="the first seed (0)")
    parser.add_argument(
        "--deliveries", type=int, default=4, metavar="K", help="deliveries per seed (4)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="P",
        help="run seeds on P processes (1; the results do not depend on it)",
    )
    parser.add_argument(
        "--shrink",
        type=int,
        default=3,
        metavar="M",
        help="shrink the schedules of the first M violating seeds per workflow (3; each"
        " replays its seed up to 120 times)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--mutations",
        action="store_true",
        help="the mutation check instead: plant each bug of local/simulate/mutate.py in a"
        " scratch copy, one at a time, and run --seeds seeds of its workflow there on"
        " --processes mutants at once; a table (or --json) of what was found; exit 1 if a"
        " bug was missed (or the unmutated copy violates), 2 if a mutation's code moved",
    )
    parser.add_argument(
        "--known-missed",
        default="",
        metavar="NAMES",
        help="with --mutations: comma-separated bugs the simulator is known to miss yet",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from local.simulate.campaign import simulate  # noqa: PLC0415 (imports the whole core)
    from local.simulate.run import WORKFLOWS  # noqa: PLC0415

    checks = [
        (args.seeds >= 1, "--seeds must be at least 1"),
        (args.first_seed >= 0, "--first-seed must not be negative"),
        (1 <= args.deliveries <= MAX_DELIVERIES, f"--deliveries must be 1 to {MAX_DELIVERIES}"),
        (1 <= args.processes <= (os.cpu_count() or 1) * 4, "--processes is out of range"),
        (args.shrink >= 0, "--shrink must not be negative"),
    ]
    for ok, message in checks:
        if not ok:
            raise CommandError(message, code=ErrorCode.BAD_OPTION)
    if args.mutations:
        from local.simulate import mutate  # noqa: PLC0415

        return mutate.report(
            only="",
            known_missed=args.known_missed,
            seeds=args.seeds,
            first_seed=args.first_seed,
            jobs=args.processes,
            as_json=args.json,
        )
    workflows = WORKFLOWS if args.workflow == "all" else (args.workflow,)
    summary = simulate(
        workflows,
        seeds=args.seeds,
        first_seed=args.first_seed,
        deliveries=args.deliveries,
        processes=args.processes,
        shrink_limit=args.shrink,
        progress=None if args.json else lambda line: print(line, file=sys.stderr, flush=True),
    )
    print(json_text(summary.to_dict()) if args.json else summary.text())
    return 0 if summary.passed else 1
