"""``relaylink-receiver``: the local stack, the RelayLink simulator and the operator commands.

Each subcommand lives in its own module, under :mod:`local.commands` (the local stack
and the simulator) or :mod:`ops.commands` (the operator commands); each exposes
``register(subparsers)``: it adds its parser and sets ``handler`` (a function taking
the parsed namespace and returning the exit status). Modules import their heavy
dependencies inside the handler, so ``--help`` stays quick.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from local.commands import CommandError

# "" in the repository, "relaylink_receiver." when installed from the wheel.
_PREFIX = (__package__ or "ops").removesuffix("ops")
# Order is the order ``--help`` lists them in.
COMMAND_MODULES = (
    "local.commands.local_stack",
    "local.commands.send",
    "local.commands.demo",
    "local.commands.chaos",
    "ops.commands.inbox",
    "ops.commands.quarantine",
    "ops.commands.redrive",
    "ops.commands.requeue",
    "ops.commands.effects",
    "ops.commands.budget",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relaylink-receiver",
        description="Run the RelayLink receiver locally, drive it, and operate a deployed stack.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(_PREFIX + module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except CommandError as exc:
        print(f"relaylink-receiver {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
