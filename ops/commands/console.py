"""``relaylink-receiver console``: the operator's web console on 127.0.0.1 (never deployed)."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import errno
import functools
import os
import secrets
from typing import Any

from ops.commands.target_options import STACK_ENV, add_target_arguments, open_target


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "console",
        help="a local web console: deliveries, their journeys, repairs",
        description=(
            "Serve the operator console on 127.0.0.1 only. Its first line of output is its"
            " URL with a random token, new at each start; every request needs the token"
            " (changes: POSTs with the token in a header). It shows states, times, outcome"
            " codes and digests: never a body, a secret or the receiver URL."
        ),
    )
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        metavar="PORT",
        help="port on 127.0.0.1 (default: a free one)",
    )
    parser.add_argument(
        "--read-only", action="store_true", help="refuse every change (requeue, redrive, resolve)"
    )
    parser.add_argument(
        "--by",
        metavar="NAME",
        help="who decides the approvals decided here (local stack: default"
        " $RELAYLINK_OPERATOR, else your login name; deployed: your AWS principal is"
        " recorded, NAME beside it)",
    )
    add_target_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cli.errors import CommandError, ErrorCode
    from ops.console.routes import Console
    from ops.console.server import bind

    if not 0 <= args.port <= 65535:
        raise CommandError("--port must be between 0 and 65535", code=ErrorCode.BAD_OPTION)
    from ops import operator_identity
    from ops.commands.target_options import operator_call

    try:  # the caller's option first: refused as such, before any AWS call
        operator_identity.operator_name(args.by)
    except operator_identity.BadOperatorName as exc:
        raise CommandError(str(exc), code=ErrorCode.BAD_OPTION) from None
    target = open_target(args)
    if args.local:
        operator = operator_call(operator_identity.local_decider, args.by)
    else:
        caller = functools.partial(operator_identity.caller_arn, args.region)
        operator = operator_call(operator_identity.deployed_decider, caller, args.by)
    cloudwatch = None
    stack = None
    if not args.local:
        import boto3

        stack = args.stack or os.environ.get(STACK_ENV)
        cloudwatch = boto3.session.Session(region_name=args.region).client("cloudwatch")
    console = Console(
        target=target,
        token=secrets.token_urlsafe(24),
        target_label="local stack" if args.local else f"stack {stack}",
        read_only=args.read_only,
        cloudwatch=cloudwatch,
        stack_name=stack,
        operator=operator,
    )
    try:
        server = bind(console, args.port)
    except OSError as exc:
        busy = exc.errno == errno.EADDRINUSE
        raise CommandError(
            f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror}",
            code=ErrorCode.PORT_IN_USE if busy else ErrorCode.START_FAILED,
        ) from None
    port = server.server_address[1]
    print(f"console http://127.0.0.1:{port}/?token={console.token}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
