"""The whole pipeline on one machine: the supervisor of the local stack.

This process hosts what stands in for other people's systems — RelayLink's MCP
server (:mod:`local.mcp_server`) and the notification target that counts effects
(:mod:`local.notify_sink`) — and starts AWS (moto's server,
:mod:`local.aws_emulator`) in a process of its own, so that moto, which serves one
request at a time, has an interpreter lock to itself. Our code runs in two child
processes, as Lambda would run it in separate containers:

* the **front door** (:mod:`local.front_door`): API Gateway + the receiver;
* the **worker side** (:mod:`local.event_sources`): stream → relay,
  SQS → worker, schedule → reconciler.

Either child can be SIGKILLed; the supervisor starts a new one at once (the
front door on the same port). Resources are created from the same definitions
the CDK stack uses (:mod:`local.aws_resources`, :mod:`local.function_environments`);
the options (:mod:`local.stack_options`) compress time where the deployed stack waits
minutes. :mod:`local.stack_probes` reads what the stack holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypeVar

from cli.aws_clients import AwsClients
from cli.state import LocalState, Resources, emulator_clients
from functions.workflows.notify import SETTING_NOTIFY_SECRET_ARN
from local import bedrock_emulator, stack_probes
from local.alert_counter import AlertCounter
from local.aws_emulator import AwsEmulatorProcess
from local.aws_emulator.process import free_port
from local.aws_resources import create_alert_topic, create_secret, create_stack_resources
from local.child import refusal_in
from local.function_environments import front_door_environment, worker_side_environment
from local.kill_point import KillPointWatch, Kind
from local.mcp_server import RunningServer, start_in_thread
from local.notify_sink import NotifySinkServer
from local.stack_options import StackOptions
from local.state_lock import StateFileLock

# "" in the repository, "relaylink_receiver." when installed from the wheel: the
# children run the same copy of ``local`` as this process.
_PREFIX = (__package__ or "local").removesuffix("local")

Role = Literal["front_door", "worker"]
ROLES: tuple[Role, ...] = ("front_door", "worker")
T = TypeVar("T")
REGION = "us-east-1"
PREFIX = "relaylink-local"
READY_DEADLINE_SECONDS = 60.0
# The stack's span collector: every function's spans, one OTLP-JSON line each.
SPANS_FILE_NAME = "spans.jsonl"
STOP_DEADLINE_SECONDS = 10.0


def generate_signing_secret() -> str:
    """A Standard Webhooks endpoint secret: ``whsec_`` + base64 of 32 random bytes."""
    import base64  # noqa: PLC0415

    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


@dataclass(frozen=True, slots=True)
class KilledProcess:
    """A child process killed by :meth:`LocalStack.kill_and_inspect` (epoch seconds)."""

    pid: int
    started_at: float
    killed_at: float


class StartRefused(RuntimeError):
    """A child refused to start for a reason the user fixes (its one line)."""


@dataclass
class _Child:
    role: Role
    command: list[str]
    environment: dict[str, str]
    ready_file: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0  # epoch seconds of the current process's start

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.ready_file.unlink()
        self.started_at = time.time()
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                env=self.environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor only
            )

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else 0

    def ready(self) -> bool:
        try:
            return self.ready_file.read_text() == str(self.pid)
        except FileNotFoundError:
            return False

    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class LocalStack:
    """Start with ``with LocalStack(options) as stack:``; everything stops on exit."""

    options: StackOptions = field(default_factory=StackOptions)
    emulator: AwsEmulatorProcess | None = None
    mcp: RunningServer | None = None
    sink: NotifySinkServer | None = None
    bedrock: bedrock_emulator.RunningEmulator | None = None
    alerts: AlertCounter | None = None
    kill_point: KillPointWatch | None = None
    # Told one line when the kill point fires (the `local` command prints it).
    announce: Callable[[str], None] = field(default=lambda line: None)
    _state: LocalState | None = None
    _children: dict[Role, _Child] = field(default_factory=dict)
    _run_dir: Path | None = None
    _owns_run_dir: bool = False
    # Re-entrant: kill_and_inspect holds it while its inspection reads the state.
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _monitor: threading.Thread | None = None
    _state_lock: StateFileLock | None = None

    # --- lifecycle -------------------------------------------------------------
    def __enter__(self) -> LocalStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        options = self.options
        if options.state_file:
            # Before anything starts: a live stack's state file is refused, not taken.
            lock = StateFileLock(Path(options.state_file))
            lock.acquire()
            self._state_lock = lock
        if options.run_dir:
            self._run_dir = Path(options.run_dir)
            self._run_dir.mkdir(parents=True, exist_ok=True)
        else:
            self._run_dir = Path(tempfile.mkdtemp(prefix="relaylink-local-"))
            self._owns_run_dir = True
        self.emulator = AwsEmulatorProcess(
            seed=options.seed, log_file=self._run_dir / "aws_emulator.log"
        )
        self.emulator.start()
        signing = list(options.signing_secrets) or [generate_signing_secret()]
        token = options.mcp_token or "mcp_" + secrets.token_urlsafe(24)
        self.mcp = start_in_thread(
            token=token,
            latency_ms=options.mcp_latency_ms,
            failure_rate=options.mcp_failure_rate,
            seed=options.seed,
        )
        # The notify workflow's POSTs are signed, and the sink verifies each (a key of
        # the deployer's own, named in the settings, is theirs to verify).
        notify_key = None
        if (
            options.workflow == "notify"
            and SETTING_NOTIFY_SECRET_ARN not in options.workflow_settings
        ):
            notify_key = generate_signing_secret()
        self.sink = NotifySinkServer(signing_secret=notify_key).start()
        resources = self._create_resources(signing, token)
        worker_options = options
        # The notify signing key's secret, for another process that notifies the same
        # sink (the bench's peers): None when the settings name the deployer's own.
        self.notify_secret_arn: str | None = None
        if notify_key is not None:
            arn = self._create_notify_secret(resources, notify_key)
            self.notify_secret_arn = arn
            settings = {**options.workflow_settings, SETTING_NOTIFY_SECRET_ARN: arn}
            worker_options = replace(options, workflow_settings=settings)
        if options.model:
            model = bedrock_emulator.BedrockEmulator(
                latency_seconds=options.bedrock_latency_ms / 1000, seed=options.seed
            )
            if options.model_script is not None:
                model.use_script(options.model_script)
            self.bedrock = bedrock_emulator.start_in_thread(emulator=model)
            resources = self._add_alert_topic(resources)
        port = options.port or free_port()
        self._state = LocalState(
            webhook_url=f"http://127.0.0.1:{port}/relaylink",
            mcp_url=self.mcp.url,
            effects_url=self.sink.effects_url,
            aws_endpoint_url=self.emulator.endpoint_url,
            region=REGION,
            signing_secrets=signing,
            mcp_token=token,
            resources=resources,
            bedrock_url=self.bedrock.url if self.bedrock is not None else "",
            workflow=options.workflow,
            aws_access_key_id=self.emulator.credentials.access_key_id,
            aws_secret_access_key=self.emulator.credentials.secret_access_key,
            spans_file=str(self._run_dir / SPANS_FILE_NAME),
        )
        if resources.alert_queue_url:
            self.alerts = AlertCounter(self._state.aws_client("sqs"), resources.alert_queue_url)
            self.alerts.start()
        self._children = {
            "front_door": self._child(
                "front_door",
                [
                    "-m",
                    f"{_PREFIX}local.front_door",
                    "--port",
                    str(port),
                    "--containers",
                    str(options.front_door_containers),
                    *self._clock_arguments(),
                ],
                front_door_environment(self._state, options),
            ),
            "worker": self._child(
                "worker",
                self._worker_command(),
                worker_side_environment(self._state, worker_options, notify_url=self.sink.url),
            ),
        }
        for child in self._children.values():
            child.start()
        self.wait_ready(READY_DEADLINE_SECONDS)
        # Faults start once the stack serves: its own set-up must not be the victim.
        self.emulator.faults.set_rate(options.aws_fault_rate)
        self._watch_kill_point()
        self._write_state()
        self._monitor = threading.Thread(target=self._watch, name="supervisor", daemon=True)
        self._monitor.start()

    def stop(self) -> None:
        self._stopping.set()
        if self.kill_point is not None:
            self.kill_point.stop()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
        for child in self._children.values():
            child.stop()
        if self.alerts is not None:
            self.alerts.stop()
        if self.bedrock is not None:
            self.bedrock.stop()
        if self.sink is not None:
            self.sink.stop()
        if self.mcp is not None:
            self.mcp.stop()
        if self.emulator is not None:
            self.emulator.stop()
        if self._state_lock is not None:
            self._state_lock.release()  # removes the state file only if it is ours
            self._state_lock = None
        if self._owns_run_dir and self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)

    # --- what callers use --------------------------------------------------------
    @property
    def state(self) -> LocalState:
        if self._state is None:
            raise RuntimeError("the local stack is not running")
        with self._lock:
            return replace(self._state, pids=self._pids())

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            raise RuntimeError("the local stack is not running")
        return self._run_dir

    @property
    def restarts(self) -> dict[str, int]:
        return {role: child.restarts for role, child in self._children.items()}

    @property
    def aws_faults(self) -> dict[str, int]:
        return self.emulator.faults.counts() if self.emulator is not None else {}

    def kill(self, role: Role) -> int:
        """SIGKILL one child (the supervisor restarts it); returns the killed pid."""
        child = self._children[role]
        pid = child.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if child.process is not None:
            child.process.wait()  # so that wait_ready() cannot see the dead child as ready
        return pid

    @contextlib.contextmanager
    def paused(self, role: Role) -> Iterator[int]:
        """One child stopped (SIGSTOP) for the block, then continued (SIGCONT); yields its
        pid.

        Its work waits, nothing is lost: the stream and the queues keep what it has not
        taken yet. The bench pauses the worker side while it times the receiver alone,
        since in AWS the two never share a CPU or an emulator.
        """
        pid = self._children[role].pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield pid
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def kill_and_inspect(self, role: Role, inspect: Callable[[KilledProcess], T]) -> T:
        """SIGKILL one child and call ``inspect`` before the supervisor restarts it: what
        ``inspect`` reads (the table, say) is what the dead process left, with no
        successor writing yet."""
        with self._lock:  # the supervisor restarts a child under this lock
            born = self._children[role].started_at
            pid = self.kill(role)
            return inspect(KilledProcess(pid=pid, started_at=born, killed_at=time.time()))

    def wait_ready(self, timeout: float) -> None:
        """Until both children serve (after a start or a restart).

        Raises:
            TimeoutError: a child did not become ready in time (its log names why).
        """
        deadline = time.monotonic() + timeout
        while not all(child.ready() and not child.exited() for child in self._children.values()):
            for child in self._children.values():
                if child.exited() and (self._monitor is None or self._stopping.is_set()):
                    if (reason := refusal_in(child.log_file)) is not None:
                        raise StartRefused(reason)
                    raise RuntimeError(
                        f"{child.role} exited before serving (log: {child.log_file})"
                    )
            if time.monotonic() > deadline:
                waiting = [c.role for c in self._children.values() if not c.ready()]
                raise TimeoutError(f"not ready: {', '.join(waiting)} (logs in {self._run_dir})")
            time.sleep(0.02)

    def effects(self) -> dict[str, int]:
        """Applications per idempotency key, as the notification target counted them,
        with the agent workflow's alerts as the alert topic's subscriber counted them."""
        counts = self.sink.sink.counts() if self.sink is not None else {}
        if self.alerts is not None:
            counts = {**counts, **self.alerts.counts()}
        return counts

    def model_calls(self) -> dict[str, int]:
        """Model calls per delivery id, as the Bedrock emulator counted them."""
        return self.bedrock.calls() if self.bedrock is not None else {}

    @property
    def client(self) -> AwsClients:
        """boto3 clients for the stack's emulator: ``stack.client("dynamodb")``."""
        return self.state.aws_client

    def queue_depths(self) -> dict[str, int]:
        """Messages in each queue (visible + in flight + delayed)."""
        return stack_probes.queue_depths(self.state)

    def inbox_states(self) -> dict[str, str]:
        """Every inbox item's state, by delivery id (a scan: for checks, not for traffic)."""
        return stack_probes.inbox_states(self.state)

    def quiet(self, timeout: float, *, expected: int = 0, poll_seconds: float = 1.0) -> bool:
        """Wait until no work is left (see :func:`local.stack_probes.wait_quiet`)."""
        return stack_probes.wait_quiet(
            self.state, timeout, expected=expected, poll_seconds=poll_seconds
        )

    # --- internals -----------------------------------------------------------------
    def _watch_kill_point(self) -> None:
        point = self.options.kill_worker
        if point is None:
            return
        if point.kind is Kind.TOOL and self.bedrock is None:
            raise StartRefused(
                f"--kill-worker {point}: a tool's records are named after the model's"
                " tool-use ids; run the agent workflow or give --model-script"
            )
        assert self.emulator is not None
        faults = self.emulator.faults
        self.kill_point = KillPointWatch(
            point,
            hold=faults.hold_next,
            clear=faults.clear_holds,
            held=lambda: faults.counts().get("held", 0),
            kill=lambda: self.kill("worker"),
            announce=self.announce,
        )
        if self.bedrock is not None:
            self.bedrock.emulator.watch_tool_uses(self.kill_point.tool_used)
        self.kill_point.start()

    def _create_resources(self, signing: list[str], token: str) -> Resources:
        assert self.emulator is not None
        return create_stack_resources(
            self._emulator_clients(),
            # Unique per stack: names stay apart in logs and state files of several runs.
            prefix=f"{PREFIX}-{secrets.token_hex(3)}",
            signing_secrets=signing,
            mcp_token=token,
            max_attempts=self.options.max_attempts,
            retry_base_seconds=self.options.retry_base_seconds,
            visibility_timeout=self.options.visibility_timeout_seconds,
        )

    def _create_notify_secret(self, resources: Resources, signing_key: str) -> str:
        """The notify endpoint's secret, holding only its signing key (the URL is the
        sink's, given as NOTIFY_URL); returns its ARN."""
        return create_secret(
            self._emulator_clients()("secretsmanager"),
            name=f"{resources.table_name.removesuffix('-inbox')}/notify",
            value=json.dumps({"signing_secret": signing_key}),
        )

    def _add_alert_topic(self, resources: Resources) -> Resources:
        assert self.emulator is not None
        topic_arn, queue_url = create_alert_topic(
            self._emulator_clients(),
            prefix=resources.table_name.removesuffix("-inbox"),
        )
        return replace(resources, alert_topic_arn=topic_arn, alert_queue_url=queue_url)

    def _clock_arguments(self) -> list[str]:
        options = self.options
        if options.receiver_clock_start is None:
            return []
        frozen = ["--freeze-clock"] if options.receiver_clock_frozen else []
        return ["--clock-start", str(options.receiver_clock_start), *frozen]

    def _worker_command(self) -> list[str]:
        assert self._state is not None and self._run_dir is not None
        options = self.options
        return [
            "-m",
            f"{_PREFIX}local.event_sources",
            "--stream-arn",
            self._state.resources.stream_arn,
            "--relay-failure-queue-url",
            self._state.resources.relay_failure_queue_url,
            "--checkpoint-file",
            str(self._run_dir / "stream-checkpoints.json"),
            "--worker-concurrency",
            str(options.worker_concurrency),
            "--reconcile-interval",
            str(options.reconcile_interval_seconds),
            "--relay-failure-rate",
            str(options.relay_failure_rate),
            "--seed",
            str(options.seed),
        ]

    def _child(self, role: Role, arguments: list[str], environment: dict[str, str]) -> _Child:
        assert self._run_dir is not None
        ready_file = self._run_dir / f"{role}.ready"
        return _Child(
            role=role,
            command=[sys.executable, *arguments, "--ready-file", str(ready_file)],
            environment=environment,
            ready_file=ready_file,
            log_file=self._run_dir / f"{role}.log",
        )

    def _emulator_clients(self) -> AwsClients:
        """Clients of this stack's emulator, signed with the pair it admits."""
        if self.emulator is None:
            raise RuntimeError("the AWS emulator is not running")
        credentials = self.emulator.credentials
        return emulator_clients(
            self.emulator.endpoint_url,
            region=REGION,
            access_key_id=credentials.access_key_id,
            secret_access_key=credentials.secret_access_key,
        )

    def _pids(self) -> dict[str, int]:
        emulator = {"aws_emulator": self.emulator.pid} if self.emulator is not None else {}
        children: dict[str, int] = {r: c.pid for r, c in self._children.items()}
        return {"supervisor": os.getpid(), **emulator, **children}

    def _write_state(self) -> None:
        if self.options.state_file and self._state_lock is not None:
            self.state.write(self.options.state_file)
            self._state_lock.wrote()

    def _watch(self) -> None:
        """Restart a child that died (killed, crashed) until the stack stops."""
        while not self._stopping.wait(0.05):
            for child in self._children.values():
                if child.exited() and not self._stopping.is_set():
                    with self._lock:
                        child.restarts += 1
                        child.start()
                    with contextlib.suppress(Exception):
                        self._await_ready(child)
                        self._write_state()

    def _await_ready(self, child: _Child) -> None:
        deadline = time.monotonic() + READY_DEADLINE_SECONDS
        while not child.ready() and not child.exited() and not self._stopping.is_set():
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
