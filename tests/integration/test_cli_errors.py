"""Everything a user can get wrong with ``relaylink-receiver`` ends in one line, never a
traceback: ``relaylink-receiver COMMAND: error: CODE: message`` and exit status 2.

Run as the user runs it, a subprocess (``python -m ops.cli``), except where a case
needs many commands against one target: those call :func:`ops.cli.main` in-process
with stdout and stderr captured.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pty
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cli.errors import ErrorCode
from cli.state import LocalState, Resources
from ops.cli import build_parser, main
from tests.operator_harness import Stack, run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ops.cli"]
SECRET = "whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
MCP = "https://mcp.relaylink.example/mcp"
SUBPROCESS_SECONDS = 60


def run(*argv: str, environment: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``relaylink-receiver ARGV``; ``argv`` may start with ``-c CODE`` (a launcher)."""
    python = [sys.executable, *argv] if argv[0] == "-c" else [*CLI, *argv]
    return subprocess.run(
        python,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_SECONDS,
        check=False,
        cwd=ROOT,
        env=environment or _environment(),
    )


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(extra or {})}
    environment.pop("RELAYLINK_STACK", None)
    return environment


def one_error(stderr: str, command: str, code: ErrorCode) -> str:
    """The single line on stderr, checked for its shape; returns the message after the code."""
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    prefix = f"relaylink-receiver {command}: error: {code.value}: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0].removeprefix(prefix)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def stopped_stack(tmp_path: Path) -> Path:
    """The state file of a stack that is gone (SIGKILLed: the file stayed behind)."""
    nothing = f"http://127.0.0.1:{free_port()}"
    path = tmp_path / "s.json"
    LocalState(
        webhook_url=f"{nothing}/relaylink",
        mcp_url=f"{nothing}/mcp",
        effects_url=f"{nothing}/notify",
        aws_endpoint_url=nothing,
        region="us-east-1",
        signing_secrets=[SECRET],
        mcp_token="mcp_test",
        resources=Resources(
            table_name="inbox",
            work_queue_url=f"{nothing}/q/work",
            dead_letter_queue_url=f"{nothing}/q/dlq",
            relay_failure_queue_url=f"{nothing}/q/relay",
            signing_secrets_arn="arn:secret:signing",
            mcp_token_secret_arn="arn:secret:mcp",
            archive_bucket="archive",
        ),
    ).write(path)
    return path


class _Accepting(BaseHTTPRequestHandler):
    """A receiver that acknowledges every delivery (202), as the real one answers."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"outcome": "accepted"}'
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the test output clean


class _Unauthorized(_Accepting):
    """A receiver that holds another signing secret: every signature is refused (401)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/relaylink/s3cr3t-path"
    server.shutdown()
    server.server_close()


@pytest.fixture
def accepting_receiver() -> Iterator[str]:
    yield from _serving(_Accepting)


@pytest.fixture
def unauthorized_receiver() -> Iterator[str]:
    yield from _serving(_Unauthorized)


# --- a stopped or unreachable stack --------------------------------------------------------

OPERATOR_COMMANDS = [
    ["inbox", "list"],
    ["inbox", "show", "d-1"],
    ["quarantine", "list"],
    ["redrive"],
    ["requeue", "d-1"],
    ["effects", "list"],
    ["budget", "show"],
]


