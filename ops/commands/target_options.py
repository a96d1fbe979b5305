"""What every operator command shares: the options that name its target, and its errors.

``--stack`` (a deployed stack) or ``--local`` (a local one), ``--region``; kept
import-light so that ``--help`` stays quick.
"""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from cli.state_file import add_state_file_argument

if TYPE_CHECKING:
    from ops.target import Target

STACK_ENV = "RELAYLINK_STACK"


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """``--stack NAME`` (a deployed stack) or ``--local STATE_FILE`` (a local one)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--stack",
        metavar="NAME",
        help=f"deployed stack whose outputs name the resources (default: ${STACK_ENV});"
        " AWS credentials from the default chain",
    )
    add_state_file_argument(
        where, "--local", "a local stack's state file (relaylink-receiver local)"
    )
    parser.add_argument("--region", help="AWS region of --stack (default: the SDK's)")


def open_target(args: argparse.Namespace) -> Target:
    """The :class:`~ops.target.Target` the options name; user errors raise CommandError."""
    from cli.errors import CommandError, ErrorCode
    from cli.state_file import read_running_stack
    from ops.target import OperatorError, Target

    if args.local:
        return Target.from_local(read_running_stack(args.local))
    stack = args.stack or os.environ.get(STACK_ENV)
    if not stack:
        raise CommandError(f"say where: --stack NAME (or ${STACK_ENV}) or --local STATE_FILE")
    try:
        return Target.from_stack(stack, region=args.region)
    except OperatorError as exc:
        raise CommandError(str(exc), code=ErrorCode.AWS_ERROR) from None


def operator_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call an operator function; its OperatorError becomes a one-line CommandError.

    What the SDK raises about the caller's set-up (no region, no credentials, an
    endpoint that does not answer) is left to the CLI's entry point, which names
    what to set (:mod:`ops.cli_failures`).
    """
    from botocore.exceptions import ClientError

    from cli.errors import CommandError, ErrorCode
    from functions.core.errors import StorageUnavailable
    from ops.target import OperatorError, describe_aws_error

    try:
        return fn(*args, **kwargs)
    except OperatorError as exc:
        raise CommandError(str(exc), code=ErrorCode.AWS_ERROR) from None
    except StorageUnavailable:
        raise CommandError(
            "AWS is throttling or unavailable; try again", code=ErrorCode.AWS_UNAVAILABLE
        ) from None
    except ClientError as exc:
        # The adapters let through what is not weather: a missing table, a permission.
        raise CommandError(describe_aws_error(exc), code=ErrorCode.AWS_ERROR) from None
