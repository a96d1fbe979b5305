"""Figures 5 and 6: both receivers over HTTP on the local stack, and the stack end to end.

One :class:`local.stack.LocalStack` serves both figures: its front door is our
receiver (the real handler in its own process, restartable), its worker side the
relay, worker and reconciler. The baseline (:mod:`bench.baseline`) runs in its own
process the same way, against the same emulator, MCP server and notify sink. Load
comes from the RelayLink simulator (:mod:`local.sender`): signed attempts, retries
on the contract's back-off schedule (compressed), duplicates.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from bench import lean_client
from bench.stats import Summary, quantile, summarize
from functions.core import env_names, table_layout
from functions.core.models import State
from functions.workflows.notify import SETTING_NOTIFY_SECRET_ARN
from local import stack_probes
from local.aws_emulator import process_cpu_seconds
from local.sender import Delivery, SenderConfig, send_all
from local.sender import Summary as SendSummary
from local.stack import LocalStack
from local.stack_options import StackOptions

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
IDEMPOTENCY_TABLE: Final = "relaylink-baseline-idempotency"
PEER_QUEUE: Final = "relaylink-peer-work"
MCP_LATENCY_MS: Final = 300
# Figure 5: the receiver's p99 on the local stack, the in-request baseline's over ours.
TARGET_P99_RATIO: Final = 10.0
# The same, each side restarted and warmed alike before it is measured.
TARGET_WARM_P99_RATIO: Final = 8.0
# Figure 6: twice the 69 deliveries per second the run before these targets accepted.
TARGET_COMPLETED_PER_SECOND: Final = 2 * 69.0
READY_SECONDS: Final = 60.0
# RelayLink's answer timeout: a warm attempt slower than this fails the run.
WARM_TIMEOUT_SECONDS: Final = 10.0
FINISHED_STATES: Final = frozenset({State.COMPLETED.value, State.FAILED.value})


class BaselineProcess:
    """``python -m bench.baseline.server`` (or another module of the bench's peers) as a
    child that can be SIGKILLed and restarted, or paused."""

    def __init__(
        self,
        stack: LocalStack,
        run_dir: Path,
        *,
        module: str = "bench.baseline.server",
        name: str = "baseline",
        extra_env: Mapping[str, str] | None = None,
        serves: bool = True,
    ) -> None:
        state = stack.state
        assert stack.sink is not None
        keep = {"PATH", "HOME", "LANG", "TMPDIR"}
        self._env = {k: v for k, v in os.environ.items() if k in keep}
        self._env.update(state.client_environment())
        self._env.update(
            {
                "PYTHONPATH": str(REPO_ROOT),
                env_names.ENV_POWERTOOLS_SERVICE_NAME: "relaylink-baseline",
                env_names.ENV_POWERTOOLS_METRICS_NAMESPACE: "RelayLinkBaseline",
                env_names.ENV_POWERTOOLS_LOG_LEVEL: "WARNING",
                "IDEMPOTENCY_TABLE": IDEMPOTENCY_TABLE,
                "SIGNING_SECRETS_ARN": state.resources.signing_secrets_arn,
                "MCP_TOKEN": state.mcp_token,
                "NOTIFY_URL": stack.sink.url,
                "ARCHIVE_BUCKET": state.resources.archive_bucket,
                # The sink verifies the notify workflow's signature: the same secret.
                env_names.ENV_WORKFLOW_SETTINGS: json.dumps(
                    {}
                    if stack.notify_secret_arn is None
                    else {SETTING_NOTIFY_SECRET_ARN: stack.notify_secret_arn}
                ),
                **(extra_env or {}),
            }
        )
        self._module = module
        self._serves = serves
        self._ready = run_dir / f"{name}.ready"
        self._log = run_dir / f"{name}.log"
        with socket_port() as port:
            self.port = port
        self.url = f"http://127.0.0.1:{self.port}/relaylink"
        self._process: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def pid(self) -> int:
        return self._process.pid if self._process is not None else 0

    def start(self) -> None:
        self._ready.unlink(missing_ok=True)
        with self._log.open("ab") as log:
            port = ["--port", str(self.port)] if self._serves else []
            self._process = subprocess.Popen(
                [sys.executable, "-m", self._module, *port, "--ready-file", str(self._ready)],
                env=self._env,
                cwd=REPO_ROOT,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + READY_SECONDS
        while not self._ready.exists():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self._module} did not start (log: {self._log})")
            time.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL, as when Lambda's sandbox dies mid-request; then serve again."""
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._process.pid, signal.SIGKILL)
        self._process.wait()
        self.restarts += 1
        self.start()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stopped (SIGSTOP) for the block, then continued: its work waits in its queue."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