@pytest.mark.parametrize("argv", OPERATOR_COMMANDS, ids=" ".join)
def test_operator_command_on_a_stopped_stack_asks_whether_it_runs(
    argv: list[str], stopped_stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_cli(capsys, [*argv, "--local", str(stopped_stack)])
    assert (status, out) == (2, "")
    message = one_error(err, argv[0], ErrorCode.STACK_UNREACHABLE)
    state = LocalState.read(stopped_stack)
    assert message.startswith(f"no local stack answers at {state.aws_endpoint_url[7:]}")
    assert message.endswith("is `relaylink-receiver local` running?")


def test_inbox_list_on_a_stopped_stack_as_a_subprocess(stopped_stack: Path) -> None:
    done = run("inbox", "list", "--local", str(stopped_stack))
    assert (done.returncode, done.stdout) == (2, "")
    assert "is `relaylink-receiver local` running?" in one_error(
        done.stderr, "inbox", ErrorCode.STACK_UNREACHABLE
    )


def test_send_to_a_stopped_local_stack(stopped_stack: Path) -> None:
    done = run("send", "--local", str(stopped_stack))
    assert (done.returncode, done.stdout) == (2, "")
    message = one_error(done.stderr, "send", ErrorCode.STACK_UNREACHABLE)
    webhook = LocalState.read(stopped_stack).webhook_url
    assert f"no local stack answers at {webhook[7:].split('/')[0]}" in message


def test_a_missing_state_file_says_the_stack_is_not_running(tmp_path: Path) -> None:
    done = run("quarantine", "list", "--local", str(tmp_path / "gone.json"))
    assert done.returncode == 2
    message = one_error(done.stderr, "quarantine", ErrorCode.STACK_UNREACHABLE)
    assert message.startswith(f"no state file {tmp_path / 'gone.json'}")


# --- the state file: a directory, unreadable, not a state file -----------------------------


def test_a_directory_as_state_file(tmp_path: Path) -> None:
    for argv in (["inbox", "list", "--local"], ["send", "--local"]):
        done = run(*argv, str(tmp_path))
        assert done.returncode == 2
        message = one_error(done.stderr, argv[0], ErrorCode.STATE_FILE)
        assert message.startswith(f"{tmp_path} is a directory")
        assert "Errno" not in message


def test_a_directory_as_the_state_file_local_writes(tmp_path: Path) -> None:
    done = run("local", "--port", "0", "--state-file", str(tmp_path))
    assert done.returncode == 2
    assert "is a directory" in one_error(done.stderr, "local", ErrorCode.STATE_FILE)


def test_an_unreadable_state_file(tmp_path: Path) -> None:
    # Below a regular file: no read can open it, whoever runs the test (root included).
    beside = tmp_path / "file"
    beside.write_text("x")
    done = run("budget", "show", "--local", str(beside / "s.json"))
    assert done.returncode == 2
    message = one_error(done.stderr, "budget", ErrorCode.STATE_FILE)
    assert message == f"cannot read the state file {beside / 's.json'}: not a directory"


@pytest.mark.parametrize("content", [b"{}", b"not json", b"\xff\xfe binary"])
def test_a_file_that_is_not_a_state_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(content)
    done = run("effects", "list", "--local", str(path))
    assert done.returncode == 2
    message = one_error(done.stderr, "effects", ErrorCode.STATE_FILE)
    assert message == f"{path} is not a local stack state file"


# --- local on a busy port ------------------------------------------------------------------


def test_local_on_a_busy_port_names_it_and_how_to_pick_another() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("local", "--port", str(port))
    assert (done.returncode, done.stdout) == (2, "")
    message = one_error(done.stderr, "local", ErrorCode.PORT_IN_USE)
    assert message.startswith(f"port {port} is in use")
    assert "--port N" in message and "--port 0" in message
    assert "relaylink-local-" not in message  # no run folder (deleted on exit) named


def test_console_on_a_busy_port_says_so_in_the_one_form(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, out, err = run_cli(capsys, stack.cli("console", "--port", str(port)))
    assert (status, out) == (2, "")
    message = one_error(err, "console", ErrorCode.PORT_IN_USE)
    assert message == f"cannot listen on 127.0.0.1:{port}: Address already in use"


# --- a closed pipe -------------------------------------------------------------------------


def test_a_closed_pipe_ends_quietly(stack: Stack) -> None:
    for _ in range(3):
        stack.accept()
    with subprocess.Popen(
        [*CLI, *stack.cli("inbox", "list")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=_environment(),
    ) as listing:
        assert listing.stdout is not None and listing.stderr is not None
        listing.stdout.close()  # as `| head` does once it has its lines
        stderr = listing.stderr.read()
        status = listing.wait(timeout=SUBPROCESS_SECONDS)
    assert status == 141  # 128 + SIGPIPE, what a shell reports for `inbox list | head`
    assert stderr == b""


# --- bad option values, named by their flag ------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["send", "--duplicate-rate", "2"], "--duplicate-rate must be between 0 and 1"),
        (["send", "--count", "0"], "--count must be at least 1"),
        (["send", "--concurrency", "0"], "--concurrency must be at least 1"),
        (["send", "--time-scale", "inf"], "--time-scale must be a positive number"),
        (["send", "--timeout", "-1"], "--timeout must be positive"),
        (["send", "--wait-deadline", "0"], "--wait-deadline must be positive"),
        (
            ["send", "--give-up-after", "soon"],
            "--give-up-after must be a number of seconds (0 or more) or 'contract'",
        ),
        (["send", "--url", "ftp://x"], "--url must be an http:// or https:// URL"),
        (["local", "--mcp-failure-rate", "1.5"], "--mcp-failure-rate must be between 0 and 1"),
        (["local", "--mcp-latency-ms", "-1"], "--mcp-latency-ms must not be negative"),
        (["local", "--port", "70000"], "--port must be between 0 and 65535"),
        (
            ["local", "--trace-sample-percent", "101"],
            "--trace-sample-percent must be between 0 and 100",
        ),
        (["local", "--workflow-setting", "novalue"], "--workflow-setting takes NAME=VALUE"),
        (["inbox", "list", "--limit", "0"], "--limit must be at least 1"),
        (["chaos", "--aws-fault-rate", "3"], "--aws-fault-rate must be between 0 and 1"),
        (["chaos", "--deliveries", "3"], "--deliveries must be at least 10"),
        (["simulate", "--seeds", "0"], "--seeds must be at least 1"),
        (["simulate", "--deliveries", "0"], "--deliveries must be 1 to 50"),
    ],
)
def test_a_bad_option_value_is_named_by_its_flag(argv: list[str], message: str) -> None:
    sending = ["--secret", SECRET, "--mcp-url", MCP] if argv[0] == "send" else []
    if argv[0] == "send" and "--url" not in argv:
        sending += ["--url", "http://127.0.0.1:9/relaylink"]
    done = run(*argv, *sending)
    assert (done.returncode, done.stdout) == (2, "")
    assert one_error(done.stderr, argv[0], ErrorCode.BAD_OPTION) == message


def test_argparse_errors_are_one_line_too() -> None:
    done = run("inbox", "list", "--state", "finished")
    assert done.returncode == 2
    message = one_error(done.stderr, "inbox list", ErrorCode.USAGE)
    assert "argument --state: invalid choice: 'finished'" in message
    done = run("--no-such-option")
    assert done.returncode == 2
    assert done.stderr.startswith("relaylink-receiver: error: usage: ")


@pytest.mark.parametrize(
    ("argv", "prog", "said"),
    [
        (["sned"], "relaylink-receiver", "argument COMMAND: invalid choice: 'sned'"),
        (["approvals", "aprove", "d-1"], "relaylink-receiver approvals", "invalid choice"),
        (["send", "--count", "1", "--wiat"], "relaylink-receiver", "unrecognized arguments"),
        (["local", "--kill-workr", "x"], "relaylink-receiver", "unrecognized arguments"),
    ],
)
def test_a_typo_gets_the_nearest_command_or_option(argv: list[str], prog: str, said: str) -> None:
    done = run(*argv)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{prog}: error: usage: ")
    assert said in line
    nearest = {"sned": "send", "aprove": "approve", "--wiat": "--wait", "--kill-workr": "x"}
    typo = next(word for word in argv if word in nearest)
    expected = "--kill-worker" if typo == "--kill-workr" else nearest[typo]
    assert line.endswith(f"; did you mean {expected!r}?")


@pytest.mark.parametrize("command", ["local", "chaos"])
def test_an_invalid_model_script_is_refused_at_start_naming_file_and_entry(
    tmp_path: Path, command: str
) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"turns": [{"text": "a"}, {"tool_use": [{"name": "x", "inupt": {}}]}]}')
    done = run(command, "--workflow", "agent", "--model-script", str(script))
    assert (done.returncode, done.stdout) == (2, "")
    assert one_error(done.stderr, command, ErrorCode.MODEL_SCRIPT_INVALID) == (
        f"--model-script {script}: turns[1].tool_use[0]: unknown key 'inupt'"
        " (did you mean 'input'?)"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kill-worker", "after:tol:x"], "--kill-worker: KIND 'tol' is unknown: did you mean"),
        (["--kill-worker", "after:tool"], "--kill-worker: 'after:tool' is not WHEN:KIND:NAME"),
        (["--kill-worker", "after:tool:x"], "--kill-worker after:tool:x: a tool's records"),
    ],
)
def test_a_kill_point_that_cannot_be_is_refused_at_start(argv: list[str], message: str) -> None:
    done = run("local", *argv)
    assert (done.returncode, done.stdout) == (2, "")
    assert one_error(done.stderr, "local", ErrorCode.BAD_OPTION).startswith(message)


