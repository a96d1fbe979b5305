"""``relaylink-receiver send``: the RelayLink simulator (see :mod:`local.sender`)."""

# Heavy imports (httpx, boto3) live inside the handler so that ``--help`` stays quick.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, TextIO

from cli.errors import ErrorCode, format_line
from cli.json_output import print_json
from cli.state_file import add_state_file_argument, address

if TYPE_CHECKING:
    from cli.state import LocalState
    from local.sender import AttemptResult, DeliveryResult, Summary

SECRET_ENV = "RELAYLINK_SIGNING_SECRET"  # noqa: S105 (a variable name)
# A person at a terminal wants an answer, not three days of retries.
GIVE_UP_SECONDS = 30.0
CONTRACT_SCHEDULE = "contract"
DEFAULT_WAIT_DEADLINE_SECONDS = 120.0
FINAL_STATES = frozenset({"completed", "failed", "ignored"})
# Parked until a person decides: --wait stops there, as nothing moves without one.
AWAITING_APPROVAL = "awaiting_approval"
EXIT_AWAITING_APPROVAL = 3
_UNAUTHORIZED = "401"
_WAIT_PAUSE_SECONDS = 0.5
STOP_STATES = FINAL_STATES | {AWAITING_APPROVAL}  # what --wait stops at


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "send",
        help="send signed deliveries as RelayLink does (retries, duplicates, rotation)",
        description=(
            "Send COUNT fresh package.received deliveries to a receiver URL, as RelayLink "
            "does: body serialized once, a fresh timestamp and signature per attempt, "
            "retries on non-2xx, connection errors or no answer within --timeout, on the "
            "contract's back-off (30 s, 2 min, 10 min, 1 h, 6 h, then 12 h, up to 3 days) "
            "divided by --time-scale; by default it gives up after 30 s instead "
            "(--give-up-after contract: the whole schedule). Exit 0 only if every delivery "
            "was acknowledged (and, with --wait, reached a final state in time); with "
            "--wait, exit 3 when every delivery is final or awaiting approval and some "
            "await a person's decision (approvals list shows them)."
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
    add_state_file_argument(
        parser,
        "--local",
        "take --url, --secret and --mcp-url defaults from a local stack's state file",
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
    parser.add_argument(
        "--give-up-after",
        metavar="SECONDS",
        help="retry a delivery only while the retry starts within SECONDS of its first "
        f"attempt (default {GIVE_UP_SECONDS:g}; 'contract': the contract's whole 3-day "
        "schedule, as RelayLink retries)",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="then wait until the acknowledged deliveries reach a final state in the "
        "--local stack's inbox (completed, failed, ignored) and print how many are in each",
    )
    parser.add_argument(
        "--wait-deadline",
        type=float,
        default=DEFAULT_WAIT_DEADLINE_SECONDS,
        metavar="SECONDS",
        help=f"how long --wait waits at most (default {DEFAULT_WAIT_DEADLINE_SECONDS:g};"
        " exit 1 if some are not final by then)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from cli.errors import CommandError
    from local.sender import HORIZON_SECONDS, Sender, SenderConfig, contract_schedule

    _check_options(args)
    url, secrets, mcp_url, state = _targets(args)
    give_up_after = _give_up_after(args)
    # In contract seconds (the schedule's unit); a bound only ever shortens the schedule.
    horizon = HORIZON_SECONDS
    if give_up_after is not None:
        horizon = min(HORIZON_SECONDS, give_up_after * args.time_scale)
    try:
        config = SenderConfig(
            url=url,
            secrets=tuple(secrets),
            timeout_seconds=args.timeout,
            time_scale=args.time_scale,
            concurrency=args.concurrency,
            duplicate_rate=args.duplicate_rate,
            seed=args.seed,
            schedule=contract_schedule(horizon),
        )
    except ValueError as exc:
        raise CommandError(str(exc), code=ErrorCode.BAD_OPTION) from None
    show_progress = args.progress or sys.stderr.isatty()
    bar = ProgressBar(args.count, sys.stderr) if show_progress else None
    first_failure = FirstFailure(url, timeout=args.timeout, give_up_after=give_up_after)
    tally = Tally(args.count, bar)

    async def send() -> Summary:
        async with Sender(config, on_attempt=first_failure.report) as sender:
            return await sender.send_new(
                args.count,
                mcp_url=mcp_url,
                receiver_id=args.receiver_id,
                package_prefix=args.package_prefix,
                progress=tally.update,
            )

    try:
        summary = asyncio.run(send())
    except KeyboardInterrupt:
        if bar is not None:
            bar.finish()
        print(
            format_line("send", ErrorCode.INTERRUPTED, tally.said(), level="warning"),
            file=sys.stderr,
        )
        raise
    if bar is not None:
        bar.finish()
    states = _wait_final(summary, state, args.wait_deadline) if state and args.wait else None
    document = summary.to_dict()
    if states is not None:
        document["states"] = dict(states)
    if args.json:
        print_json(document)
    else:
        print(render_summary(summary))
        if states is not None:
            print(f"states        {_counts(states)}")
    parked = 0 if states is None else states[AWAITING_APPROVAL]
    finished = states is None or _all_final(states, summary)
    if states is not None and parked and _all_final(states, summary, parked=parked):
        where = f" --local {args.local}" if args.local else ""
        print(
            format_line(
                "send",
                ErrorCode.AWAITING_APPROVAL,
                f"{parked} of {summary.acknowledged} deliveries await a person's decision:"
                f" relaylink-receiver approvals list{where}",
                level="warning",
            ),
            file=sys.stderr,
        )
        return EXIT_AWAITING_APPROVAL if summary.all_acknowledged else 1
    if not finished:
        print(
            format_line(
                "send",
                ErrorCode.WAIT_DEADLINE,
                f"some deliveries were not in a final state after {args.wait_deadline:g} s"
                " (--wait-deadline)",
            ),
            file=sys.stderr,
        )
    return 0 if summary.all_acknowledged and finished else 1


def _check_options(args: argparse.Namespace) -> None:
    from cli.errors import CommandError

    bad = ErrorCode.BAD_OPTION
    if args.count < 1:
        raise CommandError("--count must be at least 1", code=bad)
    if args.concurrency < 1:
        raise CommandError("--concurrency must be at least 1", code=bad)
    if not 0.0 <= args.duplicate_rate <= 1.0:
        raise CommandError("--duplicate-rate must be between 0 and 1", code=bad)
    if not 0 < args.time_scale < math.inf:
        raise CommandError("--time-scale must be a positive number", code=bad)
    if not args.timeout > 0:
        raise CommandError("--timeout must be positive", code=bad)
    if not args.wait_deadline > 0:
        raise CommandError("--wait-deadline must be positive", code=bad)
    if args.wait and not args.local:
        raise CommandError("--wait needs --local STATE_FILE: it watches that stack's inbox")


def _give_up_after(args: argparse.Namespace) -> float | None:
    """Seconds after a delivery's first attempt when its retries stop; None: the contract's."""
    from cli.errors import CommandError

    if args.give_up_after is None:
        # Whether or not a terminal is attached: a script or CI job must not hang for days.
        return GIVE_UP_SECONDS
    if args.give_up_after == CONTRACT_SCHEDULE:
        return None
    try:
        seconds = float(args.give_up_after)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise CommandError(
            f"--give-up-after must be a number of seconds (0 or more) or '{CONTRACT_SCHEDULE}'",
            code=ErrorCode.BAD_OPTION,
        )
    return seconds


class FirstFailure:
    """Says once, at the run's first failed attempt, what went wrong and how long it retries.

    Names the receiver by host and port only: the URL's path may hold a secret token.
    """

    def __init__(self, url: str, *, timeout: float, give_up_after: float | None) -> None:
        self._where = address(url)
        self._timeout = timeout
        self._give_up_after = give_up_after
        self._said = False

    def report(self, attempt: AttemptResult) -> None:
        from local.sender import CONNECTION_ERROR, TIMEOUT

        if self._said or attempt.acknowledged:
            return
        self._said = True
        if attempt.answer == CONNECTION_ERROR:
            code, what = ErrorCode.RECEIVER_UNREACHABLE, f"nothing answers at {self._where}"
        elif attempt.answer == TIMEOUT:
            code = ErrorCode.RECEIVER_UNREACHABLE
            what = f"no answer from {self._where} within {self._timeout:g} s (--timeout)"
        elif attempt.answer == _UNAUTHORIZED:
            code = ErrorCode.ATTEMPT_REFUSED
            what = (
                f"{self._where} answered 401: the receiver refused the signature, most likely"
                f" a signing secret it does not hold (check --secret or ${SECRET_ENV})"
            )
        else:
            code, what = ErrorCode.ATTEMPT_REFUSED, f"{self._where} answered {attempt.answer}"
        print(
            format_line("send", code, f"{what}; {self._plan()}", level="warning"), file=sys.stderr
        )

    def _plan(self) -> str:
        if self._give_up_after is None:
            return "retrying on the contract's schedule for up to 3 days (Ctrl-C stops)"
        return f"retrying for up to {self._give_up_after:g} s (--give-up-after)"


def _wait_final(summary: Summary, state: LocalState, deadline_seconds: float) -> Counter[str]:
    """Inbox states of the acknowledged deliveries, once all are final or at the deadline."""
    from local.stack_probes import delivery_states

    waiting = [r.delivery_id for r in summary.results if r.acknowledged]
    print(
        f"waiting for {len(waiting)} deliveries to reach a final state or await approval"
        f" (at most {deadline_seconds:g} s) ...",
        file=sys.stderr,
        flush=True,
    )
    deadline = time.monotonic() + deadline_seconds
    final: dict[str, str] = {}
    while True:
        pending = [d for d in waiting if d not in final]
        states = delivery_states(state, pending) if pending else {}
        final.update({d: s for d, s in states.items() if s in STOP_STATES})
        if len(final) == len(waiting) or time.monotonic() >= deadline:
            break
        time.sleep(min(_WAIT_PAUSE_SECONDS, max(0.0, deadline - time.monotonic())))
    counts = Counter(final.values())
    for delivery_id in waiting:
        if delivery_id not in final:
            counts[states.get(delivery_id, "no_inbox_item")] += 1
    return counts


def _all_final(states: Counter[str], summary: Summary, *, parked: int = 0) -> bool:
    """Whether every acknowledged delivery is final (or, of ``parked``, awaits approval)."""
    return sum(states[s] for s in FINAL_STATES) + parked == summary.acknowledged


def _counts(states: Counter[str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(states.items())) or "none"


def _targets(args: argparse.Namespace) -> tuple[str, list[str], str, LocalState | None]:
    from cli.errors import CommandError
    from cli.state_file import read_running_stack

    url: str | None = args.url
    secrets: list[str] = list(args.secret)
    mcp_url: str | None = args.mcp_url
    state: LocalState | None = None
    if not secrets and os.environ.get(SECRET_ENV):
        secrets = os.environ[SECRET_ENV].split()
    if args.local:
        # Without --url the deliveries go to the stack's front door: it must answer.
        state = read_running_stack(
            args.local, answering_url="aws_endpoint_url" if url else "webhook_url"
        )
        url = url or state.webhook_url
        secrets = secrets or list(state.signing_secrets)
        mcp_url = mcp_url or state.mcp_url
    if not url:
        raise CommandError("--url is required (or --local STATE_FILE)")
    if not url.startswith(("http://", "https://")):
        raise CommandError("--url must be an http:// or https:// URL", code=ErrorCode.BAD_OPTION)
    if not secrets:
        raise CommandError(f"--secret is required (or ${SECRET_ENV}, or --local STATE_FILE)")
    if not mcp_url:
        raise CommandError("--mcp-url is required (or --local STATE_FILE)")
    return url, secrets, mcp_url, state


class Tally:
    """What a run has finished so far: said when it is interrupted."""

    def __init__(self, total: int, bar: ProgressBar | None) -> None:
        self._total = total
        self._bar = bar
        self._done = 0
        self._acknowledged = 0

    def update(self, result: DeliveryResult) -> None:
        self._done += 1
        self._acknowledged += result.acknowledged
        if self._bar is not None:
            self._bar.update(result)

    def said(self) -> str:
        unfinished = self._total - self._done
        return (
            f"{self._acknowledged} of {self._total} deliveries acknowledged,"
            f" {self._done - self._acknowledged} gave up, {unfinished} not finished"
            " (a delivery not finished may still have reached the receiver)"
        )


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
