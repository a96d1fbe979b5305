"""What the bulk forms of ``requeue``, ``redrive`` and ``effects resolve`` share: their
options and their report."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cli.errors import CommandError
from ops.commands.output import iso, print_json

if TYPE_CHECKING:
    from ops.bulk import BulkResult

# ops.bulk.DEFAULT_LIMIT, repeated so that --help does not import boto3 (a test ties them).
DEFAULT_LIMIT = 100


def add_bulk_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dry-run``, ``--yes`` and ``--limit N``."""
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would change; change nothing"
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="touch every match, even more than --limit (without it, nothing changes then)",
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        default=DEFAULT_LIMIT,
        help="the most items one run may touch without --yes (default %(default)s)",
    )


def bulk_window(args: argparse.Namespace, *, now: int) -> dict[str, int | None]:
    """Check ``--limit`` and read ``--since``/``--until`` (epoch seconds; None: open).

    Raises:
        CommandError: a limit below 1, or a moment that is not one.
    """
    from ops.time_window import parse_moment  # noqa: PLC0415

    if args.limit < 1:
        raise CommandError("--limit must be at least 1")
    window: dict[str, int | None] = {}
    for name in ("since", "until"):
        text = getattr(args, name)
        try:
            window[name] = None if text is None else parse_moment(text, now=now)
        except ValueError as exc:
            raise CommandError(f"--{name}: {exc}") from None
    return window


def print_bulk(result: BulkResult, *, verb: str, done: str, as_json: bool) -> None:
    """The result as JSON (sorted keys) or as lines: counts, then each reason's count."""
    if as_json:
        print_json(result.to_dict())
        return
    if result.dry_run:
        print("dry run: nothing was changed")
    window = [
        f"{name} {iso(value)}"
        for name, value in result.filters.items()
        if name in ("since", "until") and value is not None
    ]
    named = [
        f"{name} {result.filters[name]}"
        for name in ("reason", "effect")
        if result.filters.get(name)
    ]
    described = ", ".join([*named, *window])
    rows = [
        ("matched", result.matched),
        (f"would {verb}" if result.dry_run else done, result.changed),
        ("unchanged", result.unchanged),
        *((f"  {why}", count) for why, count in sorted(result.not_changed.items())),
    ]
    for number, (label, count) in enumerate(rows):
        note = f"  ({described})" if number == 0 and described else ""
        print(f"{label:<20} {count}{note}")
    if result.needs_yes:
        print(f"more than {result.limit} match: the run without --dry-run needs --yes")