def test_wait_needs_a_local_stack() -> None:
    done = run("send", "--url", "http://127.0.0.1:9/r", "--secret", SECRET, "--wait")
    assert done.returncode == 2
    assert one_error(done.stderr, "send", ErrorCode.USAGE).startswith("--wait needs --local")


# --- missing AWS region or credentials -----------------------------------------------------

NO_AWS_CONFIGURATION = {
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",  # no wait for an instance role off EC2
}


def _without_aws(**extra: str) -> dict[str, str]:
    environment = _environment({**NO_AWS_CONFIGURATION, **extra})
    for name in list(environment):
        if name.startswith("AWS_") and name not in NO_AWS_CONFIGURATION and name not in extra:
            del environment[name]
    return environment


def test_no_aws_region_says_what_to_set() -> None:
    done = run("inbox", "list", "--stack", "relaylink-receiver-dev", environment=_without_aws())
    assert done.returncode == 2
    message = one_error(done.stderr, "inbox", ErrorCode.AWS_REGION)
    assert "--region" in message and "AWS_DEFAULT_REGION" in message


def test_no_aws_credentials_says_what_to_set() -> None:
    done = run(
        *["redrive", "--stack", "relaylink-receiver-dev", "--region", "eu-west-1"],
        environment=_without_aws(),
    )
    assert done.returncode == 2
    message = one_error(done.stderr, "redrive", ErrorCode.AWS_CREDENTIALS)
    assert "AWS_PROFILE" in message and "AWS_ACCESS_KEY_ID" in message


