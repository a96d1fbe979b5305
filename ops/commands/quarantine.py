"""``relaylink-receiver quarantine list|show``: same-id, other-body deliveries kept aside."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import sys
from typing import Any

from ops.commands.output import iso, print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "quarantine",
        help="list or show quarantined deliveries (both digests and the time)",
        description=(
            "Quarantine records: a delivery id seen again with other body bytes (a contract"
            " violation or a forgery made with a leaked secret). Each holds the digest of the"
            " body accepted first, the digest of the conflicting one and the time; no body."
        ),
    )
    actions = parser.add_subparsers(dest="quarantine_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="every quarantine record, oldest first")
    listing.add_argument("--json", action="store_true", help='one JSON object {"records": [...]}')
    add_target_arguments(listing)
    listing.set_defaults(handler=run_list)
    show = actions.add_parser("show", help="one delivery's quarantine records (exit 1 if none)")
    show.add_argument("delivery_id", metavar="DELIVERY_ID", help="the delivery's id (a uuid)")
    show.add_argument("--json", action="store_true", help='one JSON object {"records": [...]}')
    add_target_arguments(show)
    show.set_defaults(handler=run_show)


def _print(records: list[Any], *, as_json: bool) -> None:
    from ops import quarantine

    if as_json:
        views = [quarantine.quarantine_view(r) for r in records]
        print_json({"count": len(views), "records": views})
        return
    print(f"{'quarantined_at':<20}  {'delivery_id':<36}  stored_sha256 / received_sha256")
    for r in records:
        print(f"{iso(r.quarantined_at):<20}  {r.delivery_id:<36}  {r.stored_sha256}")
        print(f"{'':<20}  {'':<36}  {r.received_sha256}")
    print(f"{len(records)} record(s)")


def run_list(args: argparse.Namespace) -> int:
    from ops import quarantine

    records = operator_call(quarantine.list_quarantine, open_target(args))
    _print(records, as_json=args.json)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from ops import quarantine

    records = operator_call(quarantine.show_quarantine, open_target(args), args.delivery_id)
    if not records:
        print(f"quarantine show: no quarantine record for {args.delivery_id}", file=sys.stderr)
        return 1
    _print(records, as_json=args.json)
    return 0
