"""Figure 3: cold start, in fresh interpreters.

The receiver side: a new ``python`` imports the receiver handler and serves its
first request (an accepted delivery: both clients created, the signing secrets
fetched, one transaction written). The baseline: a new ``python`` imports boto3 and
creates the same DynamoDB client, the least any boto3 receiver does before it can
write. Each process times itself from its first line (interpreter start-up, the
same for both, is left out and reported separately as the processes' wall time).
Both reach AWS as :class:`bench.canned.CannedEndpoint`, which answers at once on
loopback. Runs alternate (receiver, baseline, receiver, ...), and each pair gives
one ratio.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from bench.canned import CannedEndpoint
from bench.receiver_rig import SECRET_ARN, SECRETS_JSON
from bench.stats import Summary, summarize
from cli.aws_clients import AwsClients
from functions.core import env_names, metric_names, settings_table
from functions.receiver import handler
from infra.environments import receiver_environment
from local.testkit import builders
from local.testkit.moto_world import REGION

if TYPE_CHECKING:
    from local.mcp_server import RunningServer
    from local.testkit.moto_world import MotoWorld

TARGET: Final = 1.3
REPO_ROOT: Final = Path(__file__).resolve().parent.parent
RESULT_MARK: Final = "BENCH-RESULT "

# Each script writes one result line to stderr (stdout carries the function's logs).
RECEIVER_SCRIPT: Final = """
import time
t0, c0 = time.perf_counter(), time.process_time()
from functions.receiver import handler
t1, c1 = time.perf_counter(), time.process_time()
import json, sys
event = json.loads(sys.stdin.read())
class Context:
    aws_request_id = "cold-start"
t2, c2 = time.perf_counter(), time.process_time()
response = handler.lambda_handler(event, Context())
t3, c3 = time.perf_counter(), time.process_time()
sys.stderr.write("BENCH-RESULT " + json.dumps({
    "import_ms": (t1 - t0) * 1000,
    "first_request_ms": (t3 - t2) * 1000,
    "total_ms": (t1 - t0 + t3 - t2) * 1000,
    "cpu_ms": (c1 - c0 + c3 - c2) * 1000,
    "status": response["statusCode"],
}) + "\\n")
"""

BASELINE_SCRIPT: Final = """
import time
t0, c0 = time.perf_counter(), time.process_time()
import boto3
from botocore.config import Config
t1 = time.perf_counter()
client = boto3.client("dynamodb", config=Config(**CONFIG))
t2, c2 = time.perf_counter(), time.process_time()
import json, sys
sys.stderr.write("BENCH-RESULT " + json.dumps({
    "import_ms": (t1 - t0) * 1000,
    "client_ms": (t2 - t1) * 1000,
    "total_ms": (t2 - t0) * 1000,
    "cpu_ms": (c2 - c0) * 1000,
}) + "\\n")
"""


def _baseline_script() -> str:
    # botocore sets a Config's options as instance attributes, which its stubs omit.
    options = vars(handler.DYNAMODB_CONFIG)
    kwargs = {name: options[name] for name in ("connect_timeout", "read_timeout", "retries")}
    return BASELINE_SCRIPT.replace("**CONFIG", f"**{kwargs!r}")


def fresh_env(
    endpoint_url: str, extra: dict[str, str], code_root: Path = REPO_ROOT
) -> dict[str, str]:
    """A Lambda-like environment: region, dummy credentials, the function's variables.

    ``code_root`` is where ``functions`` is imported from (another checkout can be
    compared, e.g. before a change).
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(code_root),
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_ENDPOINT_URL": endpoint_url,
        env_names.ENV_POWERTOOLS_SERVICE_NAME: metric_names.SERVICE,
        env_names.ENV_POWERTOOLS_METRICS_NAMESPACE: metric_names.METRICS_NAMESPACE,
        env_names.ENV_POWERTOOLS_LOG_LEVEL: "INFO",
    }
    env.update(extra)
    return env