# --- a missing optional extra --------------------------------------------------------------

# Starts the CLI with the [local] extra's packages unimportable, as after a plain
# `pip install relaylink-receiver`.
WITHOUT_LOCAL_EXTRA = """
import sys

class WithoutLocalExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"moto", "werkzeug", "uvicorn", "starlette", "httpx"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, WithoutLocalExtra())
from ops.cli import main
sys.exit(main())
"""


@pytest.mark.parametrize(
    "argv",
    [["local", "--port", "0"], ["send", "--url", "http://127.0.0.1:9/r", "--secret", SECRET]],
    ids=lambda argv: argv[0],
)
def test_a_missing_extra_names_the_pip_install(argv: list[str]) -> None:
    done = run("-c", WITHOUT_LOCAL_EXTRA, *argv)
    assert done.returncode == 2
    message = one_error(done.stderr, argv[0], ErrorCode.MISSING_EXTRA)
    assert message.endswith("from the [local] extra: pip install 'relaylink-receiver[local]'")


# --- --version and help --------------------------------------------------------------------


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == (
        f"relaylink-receiver {importlib.metadata.version('relaylink-receiver')}"
    )


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_every_option_of_every_command_has_help() -> None:
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 10  # the walk reached the subcommands
    undocumented = [
        f"{parser.prog} {'/'.join(action.option_strings)}"
        for parser in parsers
        for action in parser._actions
        if action.option_strings and not (action.help and action.help.strip())
    ]
    assert undocumented == []


# --- send: the first failed attempt, a bounded give-up from a terminal, --json -------------


def test_send_says_at_the_first_failed_attempt_that_nothing_answers() -> None:
    port = free_port()
    done = run(
        *["send", "--url", f"http://127.0.0.1:{port}/relaylink/s3cr3t-path", "--secret", SECRET],
        *["--mcp-url", MCP, "--count", "3", "--give-up-after", "0.2", "--time-scale", "1000"],
        "--json",
    )
    assert done.returncode == 1  # ran; nothing acknowledged
    warnings = done.stderr.splitlines()
    assert warnings == [
        f"relaylink-receiver send: warning: {ErrorCode.RECEIVER_UNREACHABLE.value}: nothing"
        f" answers at 127.0.0.1:{port}; retrying for up to 0.2 s (--give-up-after)"
    ]
    summary = json.loads(done.stdout)
    # 0.2 s at --time-scale 1000 is 200 contract seconds: the retries after 30 s and 2 min.
    assert [r["attempts"] for r in summary["results"]] == [3, 3, 3]
    assert summary["gave_up"] == 3
    assert "s3cr3t-path" not in done.stdout + done.stderr