@contextlib.contextmanager
def socket_port() -> Iterator[int]:
    import socket  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def create_idempotency_table(stack: LocalStack) -> None:
    """The table Powertools' DynamoDB persistence layer expects (key ``id``, TTL)."""
    dynamodb = stack.client("dynamodb")
    dynamodb.create_table(
        TableName=IDEMPOTENCY_TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


class CpuMeter:
    """CPU seconds each process of the stack used between :meth:`start` and :meth:`stop`
    (user + system, from ``/proc``): a load-independent cost, unlike elapsed time.

    "bench" is this process: the simulator, the MCP server and the notify sink.
    """

    def __init__(self, stack: LocalStack, baseline: BaselineProcess | None = None) -> None:
        pids = dict(stack.state.pids)
        self._pids = {
            "bench": os.getpid(),
            "AWS emulator": pids.get("aws_emulator", 0),
            "front door": pids.get("front_door", 0),
            "worker side": pids.get("worker", 0),
        }
        if baseline is not None:
            self._pids["baseline"] = baseline.pid
        self._emulator = stack.emulator
        self._started: dict[str, float] = {}
        self._calls: dict[str, int] = {}
        self._answering: dict[str, float] = {}
        self._locked: dict[str, dict[str, float]] = {}
        self._started_at = 0.0
        self.calls_per_delivery: dict[str, float] = {}
        self.answer_cpu_per_delivery: dict[str, float] = {}
        # Between start and stop: the seconds the emulator's requests waited for its
        # lock and held it, per operation, and the seconds that passed.
        self.lock_waited: dict[str, float] = {}
        self.lock_held: dict[str, float] = {}
        self.elapsed = 0.0

    def start(self) -> CpuMeter:
        self._started = self._now()
        self._started_at = time.monotonic()
        if self._emulator is not None:
            self._calls = self._emulator.calls()
            self._answering = self._emulator.cpu_seconds_by_operation()
            self._locked = self._emulator.lock_seconds_by_operation()
        return self

    def stop(self, deliveries: int) -> dict[str, float]:
        """CPU seconds per delivery, by process (processes of no pid left out); the
        emulator's requests per delivery, by operation, in ``calls_per_delivery``, and
        its CPU seconds answering them, per delivery, in ``answer_cpu_per_delivery``."""
        now = self._now()
        self.elapsed = time.monotonic() - self._started_at
        calls, answering = {}, {}
        locked: dict[str, dict[str, float]] = {}
        if self._emulator is not None:
            calls = self._emulator.calls()
            answering = self._emulator.cpu_seconds_by_operation()
            locked = self._emulator.lock_seconds_by_operation()
        self.calls_per_delivery = _per_delivery(calls, self._calls, deliveries)
        self.answer_cpu_per_delivery = _per_delivery(answering, self._answering, deliveries)
        for kind, grown in (("waited", self.lock_waited), ("held", self.lock_held)):
            grown.clear()
            grown.update(_per_delivery(locked.get(kind, {}), self._locked.get(kind, {}), 1))
        return {name: (now[name] - self._started[name]) / deliveries for name in now}

    def _now(self) -> dict[str, float]:
        seconds = {name: process_cpu_seconds(pid) for name, pid in self._pids.items() if pid}
        seconds["bench"] = time.process_time()  # this process: exact, all threads
        return seconds


def _per_delivery(
    now: Mapping[str, float], before: Mapping[str, float], deliveries: int
) -> dict[str, float]:
    """What grew between two readings of a counter per operation, per delivery."""
    return {
        operation: (value - before.get(operation, 0)) / deliveries
        for operation, value in sorted(now.items())
        if value > before.get(operation, 0)
    }


def _deliveries(stack: LocalStack, n: int, rng: random.Random) -> list[Delivery]:
    return [Delivery.new(mcp_url=stack.state.mcp_url, rng=rng) for _ in range(n)]


def _lean_load(
    url: str, deliveries: list[Delivery], secrets: Sequence[str], concurrency: int
) -> list[float]:
    """Each delivery's first attempt, ``concurrency`` in flight on kept-alive
    connections from the lean client (:mod:`bench.lean_client`), signed before the clock
    starts; each answer's time in ms. Every one must be answered 2xx."""
    now = int(time.time())
    requests = [
        lean_client.request_bytes(url, d, secrets, now, keep_alive=True) for d in deliveries
    ]
    answers = lean_client.in_flight(url, requests, concurrency, timeout=WARM_TIMEOUT_SECONDS)
    if len(answers) != len(deliveries) or any((a.status or 0) // 100 != 2 for a in answers):
        raise RuntimeError("the warm latency load was not fully acknowledged")
    return [a.seconds * 1000 for a in answers]


def _latencies_ms(summary: SendSummary) -> list[float]:
    """Every attempt that got an HTTP answer, in ms."""
    return [a.elapsed_seconds * 1000 for r in summary.results for a in r.attempts if a.status]


@dataclass
class Effects:
    """How many deliveries' effect was applied 0, 1 or more times."""

    deliveries: int
    lost: int
    duplicated: int
    extra_applications: int

    def to_json(self) -> dict[str, int]:
        return {
            "deliveries": self.deliveries,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "extra_applications": self.extra_applications,
        }


def count_effects(stack: LocalStack, deliveries: list[Delivery]) -> Effects:
    counts = stack.effects()
    applied = [counts.get(f"{d.delivery_id}:notify", 0) for d in deliveries]
    return Effects(
        deliveries=len(deliveries),
        lost=sum(1 for n in applied if n == 0),
        duplicated=sum(1 for n in applied if n > 1),
        extra_applications=sum(n - 1 for n in applied if n > 1),
    )


@dataclass
class KillRun:
    kills: int
    cut_attempts: int  # attempts in flight when a kill came, that got no answer
    acknowledged: int
    effects: Effects
    seconds: float
    answers: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kills": self.kills,
            "attempts_cut_mid_request": self.cut_attempts,
            "acknowledged": self.acknowledged,
            "effects": self.effects.to_json(),
            "seconds": round(self.seconds, 2),
            "answers": self.answers,
        }


def _send_while_killing(
    config: SenderConfig,
    deliveries: list[Delivery],
    *,
    kills: int,
    kill: Callable[[], None],
    spacing_s: float,
    trigger: Callable[[], bool] | None = None,
) -> tuple[SendSummary, list[float]]:
    """Send ``deliveries``; meanwhile kill the receiver ``kills`` times.

    Returns the sender's summary and the ``time.monotonic()`` of each kill.

    Without ``trigger``, a kill comes at a random moment of a load that always has
    requests in flight; with it, a kill comes as soon as ``trigger()`` is true.
    """
    result: dict[str, SendSummary] = {}
    sending = threading.Thread(
        target=lambda: result.setdefault("summary", send_all(config, deliveries)), daemon=True
    )
    sending.start()
    rng = random.Random(7)
    moments: list[float] = []
    while len(moments) < kills and sending.is_alive():
        if trigger is None:
            time.sleep(spacing_s * (0.5 + rng.random()))
        else:
            while sending.is_alive() and not trigger():
                time.sleep(0.0005)
        if sending.is_alive():
            moments.append(time.monotonic())
            kill()
    sending.join()
    return result["summary"], moments


def _kill_run(
    stack: LocalStack,
    config: SenderConfig,
    deliveries: list[Delivery],
    *,
    kills: int,
    kill: Callable[[], None],
    spacing_s: float,
    wait_done: Callable[[], object],
    trigger: Callable[[], bool] | None = None,
) -> KillRun:
    started = time.monotonic()
    summary, moments = _send_while_killing(
        config, deliveries, kills=kills, kill=kill, spacing_s=spacing_s, trigger=trigger
    )
    wait_done()
    answers = dict(summary.answers)
    # An attempt cut mid-request: in flight when a kill came, and no answer.
    cut = sum(
        1
        for r in summary.results
        for a in r.attempts
        if a.status is None
        and any(a.started_at < k < a.started_at + a.elapsed_seconds for k in moments)
    )
    return KillRun(
        kills=len(moments),
        cut_attempts=cut,
        acknowledged=summary.acknowledged,
        effects=count_effects(stack, deliveries),
        seconds=time.monotonic() - started,
        answers=answers,
    )


def _kill_after_effects(
    stack: LocalStack,
    config: SenderConfig,
    deliveries: list[Delivery],
    *,
    kills: int,
    kill: Callable[[], None],
    wait_done: Callable[[], object],
    deadline_s: float = 120.0,
) -> KillRun:
    """Send ``deliveries``; each time a delivery's effect is first applied, kill the
    process that applied it (``kill``), ``kills`` times; then wait and count effects.
    For the worker side, where a kill cuts no request: the sender may be done first."""
    started = time.monotonic()
    seen = set(stack.effects())
    result: dict[str, SendSummary] = {}
    sending = threading.Thread(
        target=lambda: result.setdefault("summary", send_all(config, deliveries)), daemon=True
    )
    sending.start()
    done = 0
    keys = {f"{d.delivery_id}:notify" for d in deliveries}
    while done < kills and time.monotonic() < started + deadline_s:
        applied = set(stack.effects())
        if applied - seen:
            kill()
            seen.update(stack.effects())
            done += 1
        elif keys <= applied:
            break
        else:
            time.sleep(0.0005)
    sending.join()
    wait_done()
    summary = result["summary"]
    return KillRun(
        kills=done,
        cut_attempts=0,
        acknowledged=summary.acknowledged,
        effects=count_effects(stack, deliveries),
        seconds=time.monotonic() - started,
        answers=dict(summary.answers),
    )


def _wait_effects(stack: LocalStack, deliveries: list[Delivery], timeout: float) -> None:
    """Until every delivery's effect was applied at least once, or ``timeout`` passed
    (the peer keeps no state of ours to poll)."""
    keys = {f"{d.delivery_id}:notify" for d in deliveries}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not keys <= set(stack.effects()):
        time.sleep(0.05)


@dataclass(frozen=True)
class LocalSizes:
    latency_deliveries: int = 100
    latency_concurrency: int = 5
    kill_deliveries: int = 30  # the baseline's (each takes > 300 ms)
    kill_deliveries_ours: int = 80  # ours answer in milliseconds: more, to span the kills
    kills: int = 5
    effect_kills: int = 2  # each costs the in-progress record's 10 s, then a retry
    e2e_deliveries: int = 1000
    e2e_concurrency: int = 10
    e2e_retried: float = 0.2
    time_scale: float = 360.0  # contract back-off: 30 s -> 83 ms, 1 h -> 10 s
    kill_time_scale: float = 1800.0  # 30 s -> 17 ms, 1 h -> 2 s, 6 h -> 12 s
    kill_time_scale_ours: float = 3600.0  # ours needs no in-progress record to expire
    # Warm against warm: both restarted, warmed alike, then enough samples that the p99
    # is not one or two of them.
    warm_up_deliveries: int = 50
    warm_deliveries: int = 1000
    # Each kills the process that applied a delivery's effect right after it did.
    kills_after_effect: int = 2
    kill_after_effect_deliveries: int = 20


@dataclass(frozen=True)
class WarmRun:
    """Figure 5 warm against warm: each side restarted, warmed by the same load, then
    measured; the warm-up's answers (the cold starts among them) kept apart."""

    ours_warm_up_ms: list[float]
    baseline_warm_up_ms: list[float]
    ours_ms: list[float]
    baseline_ms: list[float]

    @property
    def p99_ratio(self) -> float:
        return quantile(self.baseline_ms, 0.99) / quantile(self.ours_ms, 0.99)

    def to_json(self) -> dict[str, Any]:
        def side(warm_up: list[float], measured: list[float]) -> dict[str, Any]:
            return {
                "warm_up_ms": summarize(warm_up).to_json(1),
                "latency_ms": summarize(measured).to_json(1),
                "p99_ms": round(quantile(measured, 0.99), 1),
            }

        return {
            "ours": side(self.ours_warm_up_ms, self.ours_ms),
            "baseline": side(self.baseline_warm_up_ms, self.baseline_ms),
            "p99_ratio": round(self.p99_ratio, 2),
        }


@dataclass
class LocalResults:
    ours_latency_ms: Summary
    baseline_latency_ms: Summary
    ours_p99_ms: float
    baseline_p99_ms: float
    ours_completed_s: float
    baseline_completed_s: float
    ours_kills: KillRun
    baseline_kills: KillRun
    baseline_effect_kills: KillRun
    e2e: dict[str, Any]
    e2e_latency_ms: Summary
    warm: WarmRun
    peer_warm_up_ms: list[float]
    peer_ms: list[float]
    ours_effect_kills: KillRun
    peer_effect_kills: KillRun
    details: dict[str, Any] = field(default_factory=dict)


def _wait_done(stack: LocalStack, deliveries: list[Delivery], timeout: float = 400.0) -> float:
    """Until every one of ``deliveries`` is finished (completed or failed) and the work
    queue is empty; returns the seconds waited.

    Reads these deliveries' inbox items (100 keys a request), and only once the work
    queue is empty: a scan of the whole table would hold the emulator's lock for most of
    a second on a big table, slowing the very work being waited for (and its CPU time
    would count as the stack's).
    """
    started = time.monotonic()
    deadline = started + timeout
    ids = [d.delivery_id for d in deliveries]
    while not _done(stack, ids):
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the local stack did not finish {len(ids)} deliveries in {timeout} s"
            )
        time.sleep(0.5)
    return time.monotonic() - started


