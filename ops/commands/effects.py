"""``relaylink-receiver effects list|resolve``: effects whose outcome is in doubt."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from functions.core import settings_table
from functions.core.env_names import ENV_RECONCILE_EFFECT_AGE_SECONDS
from ops.commands.bulk_options import add_bulk_arguments, bulk_window, print_bulk
from ops.commands.output import iso, print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call
from ops.time_window import MOMENT_HELP


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "effects",
        help="list effects in doubt, or record whether one was applied",
        description=(
            "Effects in doubt: an attempt recorded its intent to call a downstream system"
            " and ended without recording that the call was done. Check the downstream"
            " with the effect's idempotency key, resolve the effect, then requeue the"
            " delivery."
        ),
    )
    actions = parser.add_subparsers(dest="effects_action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list", help="intents without done, oldest first (the state index, never a scan)"
    )
    listing.add_argument(
        "--uncertain",
        action="store_true",
        help="only those flagged by the reconciler or older than --older-than"
        " (no live worker holds them)",
    )
    _add_older_than(listing)
    listing.add_argument("--json", action="store_true", help='one JSON object {"effects": [...]}')
    add_target_arguments(listing)
    listing.set_defaults(handler=run_list)

    resolve = actions.add_parser(
        "resolve",
        help="record that an effect in doubt was applied (done) or not (cleared)",
        description=(
            "--applied records the effect done: later attempts skip it. --not-applied"
            " clears it: the next attempt applies it. Then `requeue DELIVERY_ID` lets a"
            " failed delivery continue. Exit 1 when the effect is not in doubt (done,"
            " cleared, no record) or a worker holds the delivery; nothing changes then."
            " With --all instead of DELIVERY_ID EFFECT: every uncertain effect (flagged,"
            " or older than --older-than; never one in flight) that matches --effect and"
            " the window --since/--until (when its intent was written), each with its own"
            " conditional write, so a second run changes nothing more. --dry-run lists"
            " them, one line each. More than --limit matches need --yes."
        ),
    )
    resolve.add_argument(
        "delivery_id", metavar="DELIVERY_ID", nargs="?", help="the delivery's id (a uuid)"
    )
    resolve.add_argument(
        "effect", metavar="EFFECT", nargs="?", help="the effect's name, e.g. notify"
    )
    finding = resolve.add_mutually_exclusive_group(required=True)
    finding.add_argument(
        "--applied", action="store_true", help="the downstream has it: record it done"
    )
    finding.add_argument(
        "--not-applied",
        action="store_true",
        help="the downstream does not have it: the next attempt applies it",
    )
    resolve.add_argument("--json", action="store_true", help="one JSON object")
    bulk = resolve.add_argument_group("bulk (instead of DELIVERY_ID EFFECT)")
    bulk.add_argument(
        "--all", action="store_true", help="resolve every uncertain effect that matches"
    )
    bulk.add_argument(
        "--effect",
        dest="effect_name",
        metavar="NAME",
        help="only effects named NAME, e.g. alert.http",
    )
    bulk.add_argument("--since", metavar="WHEN", help=f"intended at or after WHEN: {MOMENT_HELP}")
    bulk.add_argument("--until", metavar="WHEN", help="intended before WHEN (same forms)")
    _add_older_than(bulk)
    add_bulk_arguments(resolve)
    add_target_arguments(resolve)
    resolve.set_defaults(handler=run_resolve)


def _add_older_than(parser: Any) -> None:
    parser.add_argument(
        "--older-than",
        type=int,
        metavar="SECONDS",
        default=settings_table.RECONCILE_EFFECT_AGE_SECONDS.default,
        help="the reconciler's effect age (default %(default)s: the default of its"
        f" {ENV_RECONCILE_EFFECT_AGE_SECONDS})",
    )


def run_list(args: argparse.Namespace) -> int:
    from cli.errors import CommandError, ErrorCode
    from cli.text_table import aligned
    from ops import effects

    if args.older_than < 0:
        raise CommandError("--older-than must not be negative", code=ErrorCode.BAD_OPTION)
    target = open_target(args)
    found = operator_call(
        effects.list_effects,
        target,
        now=int(time.time()),
        effect_age_seconds=args.older_than,
        uncertain_only=args.uncertain,
    )
    if args.json:
        print_json({"count": len(found), "effects": [e.to_dict() for e in found]})
        return 0
    rows = [
        (
            iso(e.record.intent_at) or "-",
            iso(e.record.flagged_at) or "-",
            e.doubt.value,
            e.record.delivery_id,
            e.record.name,
            e.record.key,
        )
        for e in found
    ]
    header = ("intent_at", "flagged_at", "doubt", "delivery_id", "effect", "idempotency_key")
    for line in aligned(header, rows):
        print(line)
    print(f"{len(found)} effect(s) in doubt")
    return 0


def run_resolve(args: argparse.Namespace) -> int:
    from cli.errors import CommandError
    from functions.core.models import State
    from ops import effects

    named = {"effect_name": "--effect", "since": "--since", "until": "--until"}
    bulk_only = [option for n, option in named.items() if getattr(args, n) is not None]
    bulk_only += [f"--{n.replace('_', '-')}" for n in ("dry_run", "yes") if getattr(args, n)]
    if args.all:
        if args.delivery_id is not None:
            raise CommandError("--all resolves every match: name no DELIVERY_ID or EFFECT")
        return run_resolve_all(args)
    if args.delivery_id is None or args.effect is None:
        raise CommandError("name DELIVERY_ID and EFFECT, or --all for every match")
    if bulk_only:
        raise CommandError(f"{', '.join(bulk_only)} go(es) with --all, not with DELIVERY_ID")
    target = open_target(args)
    result = operator_call(
        effects.resolve_effect,
        target,
        args.delivery_id,
        args.effect,
        applied=args.applied,
        now=int(time.time()),
    )
    if args.json:
        print_json(result.to_dict())
    elif result.changed:
        print(f"{result.delivery_id} {result.effect}: {result.outcome.value}")
        if result.delivery_state == State.FAILED.value:
            print(f"continue it with: relaylink-receiver requeue {result.delivery_id}")
    if not result.changed:
        print(
            f"effects resolve: {args.delivery_id} {args.effect}: {result.reason}", file=sys.stderr
        )
    return 0 if result.changed else 1


def run_resolve_all(args: argparse.Namespace) -> int:
    from cli.errors import CommandError
    from ops import effects

    if args.older_than < 0:
        raise CommandError("--older-than must not be negative")
    now = int(time.time())
    window = bulk_window(args, now=now)
    result, matched = operator_call(
        effects.resolve_matching,
        open_target(args),
        applied=args.applied,
        now=now,
        effect_age_seconds=args.older_than,
        effect=args.effect_name,
        since=window["since"],
        until=window["until"],
        limit=args.limit,
        yes=args.yes,
        dry_run=args.dry_run,
    )
    if args.json:
        document = result.to_dict()
        if args.dry_run:
            document["effects"] = [found.to_dict() for found in matched]
        print_json(document)
        return 0
    if args.dry_run:
        for found in matched:
            record = found.record
            print(
                f"{record.delivery_id}  {record.name}  intent_at {iso(record.intent_at)}"
                f"  {found.doubt.value}  key {record.key}"
            )
    finding = "applied" if args.applied else "not applied"
    print_bulk(result, verb=f"resolve as {finding}", done=f"resolved {finding}", as_json=False)
    if result.changed and not args.dry_run:
        print(
            "continue the failed ones with: relaylink-receiver requeue --state failed"
            " --reason uncertain_effect"
        )
    return 0
