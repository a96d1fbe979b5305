"""``relaylink-receiver send``: the RelayLink simulator (see :mod:`local.sender`)."""

# Heavy imports (httpx, boto3) live inside the handler so that ``--help`` stays quick.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from local.sender import DeliveryResult, Summary

SECRET_ENV = "RELAYLINK_SIGNING_SECRET"  # noqa: S105 (a variable name)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "send",
        help="send signed deliveries as RelayLink does (retries, duplicates, rotation)",
        description=(
            "Send COUNT fresh package.received deliveries to a receiver URL, as RelayLink "
            "does: body serialized once, a fresh timestamp and signature per attempt, "
            "retries on non-2xx, connection errors or no answer within --timeout, on the "
            "contract's back-off (30 s, 2 min, 10 min, 1 h, 6 h, then 12 h, up to 3 days) "
            "divided by --time-scale. Exit 0 only if every delivery was acknowledged."
        ),
    )
    parser.add_argument("--url", help="receiver URL (default: the --local stack's webhook_url)")
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="WHSEC",
        help=(
            "signing secret whsec_...; repeat for a rotation (one v1 signature each). "
            f"Default: ${SECRET_ENV}, else the --local stack's secrets"
        ),
    )
    parser.add_argument(
        "--local",
        metavar="STATE_FILE",
        help="take --url, --secret and --mcp-url defaults from a local stack's state file",
    )
    parser.add_argument("--count", type=int, default=1, help="deliveries to send (default 1)")
    parser.add_argument(
        "--concurrency", type=int, default=10, help="deliveries in flight at once (default 10)"
    )
    parser.add_argument(
        "--duplicate-rate",
        type=float,
        default=0.0,
        metavar="R",
        help="fraction of deliveries that get an extra attempt (RelayLink-side duplicate)",
    )
    parser.add_argument("--mcp-url", help="the mcp_url the bodies carry")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="divide the retry back-off by F (1000: 30 s becomes 30 ms)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long an attempt waits for an answer (default 10, the contract's)",
    )
    parser.add_argument("--seed", type=int, help="repeatable duplicate choice and package ids")
    parser.add_argument("--package-prefix", default="pkg_", help="package id prefix (pkg_)")
    parser.add_argument("--receiver-id", default="rcv_local", help="the bodies' receiver_id")
    parser.add_argument(
        "--progress", action="store_true", help="progress on stderr even when not a terminal"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the summary as JSON (with every delivery)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from local.commands import CommandError
    from local.sender import Sender, SenderConfig

    url, secrets, mcp_url = _targets(args)
    if args.count < 1:
        raise CommandError("--count must be at least 1")
    try:
        config = SenderConfig(
            url=url,
            secrets=tuple(secrets),
            timeout_seconds=args.timeout,
            time_scale=args.time_scale,
            concurrency=args.concurrency,
            duplicate_rate=args.duplicate_rate,
            seed=args.seed,
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    show_progress = args.progress or sys.stderr.isatty()
    bar = ProgressBar(args.count, sys.stderr) if show_progress else None

    async def send() -> Summary:
        async with Sender(config) as sender:
            return await sender.send_new(
                args.count,
                mcp_url=mcp_url,
                receiver_id=args.receiver_id,
                package_prefix=args.package_prefix,
                progress=bar.update if bar else None,
            )

    summary = asyncio.run(send())
    if bar is not None:
        bar.finish()
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
    else:
        print(render_summary(summary))
    return 0 if summary.all_acknowledged else 1


def _targets(args: argparse.Namespace) -> tuple[str, list[str], str]:
    from local.commands import CommandError

    url: str | None = args.url
    secrets: list[str] = list(args.secret)
    mcp_url: str | None = args.mcp_url
    if not secrets and os.environ.get(SECRET_ENV):
        secrets = os.environ[SECRET_ENV].split()
    if args.local:
        from local.state import LocalState

        try:
            state = LocalState.read(args.local)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"cannot read the state file {args.local}: {exc}") from None
        url = url or state.webhook_url
        secrets = secrets or list(state.signing_secrets)
        mcp_url = mcp_url or state.mcp_url
    if not url:
        raise CommandError("--url is required (or --local STATE_FILE)")
    if not url.startswith(("http://", "https://")):
        raise CommandError("--url must be an http:// or https:// URL")
    if not secrets:
        raise CommandError(f"--secret is required (or ${SECRET_ENV}, or --local STATE_FILE)")
    if not mcp_url:
        raise CommandError("--mcp-url is required (or --local STATE_FILE)")
    return url, secrets, mcp_url


class ProgressBar:
    """One line on a terminal, redrawn at most ten times a second."""

    WIDTH = 30

    def __init__(self, total: int, stream: TextIO) -> None:
        self._total = total
        self._stream = stream
        self._done = 0
        self._acknowledged = 0
        self._attempts = 0
        self._drawn_at = 0.0

    def update(self, result: DeliveryResult) -> None:
        self._done += 1
        self._attempts += len(result.attempts)
        self._acknowledged += result.acknowledged
        now = time.monotonic()
        if now - self._drawn_at >= 0.1:
            self._drawn_at = now
            self._draw()

    def _draw(self) -> None:
        filled = self.WIDTH * self._done // max(1, self._total)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self._stream.write(
            f"\r[{bar}] {self._done}/{self._total} done,"
            f" {self._acknowledged} acknowledged, {self._attempts} attempts"
        )
        self._stream.flush()

    def finish(self) -> None:
        self._draw()  # the final counts, however recently the last line was drawn
        self._stream.write("\n")
        self._stream.flush()


def render_summary(summary: Summary) -> str:
    answers = ", ".join(f"{k}: {v}" for k, v in sorted(summary.answers.items())) or "none"
    lines = [
        f"deliveries    {summary.deliveries}",
        f"attempts      {summary.attempts} ({summary.extra_attempts} extra duplicates)",
        f"answers       {answers}",
        f"acknowledged  {summary.acknowledged}",
        f"gave up       {summary.gave_up}",
        f"elapsed       {summary.elapsed_seconds:.2f} s",
    ]
    return "\n".join(lines)
