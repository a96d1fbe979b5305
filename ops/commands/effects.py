"""``relaylink-receiver effects list|resolve``: effects whose outcome is in doubt."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from functions.core.env_keys import ENV_RECONCILE_EFFECT_AGE_SECONDS
from functions.core.setting_defaults import DEFAULT_RECONCILE_EFFECT_AGE_SECONDS
from ops.commands.output import iso, print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call


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
    listing.add_argument(
        "--older-than",
        type=int,
        metavar="SECONDS",
        default=DEFAULT_RECONCILE_EFFECT_AGE_SECONDS,
        help="the reconciler's effect age (default %(default)s: the default of its"
        f" {ENV_RECONCILE_EFFECT_AGE_SECONDS})",
    )
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
        ),
    )
    resolve.add_argument("delivery_id", metavar="DELIVERY_ID", help="the delivery's id (a uuid)")
    resolve.add_argument("effect", metavar="EFFECT", help="the effect's name, e.g. notify")
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
    add_target_arguments(resolve)
    resolve.set_defaults(handler=run_resolve)


def run_list(args: argparse.Namespace) -> int:
    from local.commands import CommandError, ErrorCode
    from local.text_table import aligned
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
            iso(e.record.intent_at),
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
    from functions.core.models import State
    from ops import effects

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
