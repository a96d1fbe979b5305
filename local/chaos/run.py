"""One fault-injection run: start the stack, send the load with faults, check, report.

Also what the run observes beside the table: the worker's log (it outlives the
kills) and the demo MCP server's errors on requests a client abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from functions.core.adapters.dynamodb_spend import DynamoDbSpend
from functions.workflows.agent import MODEL_STEP
from local import agent_tools
from local.chaos.config import ChaosConfig
from local.chaos.invariants import check
from local.chaos.load import LoadRecord, send_load
from local.chaos.model_window import Run, model_figures, model_violations
from local.chaos.plan import plan_load
from local.chaos.report import (
    AnswerCounts,
    AttemptCounts,
    ChaosReport,
    DeliveryCounts,
    Durations,
    FaultCounts,
)
from local.event_sources import INJECTED_RELAY_FAILURE
from local.kill_point import KillPoint
from local.model_script import load_model_script
from local.stack import LocalStack
from local.stack_options import StackOptions

TOOLS_SPEC = "local.agent_tools:TOOLS"
# The run measures acting once under kills, not a person's decisions: the ticket runs
# unasked, exempted by name (an acting tool waits for a person by default).
TOOLS_SETTINGS = {"tools": TOOLS_SPEC, "tools_without_approval": agent_tools.TICKET_TOOL}
# What the step runner logs when a step runs again after a worker died inside it.
STEP_RERUN_MESSAGE = "step rerun: an earlier attempt died inside it"


def run_chaos(config: ChaosConfig, *, progress: Callable[[str], None] | None = None) -> ChaosReport:
    """Run the load with faults, then check the invariants. Never raises on a violation."""
    say = progress or (lambda _message: None)
    options = StackOptions(
        seed=config.seed,
        mcp_failure_rate=config.mcp_failure_rate,
        aws_fault_rate=config.aws_fault_rate,
        relay_failure_rate=config.relay_failure_rate,
        max_attempts=config.max_attempts,
        workflow=config.workflow,
        bedrock_latency_ms=config.bedrock_latency_ms,
        workflow_settings=TOOLS_SETTINGS if config.tools else {},
        model_script=load_model_script(config.model_script) if config.model_script else None,
        kill_worker=KillPoint.parse(config.kill_worker) if config.kill_worker else None,
    )
    started = time.monotonic()
    abandoned = _AbandonedMcpRequests()
    with abandoned, LocalStack(options) as stack:
        assert stack.mcp is not None and stack.emulator is not None
        # Slower than the worker's MCP client waits: it gives up and retries later.
        stack.mcp.set_slow_rate(
            config.mcp_slow_rate, delay_ms=options.mcp_timeout_seconds * 1000 + 500
        )
        if config.tools and config.model_script is None:
            assert stack.bedrock is not None
            stack.bedrock.emulator.script_tools(agent_tools.SCRIPT)
        rng = random.Random(config.seed)  # noqa: S311 (a reproducible simulation)
        plan = plan_load(config, mcp_url=stack.state.mcp_url, rng=rng)
        say(
            f"stack up in {time.monotonic() - started:.1f} s; sending {len(plan.genuine)} "
            f"deliveries with {config.kills} kills of each process"
        )
        load_started = time.monotonic()
        load = asyncio.run(send_load(stack, config, plan, rng))
        load_seconds = time.monotonic() - load_started
        faults = _faults(stack)  # before turning them off: what the run really injected
        stack.emulator.faults.set_rate(0.0)
        stack.mcp.set_failure_rate(0.0)
        stack.mcp.set_slow_rate(0.0, delay_ms=0)
        say(f"load sent in {load_seconds:.1f} s; faults off, waiting until quiet")
        quiet_started = time.monotonic()
        acknowledged = sum(1 for r in load.genuine if r.acknowledged)
        quiet = stack.quiet(config.deadline_seconds, expected=acknowledged)
        quiet_seconds = time.monotonic() - quiet_started
        # Relay failures are a child process's argument: they stay on, and only delay.
        worker_log = _WorkerLog.read(stack)
        findings = check(stack, config, plan, load)
        violations = (
            [] if quiet else [f"not quiet within the deadline of {config.deadline_seconds:g} s"]
        ) + findings.violations
        model = _model_figures(stack, load, worker_log)
        if model:
            violations += model_violations(worker_log.model_reruns, load.interrupted_model_steps)
            if model["calls_uncounted"]:
                violations.append(
                    f"{model['calls_uncounted']} model calls reached Bedrock uncounted by"
                    " their delivery's spend record"
                )
        return ChaosReport(
            config=config,
            deliveries=DeliveryCounts.of(plan, load),
            attempts=AttemptCounts.of(load),
            answers=AnswerCounts.of(load),
            kills=findings.kills,
            faults=FaultCounts(**faults, relay_failure=worker_log.relay_failures),
            outcomes=findings.outcomes,
            items_by_worker_attempts=findings.items_by_worker_attempts,
            max_attempts=config.max_attempts,
            effects_applied=findings.effects_applied,
            lost=findings.lost,
            duplicated=findings.duplicated,
            quarantined=findings.quarantined,
            stored_forged_or_replayed=findings.stored_forged_or_replayed,
            queues=findings.queues,
            relay_failure_queue_messages=findings.queues["relay_failure"],
            worker_attempts=worker_log.outcomes,
            mcp_server_errors_on_abandoned_requests=abandoned.count,
            seconds=Durations(
                load=round(load_seconds, 1),
                until_quiet=round(quiet_seconds, 1),
                total=round(time.monotonic() - started, 1),
            ),
            effects=findings.effects,
            model=model,
            kill_point=_kill_point(stack),
            violations=violations,
        )


def _model_figures(stack: LocalStack, load: LoadRecord, log: _WorkerLog) -> dict[str, int]:
    """The model step's calls and reruns, and the worker kills that interrupted it
    (none when the workflow calls no model)."""
    if stack.bedrock is None:
        return {}
    calls = stack.model_calls()
    return model_figures(
        calls,
        reruns=log.model_reruns,
        interrupted=load.interrupted_model_steps,
        kills_in_window=load.kills_in_model_window,
        counted=_counted_calls(stack, calls),
    )


def _counted_calls(stack: LocalStack, calls: dict[str, int]) -> dict[str, int]:
    """Each called delivery's model calls as its spend record counts them."""
    spend = DynamoDbSpend(
        client=stack.client("dynamodb"), table_name=stack.state.resources.table_name
    )
    counted = {}
    for delivery_id in calls:
        record = spend.get(delivery_id)
        counted[delivery_id] = 0 if record is None else record.model_calls
    return counted


