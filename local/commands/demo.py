"""``relaylink-receiver demo``: the whole pipeline through a scripted, narrated scenario."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="start the local stack and walk through retries, conflicts and a crash",
        description=(
            "Starts the local stack and narrates a scenario: a normal delivery, a timed-out "
            "attempt and its retry, overlapping attempts, a conflicting body (quarantined), a "
            "forged request, an MCP failure that recovers, the receiver killed mid-request, "
            "and a package that does not exist. Exits 1 if any invariant fails."
        ),
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from local.demo import run_demo  # noqa: PLC0415 (the stack's imports are heavy)

    return run_demo()