def run_script(
    script: str, env: dict[str, str], stdin: str = "", *, python: str = sys.executable
) -> tuple[dict[str, Any], float]:
    """Run ``script`` in a fresh interpreter (``python``); its result line and the process
    wall time (ms)."""
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-c", script],
        input=stdin,
        env=env,
        cwd=env.get("PYTHONPATH", str(REPO_ROOT)).split(":")[0],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    wall_ms = (time.perf_counter() - start) * 1000
    lines = [line for line in done.stderr.splitlines() if line.startswith(RESULT_MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"cold-start script failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_MARK) :])
    return result, wall_ms


@dataclass(frozen=True)
class ColdStart:
    ratio: Summary  # receiver CPU time / baseline CPU time, one per pair
    wall_ratio: Summary  # the same with elapsed (wall) times
    receiver_ms: dict[str, Summary]
    baseline_ms: dict[str, Summary]
    receiver_wall_ms: Summary
    baseline_wall_ms: Summary
    pairs: int

    def to_json(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio.to_json(),
            "wall_ratio": self.wall_ratio.to_json(),
            "receiver_ms": {k: v.to_json(1) for k, v in self.receiver_ms.items()},
            "baseline_ms": {k: v.to_json(1) for k, v in self.baseline_ms.items()},
            "receiver_process_wall_ms": self.receiver_wall_ms.to_json(1),
            "baseline_process_wall_ms": self.baseline_wall_ms.to_json(1),
            "pairs": self.pairs,
        }


def _by_key(results: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Summary]:
    return {k: summarize([float(r[k]) for r in results]) for k in keys}


def receiver(*, pairs: int, code_root: Path = REPO_ROOT) -> ColdStart:
    """Alternate ``pairs`` receiver and baseline processes against the canned endpoint."""
    baseline_script = _baseline_script()
    receiver_results: list[dict[str, Any]] = []
    baseline_results: list[dict[str, Any]] = []
    receiver_wall: list[float] = []
    baseline_wall: list[float] = []
    ratios: list[float] = []
    wall_ratios: list[float] = []
    with CannedEndpoint(SECRETS_JSON, SECRET_ARN) as endpoint:
        env = fresh_env(
            endpoint.url,
            receiver_environment(
                table_name="relaylink-bench",
                signing_secrets_arn=SECRET_ARN,
                inbox_retention_days=settings_table.INBOX_RETENTION_DAYS.default,
            ),
            code_root,
        )
        for _ in range(pairs):
            request = builders.signed_request(timestamp=int(time.time()))
            result, wall = run_script(RECEIVER_SCRIPT, env, json.dumps(builders.event_for(request)))
            if result["status"] != 202:
                raise RuntimeError(f"cold receiver answered {result['status']}, not 202")
            base, base_wall = run_script(baseline_script, env)
            receiver_results.append(result)
            baseline_results.append(base)
            receiver_wall.append(wall)
            baseline_wall.append(base_wall)
            ratios.append(result["cpu_ms"] / base["cpu_ms"])
            wall_ratios.append(result["total_ms"] / base["total_ms"])
    return ColdStart(
        ratio=summarize(ratios),
        wall_ratio=summarize(wall_ratios),
        receiver_ms=_by_key(
            receiver_results, ("import_ms", "first_request_ms", "total_ms", "cpu_ms")
        ),
        baseline_ms=_by_key(baseline_results, ("import_ms", "client_ms", "total_ms", "cpu_ms")),
        receiver_wall_ms=summarize(receiver_wall),
        baseline_wall_ms=summarize(baseline_wall),
        pairs=pairs,
    )


WORKER_SCRIPT: Final = """
import time
t0 = time.perf_counter()
from functions.worker import handler
t1 = time.perf_counter()
import json, sys
event = json.loads(sys.stdin.read())
class Context:
    aws_request_id = "cold-start"
    def get_remaining_time_in_millis(self):
        return 180_000
t2 = time.perf_counter()
response = handler.lambda_handler(event, Context())
t3 = time.perf_counter()
sys.stderr.write("BENCH-RESULT " + json.dumps({
    "import_ms": (t1 - t0) * 1000,
    "first_batch_ms": (t3 - t2) * 1000,
    "total_ms": (t1 - t0 + t3 - t2) * 1000,
    "failures": len(response["batchItemFailures"]),
}) + "\\n")
"""


@dataclass(frozen=True)
class WorkerColdStart:
    worker_ms: dict[str, Summary]
    wall_ms: Summary
    batch: int
    runs: int

    def to_json(self) -> dict[str, Any]:
        return {
            "worker_ms": {k: v.to_json(1) for k, v in self.worker_ms.items()},
            "process_wall_ms": self.wall_ms.to_json(1),
            "batch_size": self.batch,
            "runs": self.runs,
        }


@dataclass(frozen=True)
class WorkerWorld:
    """What a worker process needs: moto's server, the MCP server, the notify sink."""

    world: MotoWorld
    mcp: RunningServer
    env: dict[str, str]  # the worker process's environment, Lambda-like

    def event(self, batch: int, *, package_prefix: str = "pkg_") -> dict[str, Any]:
        """An SQS event of ``batch`` new deliveries (taken off the queue: the event holds
        them), for packages whose ids start with ``package_prefix`` (local/mcp_server.py)."""
        from bench.worker_mcp import _submit  # noqa: PLC0415
        from local.event_sources import sqs_event  # noqa: PLC0415

        messages = _submit(self.world, self.mcp, batch, prefix=package_prefix)
        for m in messages:
            self.world.sqs.delete_message(
                QueueUrl=self.world.queue_url, ReceiptHandle=m["ReceiptHandle"]
            )
        return sqs_event(messages, self.world.queue_arn, REGION)


@contextlib.contextmanager
def worker_world(*, workflow: str, mcp_latency_ms: int = 0) -> Iterator[WorkerWorld]:
    """moto's server on loopback, the SDK's demo MCP server and the notify sink, in this
    process; and the environment of a worker process that uses them."""
    # Imported here: the worker's world pulls in moto's server and the MCP SDK.
    from moto.server import ThreadedMotoServer  # noqa: PLC0415

    from bench.worker_mcp import MCP_TOKEN  # noqa: PLC0415
    from infra.environments import worker_environment  # noqa: PLC0415
    from local.mcp_server import start_in_thread  # noqa: PLC0415
    from local.notify_sink import NotifySinkServer  # noqa: PLC0415
    from local.testkit.clock import FakeClock  # noqa: PLC0415
    from local.testkit.moto_world import (  # noqa: PLC0415
        BUCKET,
        MAX_ATTEMPTS,
        TABLE,
        build_world,
    )

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    url = f"http://{host}:{port}"
    try:
        clients = AwsClients(
            region=REGION, endpoint_url=url, access_key_id="bench", secret_access_key="bench"
        )
        world = build_world(clients, clock=FakeClock(int(time.time())))
        token_arn = world.create_secret(MCP_TOKEN, prefix="relaylink-mcp-worker")
        with (
            NotifySinkServer() as sink,
            start_in_thread(token=MCP_TOKEN, latency_ms=mcp_latency_ms) as mcp,
        ):
            function_env = worker_environment(
                table_name=TABLE,
                work_queue_url=world.queue_url,
                dead_letter_queue_url=world.dlq_url,
                mcp_token_secret_arn=token_arn,
                mcp_allowed_hosts=["127.0.0.1"],
                workflow=workflow,
                archive_bucket=BUCKET,
                max_attempts=MAX_ATTEMPTS,
                lease_seconds=300,
                notify_url=sink.url,
            )
            function_env[env_names.ENV_MCP_ALLOW_INSECURE_LOOPBACK] = "true"
            yield WorkerWorld(world, mcp, fresh_env(url, function_env))
    finally:
        # moto's state lives in this process, beyond its server: the next world (another
        # figure) must find no table.
        with contextlib.suppress(OSError):
            urllib.request.urlopen(
                urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10
            ).close()
        moto.stop()


def worker(*, runs: int, batch: int = 10) -> WorkerColdStart:
    """A fresh worker importing its handler and processing its first batch.

    AWS is moto's server on loopback (its speed is in the batch time), the MCP
    server the SDK's demo server, the notification goes to the notify sink.
    """
    results: list[dict[str, Any]] = []
    walls: list[float] = []
    # The workflow whose notifications the sink counts.
    with worker_world(workflow="notify") as stack:
        for _ in range(runs):
            result, wall = run_script(WORKER_SCRIPT, stack.env, json.dumps(stack.event(batch)))
            if result["failures"]:
                raise RuntimeError(f"cold worker failed {result['failures']} messages")
            results.append(result)
            walls.append(wall)
    return WorkerColdStart(
        worker_ms=_by_key(results, ("import_ms", "first_batch_ms", "total_ms")),
        wall_ms=summarize(walls),
        batch=batch,
        runs=runs,
    )