class _AbandonedMcpRequests(logging.Filter):
    """Counts, instead of printing, what the demo MCP server logs when a client goes away
    mid-request (a killed worker, a timed-out slow fetch): the SDK and uvicorn log each
    with a traceback, which would bury the run's table."""

    _LOGGERS = ("uvicorn.error", "mcp.server.streamable_http")

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            self.count += 1
            return False
        return True

    def __enter__(self) -> _AbandonedMcpRequests:
        for name in self._LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self._LOGGERS:
            logging.getLogger(name).removeFilter(self)


def _faults(stack: LocalStack) -> dict[str, int]:
    assert stack.mcp is not None
    aws = stack.aws_faults
    return {
        "dynamodb_throttling": aws.get("throttling", 0),
        "dynamodb_internal_error": aws.get("internal_error", 0),
        "mcp_unavailable": stack.mcp.controls.failures_injected,
        "mcp_slow": stack.mcp.controls.slow_injected,
    }


@dataclass(frozen=True, slots=True)
class _WorkerLog:
    """What the worker process logged over the run (its log survives the kills)."""

    relay_failures: int  # injected ones
    outcomes: dict[str, int]  # worker attempts by result, a retry by its error code
    # (delivery id, run) of each model step rerun (the StepReruns metric's log lines)
    model_reruns: tuple[Run, ...]

    @classmethod
    def read(cls, stack: LocalStack) -> _WorkerLog:
        marker = f"relay invocation failed: {INJECTED_RELAY_FAILURE}"
        relay_failures = 0
        outcomes: Counter[str] = Counter()
        model_reruns: list[Run] = []
        with (stack.run_dir / "worker.log").open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if marker in line:
                    relay_failures += 1
                elif line.startswith("{") and '"work item processed"' in line:
                    with contextlib.suppress(ValueError):
                        record = json.loads(line)
                        result = str(record.get("result"))
                        code = record.get("error_code")
                        outcomes[f"{result} ({code})" if code else result] += 1
                elif line.startswith("{") and f'"{STEP_RERUN_MESSAGE}"' in line:
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        record = json.loads(line)
                        if record.get("step") == MODEL_STEP:
                            model_reruns.append((str(record["delivery_id"]), int(record["run"])))
        return cls(relay_failures, dict(sorted(outcomes.items())), tuple(model_reruns))


def _kill_point(stack: LocalStack) -> dict[str, str | int]:
    watch = stack.kill_point
    return {} if watch is None else {"point": str(watch.point), "killed_pid": watch.killed_pid}