def _done(stack: LocalStack, delivery_ids: list[str]) -> bool:
    with contextlib.suppress(Exception):  # the emulator busy or a fault: ask again
        if stack_probes.queue_depths(stack.state)["work"]:
            return False
        states = stack_probes.delivery_states(stack.state, delivery_ids)
        finished = all(states.get(i) in FINISHED_STATES for i in delivery_ids)
        return finished and not stack_probes.queue_depths(stack.state)["work"]
    return False


def _last_completed_at(stack: LocalStack, delivery_ids: set[str]) -> int:
    """The latest ``completed_at`` (epoch seconds) among these deliveries' inbox items."""
    dynamodb = stack.client("dynamodb")
    latest = 0
    for page in dynamodb.get_paginator("scan").paginate(
        TableName=stack.state.resources.table_name,
        FilterExpression="sk = :inbox",
        ExpressionAttributeValues={":inbox": {"S": table_layout.SK_INBOX}},
        ProjectionExpression="pk, completed_at",
    ):
        for item in page["Items"]:
            if item["pk"]["S"] in delivery_ids and "completed_at" in item:
                latest = max(latest, int(item["completed_at"]["N"]))
    return latest


def measure(sizes: LocalSizes) -> LocalResults:
    rng = random.Random(11)
    run_dir = Path(tempfile.mkdtemp(prefix="relaylink-bench-"))
    options = StackOptions(worker_concurrency=4, log_level="WARNING", run_dir=str(run_dir))
    with LocalStack(options) as stack:
        assert stack.mcp is not None
        state = stack.state
        secrets = tuple(state.signing_secrets)
        create_idempotency_table(stack)
        baseline = BaselineProcess(stack, run_dir)
        baseline.start()
        peer_queue = stack.client("sqs").create_queue(QueueName=PEER_QUEUE)["QueueUrl"]
        peer_env = {"PEER_QUEUE_URL": peer_queue}
        peer = BaselineProcess(
            stack, run_dir, module="bench.async_peer.server", name="peer", extra_env=peer_env
        )
        peer_worker = BaselineProcess(
            stack,
            run_dir,
            module="bench.async_peer.worker",
            name="peer-worker",
            extra_env=peer_env,
            serves=False,
        )
        peer.start()
        peer_worker.start()
        try:
            # --- figure 6: the local stack end to end (MCP answering at once) -------
            deliveries = _deliveries(stack, sizes.e2e_deliveries, rng)
            config = SenderConfig(
                url=state.webhook_url,
                secrets=secrets,
                concurrency=sizes.e2e_concurrency,
                duplicate_rate=sizes.e2e_retried,
                time_scale=sizes.time_scale,
                seed=3,
            )
            meter = CpuMeter(stack).start()
            started, started_epoch = time.monotonic(), time.time()
            sent = send_all(config, deliveries)
            accepted_s = time.monotonic() - started
            _wait_done(stack, deliveries)
            e2e_cpu = meter.stop(len(deliveries))
            # From the items themselves (whole seconds): the polling above is coarse.
            last = _last_completed_at(stack, {d.delivery_id for d in deliveries})
            completed_s = max(accepted_s, last + 0.5 - started_epoch)
            e2e_effects = count_effects(stack, deliveries)
            e2e_latency = _latencies_ms(sent)
            e2e = {
                "deliveries": len(deliveries),
                "attempts": sent.attempts,
                "answers": dict(sent.answers),
                "acknowledged": sent.acknowledged,
                "accepted_per_second": len(deliveries) / accepted_s,
                "seconds_until_all_acknowledged": accepted_s,
                "seconds_until_all_completed": completed_s,
                "effects": e2e_effects.to_json(),
                "worker_concurrency": options.worker_concurrency,
                "sender_concurrency": sizes.e2e_concurrency,
                "cpu_seconds_per_delivery": e2e_cpu,
                "aws_requests_per_delivery": meter.calls_per_delivery,
                "aws_answer_cpu_seconds_per_delivery": meter.answer_cpu_per_delivery,
                "load_average_at_end": os.getloadavg()[0],
            }

            # --- figure 5: latency, same load, MCP at 300 ms -------------------------
            stack.mcp.set_latency_ms(MCP_LATENCY_MS)
            ours_in = _deliveries(stack, sizes.latency_deliveries, rng)
            base_in = _deliveries(stack, sizes.latency_deliveries, rng)

            def load(url: str) -> SenderConfig:
                return SenderConfig(
                    url=url,
                    secrets=secrets,
                    concurrency=sizes.latency_concurrency,
                    time_scale=sizes.time_scale,
                    seed=5,
                )

            started_epoch = time.time()
            # The worker side waits while ours are timed: in AWS it never shares a CPU
            # or the emulator with the receiver; the baseline's load, which does its
            # work in the request, runs after it, alone too.
            meter = CpuMeter(stack).start()
            with stack.paused("worker"):
                ours = send_all(load(state.webhook_url), ours_in)
            ours_cpu = meter.stop(len(ours_in))
            _wait_done(stack, ours_in)
            last = _last_completed_at(stack, {d.delivery_id for d in ours_in})
            ours_completed = last + 0.5 - started_epoch  # completed_at: whole seconds
            started = time.monotonic()
            meter = CpuMeter(stack, baseline).start()
            base = send_all(load(baseline.url), base_in)
            base_completed = time.monotonic() - started
            base_cpu = meter.stop(len(base_in))
            if ours.acknowledged != len(ours_in) or base.acknowledged != len(base_in):
                raise RuntimeError("the latency load was not fully acknowledged")
            ours_ms, base_ms = _latencies_ms(ours), _latencies_ms(base)

            # --- figure 5, warm against warm -------------------------------------------
            def restart_ours() -> None:
                stack.kill("front_door")
                stack.wait_ready(READY_SECONDS)

            def timed(url: str, n: int, *, ours: bool) -> list[float]:
                batch = _deliveries(stack, n, rng)
                # Ours with the worker side paused, as above; its backlog is worked
                # off before the baseline's turn, so neither shares the CPU with it.
                with stack.paused("worker") if ours else contextlib.nullcontext():
                    sent = _lean_load(url, batch, secrets, sizes.latency_concurrency)
                if ours:
                    _wait_done(stack, batch)
                return sent

            restart_ours()
            baseline.kill()  # a fresh process too, started the same way
            warm = WarmRun(
                ours_warm_up_ms=timed(state.webhook_url, sizes.warm_up_deliveries, ours=True),
                baseline_warm_up_ms=timed(baseline.url, sizes.warm_up_deliveries, ours=False),
                ours_ms=timed(state.webhook_url, sizes.warm_deliveries, ours=True),
                baseline_ms=timed(baseline.url, sizes.warm_deliveries, ours=False),
            )

            # --- the asynchronous peer, warmed and measured the same way ---------------
            def peer_timed(n: int) -> list[float]:
                batch = _deliveries(stack, n, rng)
                with peer_worker.paused():  # as ours: its worker never shares the CPU
                    sent = _lean_load(peer.url, batch, secrets, sizes.latency_concurrency)
                _wait_effects(stack, batch, timeout=120.0)
                return sent

            peer.kill()
            peer_worker.kill()
            peer_warm_up_ms = peer_timed(sizes.warm_up_deliveries)
            peer_ms = peer_timed(sizes.warm_deliveries)

            # --- figure 5: kills mid-request ------------------------------------------
            def kill_ours() -> None:
                stack.kill("front_door")
                stack.wait_ready(READY_SECONDS)

            def kill_load(url: str, time_scale: float) -> SenderConfig:
                return SenderConfig(
                    url=url, secrets=secrets, concurrency=4, time_scale=time_scale, seed=9
                )

            batch = _deliveries(stack, sizes.kill_deliveries_ours, rng)
            ours_kills = _kill_run(
                stack,
                kill_load(state.webhook_url, sizes.kill_time_scale_ours),
                batch,
                kills=sizes.kills,
                kill=kill_ours,
                spacing_s=0.2,
                wait_done=lambda: _wait_done(stack, batch),
            )
            base_config = kill_load(baseline.url, sizes.kill_time_scale)
            base_kills = _kill_run(
                stack,
                base_config,
                _deliveries(stack, sizes.kill_deliveries, rng),
                kills=sizes.kills,
                kill=baseline.kill,
                spacing_s=0.6,
                wait_done=lambda: None,
            )
            # The usual way's own danger window: the effect is applied, the request
            # has not finished (its idempotency record still says in progress).
            # Each kill follows the first application of a delivery not killed before.
            seen = set(stack.effects())

            def effect_applied() -> bool:
                fresh = set(stack.effects()) - seen
                seen.update(fresh)
                return bool(fresh)

            def kill_baseline_after_effect() -> None:
                baseline.kill()
                seen.update(stack.effects())

            effect_kills = _kill_run(
                stack,
                base_config,
                _deliveries(stack, sizes.kill_deliveries, rng),
                kills=sizes.effect_kills,
                kill=kill_baseline_after_effect,
                spacing_s=0.0,
                wait_done=lambda: None,
                trigger=effect_applied,
            )

            # --- a kill right after the effect: ours and the peer too ----------------
            def kill_our_worker() -> None:
                stack.kill("worker")  # the supervisor starts it again

            after_effect = kill_load(state.webhook_url, sizes.kill_time_scale_ours)
            batch = _deliveries(stack, sizes.kill_after_effect_deliveries, rng)
            ours_effect_kills = _kill_after_effects(
                stack,
                after_effect,
                batch,
                kills=sizes.kills_after_effect,
                kill=kill_our_worker,
                wait_done=lambda: _wait_done(stack, batch),
            )
            peer_batch = _deliveries(stack, sizes.kill_after_effect_deliveries, rng)

            def peer_wait_done() -> None:
                # A redelivery waits out the visibility timeout and the in-progress record.
                time.sleep(30.0)
                _wait_effects(stack, peer_batch, 60.0)

            peer_effect_kills = _kill_after_effects(
                stack,
                kill_load(peer.url, sizes.kill_time_scale),
                peer_batch,
                kills=sizes.kills_after_effect,
                kill=peer_worker.kill,
                wait_done=peer_wait_done,
            )
        finally:
            baseline.stop()
            peer.stop()
            peer_worker.stop()
        restarts = dict(stack.restarts)
    return LocalResults(
        ours_latency_ms=summarize(ours_ms),
        baseline_latency_ms=summarize(base_ms),
        ours_p99_ms=quantile(ours_ms, 0.99),
        baseline_p99_ms=quantile(base_ms, 0.99),
        ours_completed_s=ours_completed,
        baseline_completed_s=base_completed,
        ours_kills=ours_kills,
        baseline_kills=base_kills,
        baseline_effect_kills=effect_kills,
        e2e=e2e,
        e2e_latency_ms=summarize(e2e_latency),
        warm=warm,
        peer_warm_up_ms=peer_warm_up_ms,
        peer_ms=peer_ms,
        ours_effect_kills=ours_effect_kills,
        peer_effect_kills=peer_effect_kills,
        details={
            "peer_warm_up_ms": summarize(peer_warm_up_ms).to_json(1),
            "peer_latency_ms": summarize(peer_ms).to_json(1),
            "peer_p99_ms": round(quantile(peer_ms, 0.99), 1),
            "ours_kills_after_effect": ours_effect_kills.to_json(),
            "peer_kills_after_effect": peer_effect_kills.to_json(),
            "warm_against_warm": warm.to_json(),
            "restarts": restarts,
            "baseline_restarts": baseline.restarts,
            "ours_latency_ms": summarize(ours_ms).to_json(1),
            "baseline_latency_ms": summarize(base_ms).to_json(1),
            "ours_p99_ms": round(quantile(ours_ms, 0.99), 1),
            "baseline_p99_ms": round(quantile(base_ms, 0.99), 1),
            "ours_kills": ours_kills.to_json(),
            "baseline_kills": base_kills.to_json(),
            "baseline_kills_after_effect": effect_kills.to_json(),
            "e2e": e2e,
            "ours_latency_cpu_seconds_per_delivery": ours_cpu,
            "baseline_latency_cpu_seconds_per_delivery": base_cpu,
            "e2e_latency_ms": summarize(e2e_latency).to_json(1),
            "e2e_p99_ms": round(quantile(e2e_latency, 0.99), 1),
            "sizes": sizes.__dict__,
        },
    )