def test_send_names_the_signing_secret_on_a_401(unauthorized_receiver: str) -> None:
    done = run(
        *["send", "--url", unauthorized_receiver, "--secret", SECRET, "--mcp-url", MCP],
        *["--give-up-after", "0", "--json"],
    )
    assert done.returncode == 1
    (warning,) = done.stderr.splitlines()
    message = warning.split(f"{ErrorCode.ATTEMPT_REFUSED.value}: ", 1)[1]
    assert message.startswith("127.0.0.1:")
    assert "answered 401: the receiver refused the signature, most likely a signing secret" in (
        message
    )
    assert "--secret or $RELAYLINK_SIGNING_SECRET" in message


def _first_warning(stdout_is_a_terminal: bool, extra: Sequence[str] = ()) -> tuple[str, int, str]:
    """Send to nothing; the first warning line, then Ctrl-C: the exit status and the
    rest of stderr."""
    port = free_port()
    argv = [*CLI, "send", "--url", f"http://127.0.0.1:{port}/r", "--secret", SECRET, *extra]
    terminal, other_end = pty.openpty() if stdout_is_a_terminal else (-1, -1)
    try:
        with subprocess.Popen(
            [*argv, "--mcp-url", MCP],
            stdout=other_end if stdout_is_a_terminal else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=_environment(),
        ) as sending:
            assert sending.stderr is not None
            line = sending.stderr.readline()
            sending.send_signal(signal.SIGINT)
            status = sending.wait(timeout=SUBPROCESS_SECONDS)
            rest = sending.stderr.read()
            assert "Traceback" not in rest
    finally:
        if stdout_is_a_terminal:
            os.close(terminal)
            os.close(other_end)
    return line, status, rest


@pytest.mark.parametrize("stdout_is_a_terminal", [True, False])
def test_send_gives_up_after_30_seconds_by_default_terminal_or_not(
    stdout_is_a_terminal: bool,
) -> None:
    line, status, rest = _first_warning(stdout_is_a_terminal=stdout_is_a_terminal)
    assert line.endswith("retrying for up to 30 s (--give-up-after)\n")
    assert status == 130  # Ctrl-C: the shell's status for SIGINT
    # Interrupted, it says what it had sent (nothing was acknowledged: nothing answers).
    assert rest == (
        "relaylink-receiver send: warning: interrupted: 0 of 1 deliveries acknowledged,"
        " 0 gave up, 1 not finished (a delivery not finished may still have reached the"
        " receiver)\n"
    )


def test_send_keeps_the_contract_schedule_when_asked() -> None:
    line, status, _rest = _first_warning(
        stdout_is_a_terminal=False, extra=["--give-up-after", "contract"]
    )
    assert line.endswith("retrying on the contract's schedule for up to 3 days (Ctrl-C stops)\n")
    assert status == 130


def _keys_sorted(document: object) -> bool:
    if isinstance(document, dict):
        return list(document) == sorted(document) and all(
            _keys_sorted(v) for v in document.values()
        )
    if isinstance(document, list):
        return all(_keys_sorted(v) for v in document)
    return True


def test_send_json_keys_are_sorted(accepting_receiver: str) -> None:
    done = run(
        *["send", "--url", accepting_receiver, "--secret", SECRET, "--mcp-url", MCP],
        *["--count", "2", "--json"],
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["acknowledged"] == 2
    assert _keys_sorted(summary)


def test_operator_json_keys_are_sorted(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    delivery_id = stack.accept()
    for argv in (["inbox", "list"], ["inbox", "show", delivery_id], ["budget", "show"]):
        status, out, _ = run_cli(capsys, stack.cli(*argv, "--json"))
        assert status == 0
        assert _keys_sorted(json.loads(out))


def test_main_keeps_the_traceback_of_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a user can cause becomes one line: a bug still shows where it is."""

    def broken(args: argparse.Namespace) -> int:
        raise ZeroDivisionError("a bug")

    parser = build_parser()
    monkeypatch.setattr("ops.cli.build_parser", lambda: parser)
    parser.set_defaults(handler=broken)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.choices["demo"].set_defaults(handler=broken)
    with pytest.raises(ZeroDivisionError):
        main(["demo"])
