"""``relaylink-receiver``: the local stack, the RelayLink simulator and the operator commands.

Each subcommand lives in its own module, under :mod:`local.commands` (the local stack
and the simulator) or :mod:`ops.commands` (the operator commands); each exposes
``register(subparsers)``: it adds its parser and sets ``handler`` (a function taking
the parsed namespace and returning the exit status). Modules import their heavy
dependencies inside the handler, so ``--help`` stays quick.

:func:`main` is the one place that turns what a user can cause into one line on
stderr (``relaylink-receiver inbox: error: stack_unreachable: ...``, exit 2): a
command raises, and :mod:`ops.cli_failures` names the failure.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Final, NoReturn

from cli.errors import PROG, ErrorCode, format_line
from cli.suggestions import did_you_mean
from local.commands import chaos, demo, local_stack, send
from local.simulate import cli as simulate_cli
from ops.cli_failures import DISTRIBUTION, known_failure
from ops.commands import (
    approvals,
    budget,
    console,
    effects,
    inbox,
    quarantine,
    redrive,
    requeue,
)

# Order is the order ``--help`` lists them in.
COMMANDS: Final[tuple[ModuleType, ...]] = (
    local_stack,
    send,
    demo,
    chaos,
    simulate_cli,
    inbox,
    quarantine,
    redrive,
    requeue,
    effects,
    approvals,
    budget,
    console,
)
USAGE_ERROR = 2
# What a shell reports for a process a closed pipe stopped (128 + SIGPIPE).
CLOSED_PIPE = 141
INTERRUPTED = 130


class CommandLineParser(argparse.ArgumentParser):
    """argparse, whose errors are one line in the CLI's shape (subparsers inherit it)."""

    argv: Sequence[str] = ()  # what the root parser was given: where an unknown option was

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if not self.argv:
            self.argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix(PROG).strip() or None
        hint = did_you_mean(message, self, self.argv)
        said = f"{message}; {hint}" if hint else f"{message} (see --help)"
        line = format_line(command, ErrorCode.USAGE, said)
        self.exit(USAGE_ERROR, line + "\n")


def version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = CommandLineParser(
        prog=PROG,
        description="Run the RelayLink receiver locally, drive it, and operate a deployed stack.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version()}", help="print the version"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
        sys.stdout.flush()  # a closed pipe surfaces here, not at interpreter exit
    except BrokenPipeError:
        _discard_stdout()
        return CLOSED_PIPE
    except KeyboardInterrupt:
        return INTERRUPTED
    except Exception as exc:  # every failure passes by the one mapping; bugs re-raise
        failure = known_failure(exc)
        if failure is None:
            raise
        print(format_line(args.command, failure.code, str(failure)), file=sys.stderr)
        return USAGE_ERROR
    return status


def _discard_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's last flush must not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
