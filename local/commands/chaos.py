"""``relaylink-receiver chaos``: the fault-injection run (see :mod:`local.chaos`)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from cli.errors import CommandError, ErrorCode
from cli.json_output import json_text
from local.commands.local_stack import add_model_arguments, add_workflow_argument, model_options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "chaos",
        help="seeded fault-injection run against the local stack; exit 1 on any violation",
        description=(
            "Start the local stack, send a seeded load with the RelayLink simulator "
            "(retries, duplicates, several deliveries of one package, missing packages, "
            "same-id different-body deliveries, forged signatures, stale replays) while "
            "SIGKILLing the front door and the worker process and injecting MCP, DynamoDB "
            "and relay faults; then turn the faults off, wait until quiet and check every "
            "invariant (docs/reliability.md). Exit 0 if none is violated, 1 otherwise."
        ),
    )
    parser.add_argument(
        "--deliveries", type=int, default=500, metavar="N", help="genuine deliveries (500)"
    )
    parser.add_argument(
        "--kills", type=int, default=5, metavar="K", help="SIGKILLs of each process (5)"
    )
    parser.add_argument("--seed", type=int, default=0, help="makes the run reproducible (0)")
    parser.add_argument(
        "--mcp-failure-rate",
        type=float,
        default=0.1,
        metavar="P",
        help="MCP requests answered 503 (0.1)",
    )
    parser.add_argument(
        "--mcp-slow-rate",
        type=float,
        default=0.02,
        metavar="P",
        help="MCP fetches slower than the worker's MCP timeout (0.02)",
    )
    parser.add_argument(
        "--aws-fault-rate",
        type=float,
        default=0.02,
        metavar="Q",
        help="DynamoDB requests answered with throttling or an internal error (0.02)",
    )
    parser.add_argument(
        "--relay-failure-rate",
        type=float,
        default=0.05,
        metavar="P",
        help="relay invocations that fail before the handler (0.05)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=100.0,
        metavar="F",
        help="divide the sender's retry back-off by F (100: 30 s becomes 0.3 s)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long to wait for quiet after the load (600)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=16, help="deliveries in flight at once (16)"
    )
    add_workflow_argument(parser)
    parser.add_argument(
        "--bedrock-latency-ms",
        type=int,
        default=200,
        metavar="MS",
        help="added to every model call of the agent workflow (200)",
    )
    parser.add_argument(
        "--tools",
        action="store_true",
        help="agent workflow: the model asks for a lookup and an acting tool (a ticket)"
        " on every delivery; the report counts the tool's uses per key",
    )
    add_model_arguments(parser)
    parser.add_argument("--report", metavar="FILE", help="write the figures as JSON here")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from local.chaos.config import ChaosConfig  # noqa: PLC0415
    from local.chaos.run import run_chaos  # noqa: PLC0415 (heavy: the whole stack)

    _check_options(args)
    model_options(args)  # refused here, in one line, before the stack starts
    try:
        config = ChaosConfig(
            deliveries=args.deliveries,
            kills=args.kills,
            seed=args.seed,
            mcp_failure_rate=args.mcp_failure_rate,
            mcp_slow_rate=args.mcp_slow_rate,
            aws_fault_rate=args.aws_fault_rate,
            relay_failure_rate=args.relay_failure_rate,
            time_scale=args.time_scale,
            deadline_seconds=args.deadline,
            concurrency=args.concurrency,
            workflow=args.workflow,
            bedrock_latency_ms=args.bedrock_latency_ms,
            tools=args.tools,
            model_script=args.model_script,
            kill_worker=args.kill_worker,
        )
    except ValueError as exc:  # a combination the checks above do not name
        raise CommandError(str(exc), code=ErrorCode.BAD_OPTION) from None
    report_path = Path(args.report) if args.report else None
    if report_path is not None and not report_path.parent.is_dir():
        raise CommandError(
            f"--report: no directory {report_path.parent}", code=ErrorCode.BAD_OPTION
        )
    # SIGTERM stops the run as Ctrl-C does: the stack's child processes stop with it.
    signal.signal(signal.SIGTERM, _interrupt)
    report = run_chaos(config, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(report.table())
    if report_path is not None:
        report_path.write_text(json_text(report.to_dict()) + "\n", encoding="utf-8")
    return 0 if report.passed else 1


def _check_options(args: argparse.Namespace) -> None:
    """Each bound of :class:`~local.chaos.ChaosConfig`, named by its flag."""

    checks = [
        (args.deliveries >= 10, "--deliveries must be at least 10"),
        (args.kills >= 0, "--kills must not be negative"),
        (args.concurrency >= 1, "--concurrency must be at least 1"),
        (args.time_scale > 0, "--time-scale must be positive"),
        (args.deadline > 0, "--deadline must be positive"),
    ]
    for flag in ("mcp_failure_rate", "mcp_slow_rate", "aws_fault_rate", "relay_failure_rate"):
        option = "--" + flag.replace("_", "-")
        checks.append((0.0 <= getattr(args, flag) <= 1.0, f"{option} must be between 0 and 1"))
    for holds, message in checks:
        if not holds:
            raise CommandError(message, code=ErrorCode.BAD_OPTION)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
