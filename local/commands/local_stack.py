"""``relaylink-receiver local``: run the whole stack on this machine until interrupted."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from cli.errors import CommandError, ErrorCode
from cli.state_file import (
    add_state_file_argument,
    default_state_file,
    make_private_folder,
)
from functions.core import settings_table

if TYPE_CHECKING:
    from local.kill_point import KillPoint
    from local.model_script import ModelScript


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "local",
        help="run the whole pipeline locally (AWS emulated) until interrupted",
        description=(
            "Runs the receiver behind a local front door, the relay, worker and reconciler "
            "in a second process, moto's server for AWS, a demo MCP server and a notification "
            "target that counts effects. Stops cleanly on Ctrl-C or SIGTERM."
        ),
    )
    parser.add_argument(
        "--port", type=int, default=8080, help="front door port (default 8080; 0 picks a free one)"
    )
    parser.add_argument(
        "--signing-secret",
        action="append",
        default=[],
        metavar="WHSEC",
        help="an active signing secret (whsec_...); repeat for rotation; default: generated",
    )
    parser.add_argument("--mcp-token", help="the MCP server's bearer token (default: generated)")
    parser.add_argument(
        "--mcp-latency-ms",
        type=int,
        default=0,
        metavar="MS",
        help="delay every answer of the demo MCP server by MS milliseconds (default 0)",
    )
    parser.add_argument(
        "--mcp-failure-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="fraction of MCP requests answered 503, between 0 and 1 (default 0)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="makes the MCP server's failures and the emulator repeatable (default 0)",
    )
    add_state_file_argument(
        parser, "--state-file", "write URLs, secrets and pids here; one stack per file"
    )
    parser.add_argument("--run-dir", metavar="DIR", help="keep logs and checkpoints here")
    parser.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="also send every span to this OTLP/HTTP collector (JSON, to URL/v1/traces),"
        " e.g. http://127.0.0.1:4318 for a local Jaeger; the run dir keeps them either way",
    )
    parser.add_argument(
        "--trace-sample-percent",
        type=int,
        default=settings_table.TRACE_SAMPLE_PERCENT.default,
        metavar="N",
        help="percent of new deliveries whose spans are kept, 0 to 100 (the deployed "
        "trace_sample_percent; default 100: every delivery); an unsampled delivery keeps "
        "its trace id, and no span anywhere",
    )
    parser.add_argument(
        "--workflow",
        default="notify",
        help="archive, notify, agent or module:attribute (default notify: the effects "
        "URL counts its notifications)",
    )
    parser.add_argument(
        "--workflow-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one WORKFLOW_SETTINGS entry (the deployed workflow_setting_<name>; a short"
        " key such as agent_tools works too); repeat",
    )
    parser.add_argument(
        "--workflow-source",
        metavar="DIR",
        help="a folder of your workflow's packages, put first on the worker's import path",
    )
    add_model_arguments(parser)
    parser.set_defaults(handler=run)


def add_model_arguments(parser: Any) -> None:
    """``--model-script`` and ``--kill-worker``, shared by ``local`` and ``chaos``."""
    parser.add_argument(
        "--model-script",
        metavar="FILE",
        help="a model script (JSON): the model's answers per delivery, turn by turn (text,"
        " tool uses, usage), served by the local Bedrock emulator (docs/workflows.md)",
    )
    parser.add_argument(
        "--kill-worker",
        metavar="WHEN:KIND:NAME",
        help="SIGKILL the worker once at this point of your workflow, e.g."
        " after:tool:open_ticket, before:tool:NAME, before:step:NAME, after:effect:NAME"
        " (docs/local.md)",
    )


def model_options(args: argparse.Namespace) -> tuple[ModelScript | None, KillPoint | None]:
    """The parsed ``--model-script`` and ``--kill-worker``.

    Raises:
        CommandError: a script that is not valid (one line naming the file, the entry and
            what is wrong), a kill point that is not one, or a tool point without a model.
    """
    from local.kill_point import KillPoint, Kind  # noqa: PLC0415
    from local.model_script import ModelScriptError, load_model_script  # noqa: PLC0415

    script = None
    if args.model_script:
        try:
            script = load_model_script(args.model_script)
        except ModelScriptError as exc:
            invalid = ErrorCode.MODEL_SCRIPT_INVALID
            raise CommandError(f"--model-script {exc}", code=invalid) from None
    point = None
    if args.kill_worker:
        try:
            point = KillPoint.parse(args.kill_worker)
        except ValueError as exc:
            raise CommandError(f"--kill-worker: {exc}", code=ErrorCode.BAD_OPTION) from None
        if point.kind is Kind.TOOL and args.workflow != "agent" and script is None:
            raise CommandError(
                f"--kill-worker {point}: a tool's records are named after the model's tool-use"
                " ids; use --workflow agent or give --model-script",
                code=ErrorCode.BAD_OPTION,
            )
    return script, point


def _workflow_settings(pairs: list[str]) -> dict[str, str]:

    settings: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise CommandError("--workflow-setting takes NAME=VALUE", code=ErrorCode.BAD_OPTION)
        settings[name.strip().lower()] = value
    from functions.core.settings_table import canonical_workflow_settings  # noqa: PLC0415

    try:
        # One spelling everywhere: agent_tools here too, beside the setting's own name.
        return canonical_workflow_settings(settings)
    except ValueError as exc:
        raise CommandError(f"--workflow-setting: {exc}", code=ErrorCode.BAD_OPTION) from None


def run(args: argparse.Namespace) -> int:

    _check_options(args)
    settings = _workflow_settings(args.workflow_setting)
    script, point = model_options(args)
    # Checked before the stack starts: its front door is a child process, whose bind
    # error would surface only as an exit, with logs in a folder deleted on the way out.
    if args.port and not _port_free(args.port):
        raise CommandError(
            f"port {args.port} is in use (another `relaylink-receiver local`?);"
            " pick another with --port N, or --port 0 for a free one",
            code=ErrorCode.PORT_IN_USE,
        )
    return _serve(args, settings, script, point)


def _check_options(args: argparse.Namespace) -> None:
    from functions.core.signature import SigningSecret  # noqa: PLC0415

    bad = ErrorCode.BAD_OPTION
    for secret in args.signing_secret:
        try:
            SigningSecret.parse(secret)
        except ValueError:
            raise CommandError(
                "--signing-secret must be whsec_ followed by base64", code=bad
            ) from None
    if not 0.0 <= args.mcp_failure_rate <= 1.0:
        raise CommandError("--mcp-failure-rate must be between 0 and 1", code=bad)
    if args.mcp_latency_ms < 0:
        raise CommandError("--mcp-latency-ms must not be negative", code=bad)
    if not 0 <= args.port <= 65535:
        raise CommandError("--port must be between 0 and 65535", code=bad)
    if args.workflow_source and not os.path.isdir(args.workflow_source):
        raise CommandError(f"--workflow-source: no folder {args.workflow_source}", code=bad)
    if args.state_file:
        folder = os.path.dirname(os.path.abspath(args.state_file))
        if args.state_file == default_state_file():
            make_private_folder(args.state_file)
        if os.path.isdir(args.state_file):
            raise CommandError(
                f"--state-file {args.state_file} is a directory; give a file path in it",
                code=ErrorCode.STATE_FILE,
            )
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise CommandError(f"--state-file: cannot write in {folder}", code=ErrorCode.STATE_FILE)
    if args.run_dir and os.path.exists(args.run_dir) and not os.path.isdir(args.run_dir):
        raise CommandError(f"--run-dir {args.run_dir} is not a folder", code=bad)
    if args.otlp_endpoint and not args.otlp_endpoint.startswith(("http://", "https://")):
        raise CommandError("--otlp-endpoint is an http:// or https:// URL", code=bad)
    _check_trace_sample_percent(args.trace_sample_percent, code=bad)


def _check_trace_sample_percent(percent: int, *, code: ErrorCode) -> None:
    sampling = settings_table.TRACE_SAMPLE_PERCENT
    if not sampling.low <= percent <= sampling.high:
        message = f"--trace-sample-percent must be between {sampling.low} and {sampling.high}"
        raise CommandError(message, code=code)


def _port_free(port: int) -> bool:
    """Whether the front door could listen on 127.0.0.1:``port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As http.server does: a port whose old connections linger in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _serve(
    args: argparse.Namespace,
    workflow_settings: dict[str, str],
    script: ModelScript | None,
    point: KillPoint | None,
) -> int:
    from local.stack import LocalStack, StartRefused  # noqa: PLC0415
    from local.stack_options import StackOptions  # noqa: PLC0415
    from local.state_lock import StateFileBusy  # noqa: PLC0415

    options = StackOptions(
        port=args.port,
        signing_secrets=tuple(args.signing_secret),
        mcp_token=args.mcp_token,
        mcp_latency_ms=args.mcp_latency_ms,
        mcp_failure_rate=args.mcp_failure_rate,
        seed=args.seed,
        state_file=args.state_file,
        run_dir=args.run_dir,
        otlp_endpoint=args.otlp_endpoint,
        trace_sample_percent=args.trace_sample_percent,
        workflow=args.workflow,
        workflow_settings=workflow_settings,
        workflow_source=os.path.abspath(args.workflow_source) if args.workflow_source else None,
        model_script=script,
        kill_worker=point,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    logs = (
        f"its logs are in {args.run_dir}"
        if args.run_dir
        else "rerun with --run-dir DIR to keep its logs"
    )
    try:
        stack = LocalStack(options, announce=lambda line: print(line, flush=True))
        stack.__enter__()
    except StateFileBusy as exc:
        raise CommandError(str(exc), code=ErrorCode.STATE_FILE_IN_USE) from None
    except OSError as exc:
        raise CommandError(
            f"cannot start: {exc.strerror or exc}", code=ErrorCode.START_FAILED
        ) from None
    except StartRefused as refusal:
        raise CommandError(str(refusal), code=ErrorCode.WORKFLOW_INVALID) from None
    except (RuntimeError, TimeoutError):
        # Their message names the run folder, deleted by now unless --run-dir kept it.
        raise CommandError(
            f"the local stack did not start; {logs}", code=ErrorCode.START_FAILED
        ) from None
    try:
        state = stack.state
        print(f"webhook URL   {state.webhook_url}")
        print(f"MCP URL       {state.mcp_url}")
        print(f"effects URL   {state.effects_url}")
        print(f"AWS endpoint  {state.aws_endpoint_url}")
        if not args.signing_secret:
            print(f"signing secret (generated)  {state.signing_secrets[0]}")
        if args.state_file:
            print(f"state file    {args.state_file}")
        if state.bedrock_url:
            print(f"Bedrock URL   {state.bedrock_url}")
        if point is not None:
            print(f"kill point    {point} (once)")
        print(f"logs          {stack.run_dir}")
        print("ready; Ctrl-C stops", flush=True)
        stop.wait()
    finally:
        print("stopping ...", file=sys.stderr, flush=True)
        stack.__exit__(None, None, None)
    return 0


def add_workflow_argument(parser: Any) -> None:
    """``--workflow``, shared by the commands that start a local stack."""
    parser.add_argument(
        "--workflow",
        default="notify",
        metavar="NAME",
        help=(
            "the worker's workflow: archive, notify, agent (starts the Bedrock emulator "
            "and an alert topic) or module:factory (default: notify)"
        ),
    )
