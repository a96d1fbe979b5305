"""Each benchmark figure: run its measurement, turn the result into a :class:`Figure`.

The functions are named after what they measure; :data:`ALL` numbers them as the
documents do (``--only 1,3``).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from bench import (
    agent_spend,
    bulk_requeue,
    burst,
    calls,
    cold_start,
    local_figures,
    no_workflow,
    overhead,
    pipeline_calls,
    reconciler_backlog,
    shipped_cold_start,
    worker_duration,
    worker_mcp,
)
from bench.cost import AGENT_SPEND_FIGURE
from bench.report import Figure, Row, Target
from bench.stats import Summary, quantile, summarize
from functions.core import reconcile
from functions.core.settings_table import WORKFLOW
from functions.worker.settings import BATCH_CONCURRENCY
from infra.config import StackConfig
from local import front_door
from ops import bulk

T = TypeVar("T")

# The data model's writes (docs/cost.md): the receipt's transaction (2 items at 2 WRU),
# the claim (1), and the completion (1) that puts the item's index entry (1). The
# default workflow's archive is the package record, which that completion writes (a
# workflow without effects): it writes nothing of its own. A workflow with effects
# records the package before it runs (1 more). The target stays at that 8.
WRITE_UNITS_TARGET: Final = Target("<=", 8)
DEFAULT_WORKFLOW: Final = WORKFLOW.default


@dataclass(frozen=True)
class Sizes:
    """How much each figure measures (``make bench`` stays under 10 minutes on 2 cores)."""

    outcome_repeats: int = 20
    secrets_requests: int = 1000
    # Ten: one process is a sample of one, and more make a run's median steadier
    # (pyperf spawns twenty); the machine's slower minutes still move a whole run
    # (docs/benchmarks.md, Earlier measurements).
    canned_processes: int = 10
    canned_blocks: int = 3
    canned_per_block: int = 150
    moto_blocks: int = 5
    moto_per_block: int = 40
    own_code_repeats: int = 2000
    cold_pairs: int = 10
    worker_cold_runs: int = 3
    mcp_batches: int = 3
    pipeline_deliveries: int = 40
    bulk_items: int = 1000
    bulk_runs: int = 2
    write_unit_deliveries: int = 5
    worker_batches: int = 4
    reconciler_open: int = 100_000
    burst: int = 2_000
    agent_deliveries: int = 20
    local: local_figures.LocalSizes = field(default_factory=local_figures.LocalSizes)


QUICK: Final = Sizes(
    outcome_repeats=3,
    secrets_requests=1000,
    canned_processes=2,
    canned_blocks=2,
    canned_per_block=40,
    moto_blocks=2,
    moto_per_block=10,
    own_code_repeats=200,
    cold_pairs=3,
    worker_cold_runs=1,
    mcp_batches=1,
    pipeline_deliveries=10,
    bulk_items=100,
    bulk_runs=1,
    write_unit_deliveries=3,
    worker_batches=1,
    reconciler_open=1_000,
    burst=200,
    agent_deliveries=5,
    local=local_figures.LocalSizes(
        latency_deliveries=20,
        warm_up_deliveries=10,
        warm_deliveries=60,
        kills_after_effect=1,
        kill_after_effect_deliveries=8,
        kill_deliveries=12,
        kill_deliveries_ours=40,
        kills=2,
        effect_kills=1,
        e2e_deliveries=100,
    ),
)


def aws_calls_per_outcome(sizes: Sizes) -> Figure:
    outcomes = calls.per_outcome(repeats=sizes.outcome_repeats)
    secrets = calls.secrets_per_thousand(requests=sizes.secrets_requests)
    rows = []
    for outcome, result in outcomes.items():
        limit = calls.TARGETS.get(outcome)
        op = "==" if limit == 0 else "<="
        rows.append(
            Row(
                f"AWS calls per {outcome} delivery",
                "calls",
                summary=result.calls,
                target=None if limit is None else Target(op, limit),
            )
        )
    rows.append(
        Row(
            "Secrets Manager calls per 1,000 requests (cold container)",
            "calls",
            value=secrets.per_1000,
            target=Target("<=", calls.SECRETS_TARGET_PER_1000),
        )
    )
    return Figure(
        1,
        "AWS calls per delivery outcome",
        "The real receiver handler with its own clients. botocore's `before-call` event "
        "counts API calls (one per call; SDK retries would be `before-send` attempts, "
        "also recorded in the JSON). Outcomes against moto, whose conditional writes "
        "decide duplicate and quarantine as DynamoDB does; warm container (secrets "
        f"cached); {sizes.outcome_repeats} deliveries per outcome. Secrets: a new "
        f"container serving {secrets.requests} requests (70 % accepted, 30 % signed with "
        "an unknown secret) within the cache's max age, AWS answered at once.",
        rows,
        notes=[
            "Quarantined = the conditional `TransactWriteItems` that finds the stored "
            "item (its old image comes back with the cancellation, no read) + one `PutItem` "
            "of the evidence.",
            "Rejected and invalid deliveries make no AWS call once the secrets are cached; "
            "ignored (`ping`) writes its inbox receipt only.",
            "Operations per outcome: "
            + "; ".join(f"{o}: {dict(r.operations) or 'none'}" for o, r in outcomes.items()),
        ],
        details={
            "outcomes": {o: r.to_json() for o, r in outcomes.items()},
            "secrets": secrets.to_json(),
        },
    )


def receiver_overhead(sizes: Sizes) -> Figure:
    # One process at a time, each new: the spread between processes is part of the figure.
    canned = overhead.pooled(
        [
            _in_own_process(
                overhead.against_canned,
                blocks=sizes.canned_blocks,
                per_block=sizes.canned_per_block,
            )
            for _ in range(sizes.canned_processes)
        ]
    )
    moto = overhead.against_moto(blocks=sizes.moto_blocks, per_block=sizes.moto_per_block)
    own = overhead.own_code(repeats=sizes.own_code_repeats)
    rows = [
        Row(
            "handler / plain boto3 TransactWriteItems, DynamoDB answering at once",
            "ratio",
            summary=canned.ratios[overhead.PLAIN],
            target=Target("<=", overhead.TARGET),
        ),
        Row(
            "handler / TransactWriteItems on a client configured as the receiver's",
            "ratio",
            summary=canned.ratios[overhead.SAME_CONFIG],
            target=Target("<=", overhead.TARGET),
        ),
        Row(
            "handler / plain boto3 TransactWriteItems, moto (small table)",
            "ratio",
            summary=moto.ratios[overhead.PLAIN],
        ),
        Row("handler, accepted delivery (canned DynamoDB)", "µs", summary=canned.handler_us),
        Row(
            "bare TransactWriteItems, plain boto3 client (canned)",
            "µs",
            summary=canned.bare_us[overhead.PLAIN],
        ),
        Row(
            "bare TransactWriteItems, receiver's client config (canned)",
            "µs",
            summary=canned.bare_us[overhead.SAME_CONFIG],
        ),
        Row("handler, accepted delivery (moto)", "µs", summary=moto.handler_us),
        Row("bare TransactWriteItems (moto)", "µs", summary=moto.bare_us[overhead.PLAIN]),
        Row("own code: handler with an inbox that stores nothing", "µs", summary=own["handler"]),
        Row(
            "own code: the same, right after a bare TransactWriteItems",
            "µs",
            summary=own["after_call"],
        ),
        Row("own code: the request's log line + EMF metric", "µs", summary=own["record"]),
    ]
    return Figure(
        2,
        "Receiver overhead over the one unavoidable write",
        "Median in-process handler time for an accepted delivery divided by the median "
        "time of a bare `TransactWriteItems` of the very same items (captured from the "
        "handler's call, replayed with a fresh delivery id). The handler's Lambda context "
        "is made and its response read outside the timed call, as Lambda's runtime does "
        "and as the bare side's parameters are. Both against a DynamoDB that "
        "answers at once: a botocore `before-send` hook returns the canned response, so "
        "parameter handling, serialization, endpoint resolution, SigV4 signing and "
        "response parsing all still run. Calls interleave (handler, bare, bare 2, "
        f"handler, …) in {sizes.canned_blocks} blocks of {sizes.canned_per_block} in each "
        f"of {sizes.canned_processes} new processes, one after another; each block gives "
        "one ratio of medians, and the figure is the median of all the blocks' ratios "
        "(where a process's code and objects land in memory moves the handler's time "
        "between processes more than within one, as Lambda's containers differ: one "
        "process is a sample of one). Log lines and EMF go to /dev/null (formatted and "
        "written as in Lambda), with the default stack's Powertools settings (tracing off: "
        "no X-Ray trace id on the lines). "
        f"Beside it, the same against moto in-process, in {sizes.moto_blocks} blocks of "
        f"{sizes.moto_per_block} with a new table before each block (moto copies the table "
        "for every transaction, so a growing table would hide our overhead).",
        rows,
        notes=[
            "The target row's bare side is a plain `boto3.client('dynamodb')`: what a "
            "hand-written receiver calls. The receiver's own client skips botocore's "
            "client-side parameter validation (DynamoDB validates every request itself; "
            "our items come from typed builders), which takes about 85 µs off the same call; "
            "the second row compares against a client with that same configuration, i.e. "
            "our Python code alone over the cheapest botocore call.",
            f"This run: handler {canned.handler_us.median:,.0f} µs over a "
            f"{canned.bare_us[overhead.SAME_CONFIG].median:,.0f} µs bare call; our code with "
            f"storage taken out {own['handler'].median:,.0f} µs, after a bare call "
            f"{own['after_call'].median:,.0f} µs, the request's log line and metric "
            f"{own['record'].median:,.0f} µs. The request line is built from its fields and "
            "written to Powertools' handler without a `LogRecord` when that handler is the "
            "only one the record would reach (as in Lambda); the bytes are the stock "
            "formatter's, the EMF directive is encoded once per set of metric names, and "
            "a line that may hold a secret (one search of the JSON text) takes the "
            "record's way through the redacting filter, as every line did before. Also: no "
            "comprehension or generator per request on the hot path (each is a function "
            "object and a frame), item attributes written out, HTTP API headers "
            "lower-cased in one C-speed pass, the signing HMAC keyed once per secret, and "
            "the accepted inbox item written from the delivery's fields (no frozen "
            "17-field `InboxItem` per request: about 2 µs, 29k instructions). Earlier "
            "runs: the end of this document.",
            "What bounds the ratio on the receiver's client config: "
            f"{_own_code_bound(canned, own)}",
            "Each process's own figure on the receiver's client config (its median block "
            "ratio), in the order run: "
            + ", ".join(f"{r:.3f}" for r in canned.process_ratios[overhead.SAME_CONFIG])
            + ".",
        ],
        details={
            "canned": canned.to_json(),
            "moto": moto.to_json(),
            "own_code_us": {k: v.to_json(1) for k, v in own.items()},
        },
    )


def _own_code_bound(canned: overhead.OverheadResult, own: dict[str, Summary]) -> str:
    bare = canned.bare_us[overhead.SAME_CONFIG].median
    handler = canned.handler_us.median
    return (
        f"{handler:,.0f} µs for the handler against {bare:,.0f} µs for the bare call, so "
        f"{handler - bare:,.0f} µs over it where the target allows "
        f"{bare * (overhead.TARGET - 1):,.0f}. Our code alone (storage taken out) is "
        f"{own['handler'].median:,.0f} µs, {own['record'].median:,.0f} µs of it the request's "
        "log line and metric; the very "
        f"same code takes {own['after_call'].median:,.0f} µs when each run follows a bare "
        "call, as it does in the handler: caches and branch history shared with "
        "botocore's much larger working set (callgrind counts our code at about 12 % of "
        "the handler's instructions and a fifth of its time), and the call inside the "
        "handler runs a few µs slower than the bare one for the same reason. What is "
        "left is the checks themselves (signature, body, digest), the items, and the "
        "line's JSON and write; what bounds the ratio is that interplay with botocore, "
        "not any one step."
    )


def cold_start_times(sizes: Sizes) -> Figure:
    receiver = cold_start.receiver(pairs=sizes.cold_pairs)
    shipped = shipped_cold_start.measure(pairs=sizes.cold_pairs)
    worker = cold_start.worker(runs=sizes.worker_cold_runs)
    r, b, w = receiver.receiver_ms, receiver.baseline_ms, worker.worker_ms
    rows = [
        Row(
            "receiver (import + first request) / (import boto3 + create the client), elapsed",
            "ratio",
            summary=receiver.wall_ratio,
            target=Target("<=", cold_start.TARGET),
        ),
        Row(
            "the same ratio in process CPU time",
            "ratio",
            summary=receiver.ratio,
            target=Target("<=", cold_start.TARGET),
        ),
        Row("receiver: import the handler", "ms", summary=r["import_ms"]),
        Row(
            "receiver: first request (clients, secret fetch, write)",
            "ms",
            summary=r["first_request_ms"],
        ),
        Row("receiver: total", "ms", summary=r["total_ms"]),
        Row("receiver: CPU time of import + first request", "ms", summary=r["cpu_ms"]),
        Row("baseline: import boto3", "ms", summary=b["import_ms"]),
        Row("baseline: create the DynamoDB client", "ms", summary=b["client_ms"]),
        Row("baseline: total", "ms", summary=b["total_ms"]),
        Row("baseline: CPU time of import + client", "ms", summary=b["cpu_ms"]),
        Row(
            "receiver process wall time (interpreter start included)",
            "ms",
            summary=receiver.receiver_wall_ms,
        ),
        Row(
            "baseline process wall time (interpreter start included)",
            "ms",
            summary=receiver.baseline_wall_ms,
        ),
        Row(
            "shipped receiver cold start / minimal Powertools handler",
            "ratio",
            summary=shipped.ratio,
            target=Target("<=", shipped_cold_start.TARGET),
        ),
        Row(
            "shipped receiver asset: import + first request (runtime's Python, its bytecode)",
            "ms",
            summary=shipped.receiver_ms,
        ),
        Row(
            "minimal Powertools handler: import + first request (the same way)",
            "ms",
            summary=shipped.minimal_ms,
        ),
        Row("worker: import the handler", "ms", summary=w["import_ms"]),
        Row(
            f"worker: first batch of {worker.batch} (moto server)",
            "ms",
            summary=w["first_batch_ms"],
        ),
        Row("worker: total", "ms", summary=w["total_ms"]),
    ]
    ratio_worker = w["total_ms"].median / b["total_ms"].median
    return Figure(
        3,
        "Cold start in fresh interpreters",
        "Each sample is a new `python` process that times itself from its first line "
        "(interpreter start-up, equal for both sides, is reported separately as the "
        "process wall time). Receiver: import `functions.receiver.handler`, then serve one "
        "accepted delivery, which creates both clients, fetches the signing secrets and "
        "writes the transaction. Baseline: `import boto3` and create the same DynamoDB "
        "client. Both reach AWS through `AWS_ENDPOINT_URL` at a loopback HTTP server that "
        "answers at once (real connections, signing and parsing; no emulator start-up). "
        f"{sizes.cold_pairs} alternating pairs, one ratio per pair, in elapsed time and in "
        "the process's CPU time (`time.process_time`), which a busy shared machine "
        "disturbs less: a process waiting for a core is not charged for it. The worker "
        "(beside it, no target): a new process imports its handler and processes a first batch "
        f"against moto's server, the demo MCP server and the notify sink; {worker.runs} runs.",
        rows,
        notes=[
            "The signing secrets are fetched and cached by our adapter instead of "
            "Powertools Parameters (whose import brings boto3, s3transfer and "
            "every provider), and the clients come from one botocore session, so the "
            "receiver never imports boto3 (earlier runs: the end of this document).",
            "As shipped: the receiver's asset as the synth bundles it and a minimal "
            "Powertools handler (a Logger, a DynamoDB client at import, one "
            "TransactWriteItems) beside the same Powertools, both compiled by the bundler's "
            "step and run by the Lambda runtime's Python with nothing written at run time "
            f"({shipped.pairs} alternating pairs, elapsed time). The ratio is bounded by "
            "what the receiver does beyond the minimal handler on its first request (the "
            "signing secrets' fetch, the signature check, its settings) and by the shared "
            "machine: the rows above, run from the repository with its caches, are not "
            "the asset's figures.",
            f"The worker's cold total is {ratio_worker:.1f} times the boto3 baseline: "
            "it imports the MCP SDK (httpx, anyio, pydantic) and its first batch opens an "
            "MCP session; moto's server speed is part of the batch time.",
        ],
        details={
            "receiver": receiver.to_json(),
            "shipped": shipped.to_json(),
            "worker": worker.to_json(),
        },
    )


def worker_mcp_cost(sizes: Sizes) -> Figure:
    result = worker_mcp.measure(batches=sizes.mcp_batches)
    rows = [
        Row(
            "HTTP requests to the MCP server per batch of 10 (one server)",
            "requests",
            summary=result.requests_per_batch,
            target=Target("<=", worker_mcp.TARGET_REQUESTS_PER_BATCH),
        ),
        Row("HTTP requests per batch of 1", "requests", summary=result.requests_per_single),
        Row(
            "MCP time per message, batch of 10 (one session)",
            "ms",
            summary=result.per_message_ms_batched,
        ),
        Row(
            "MCP time per message, one session per message",
            "ms",
            summary=result.per_message_ms_single,
        ),
        Row("worker time per message, batch of 10", "ms", summary=result.batch_ms_per_message),
        Row("worker time per message, batch of 1", "ms", summary=result.single_ms_per_message),
    ]
    return Figure(
        4,
        "Worker MCP cost",
        "The real worker handler (default workflow) against moto in-process, the notify "
        "sink, and the SDK's demo MCP server on loopback with no added latency. "
        f"{sizes.mcp_batches} batches of 10 messages for one server, each followed by the "
        "same work as 10 batches of one message (one MCP session each). Requests are "
        "the server's own count; MCP time is the package source's whole life as the "
        "worker sees it (open, every `get_package`, close) in wall time: a batch's "
        "messages run side by side, so overlapping fetches count once (the time during "
        "which any MCP operation was in flight), divided by the messages.",
        rows,
        notes=[
            f"One session per message costs {result.ratio:.1f} times the MCP wall time per "
            "message of a shared session on loopback; over a real network each saved "
            "request is also a saved round trip. The batch's MCP wall time per message "
            f"({result.per_message_ms_batched.median:.1f} ms) is part of the worker's "
            f"whole time per message ({result.batch_ms_per_message.median:.1f} ms), "
            "never more: the rest is the claims, the workflow and moto.",
        ],
        details=result.to_json(),
    )


def cost_inputs(sizes: Sizes) -> Figure:
    result = pipeline_calls.measure(deliveries=sizes.pipeline_deliveries)
    rows = []
    for function, ops in result.calls.items():
        for op, n in ops.items():
            rows.append(Row(f"{function}: {op} per delivery", "calls", value=n))
    for function, ops in result.workflow_calls.items():
        for op, n in ops.items():
            rows.append(
                Row(f"{function}, for the workflow's effects: {op} per delivery", "calls", value=n)
            )
    for function, units in result.capacity.items():
        for unit, n in units.items():
            rows.append(Row(f"{function}: DynamoDB {unit} per delivery", "units", value=n))
    for function, n in result.log_bytes.items():
        rows.append(Row(f"{function}: log bytes per delivery", "bytes", value=n))
    for kind, item in result.items.items():
        rows.append(
            Row(
                f"{kind} items at rest per delivery, mean size",
                "bytes",
                value=item["mean_bytes"],
            )
        )
    rows.append(Row("archived package per delivery", "bytes", value=result.archive_bytes))
    rows.append(Row("MCP HTTP requests per delivery", "requests", value=result.mcp_requests))
    rows.append(
        Row(
            "bytes sent to the MCP server per delivery (HTTP/1.1, before TLS)",
            "bytes",
            value=round(result.mcp_request_bytes),
        )
    )
    return Figure(
        7,
        "Cost inputs: what one delivery uses, end to end (docs/cost.md)",
        f"{sizes.pipeline_deliveries} accepted deliveries through the production handlers in "
        "process, on moto, the demo MCP server and the notify sink: receiver, stream (read as "
        "the event-source mapping would, after its filter), relay, SQS, worker (batches of "
        f"10, the default workflow `{result.workflow}`: the pipeline the cost model bills; "
        "figure 11 has its write units). Every AWS call is counted per function through botocore "
        "events on boto3's default session; DynamoDB write units are metered from the item "
        "images around every write (figure 11 gives the rules), read units follow DynamoDB's "
        "rules for items under 4 KB (0.5 RRU per eventually consistent read, 1 per "
        "consistent one); item sizes are DynamoDB's (names + values) of the items left in "
        "the table; log bytes are what each function wrote to stdout (JSON lines, EMF "
        "included).",
        rows,
        notes=[
            "Not counted here, added by docs/cost.md: the SQS event-source mapping's "
            "`ReceiveMessage` and `DeleteMessageBatch` (one each per batch) and its idle "
            "long polls, the reconciler's schedule, Secrets Manager refreshes per warm "
            "container.",
            f"Notifications applied (the {result.workflow} workflow sends none): "
            f"{result.notify_applications}.",
        ],
        details=result.to_json(),
    )


def _p99_bound(ours_p99_ms: float, baseline_p99_ms: float, ours_cpu: dict[str, float]) -> str:
    ratio = baseline_p99_ms / ours_p99_ms
    cpu = _cpu_text(ours_cpu)
    if ratio >= local_figures.TARGET_P99_RATIO:
        return (
            f"The p99 ratio meets its target ({ratio:.1f}). CPU time per delivery of ours, "
            f"by process: {cpu}."
        )
    return (
        f"The p99 ratio misses its target ({ratio:.1f}, ≥ {local_figures.TARGET_P99_RATIO:g} "
        f"wanted): ours would need a p99 of {baseline_p99_ms / local_figures.TARGET_P99_RATIO:.0f}"
        f" ms, not {ours_p99_ms:.0f}. The receiver itself takes about ten milliseconds against "
        "moto in process (figure 2, moto rows); the rest is the local stack's: each request "
        f"costs {cpu} of CPU time; the emulator (moto's server, its own process) serves one "
        "request at a time, the front door reaches it over loopback HTTP, and every process "
        "shares the machine's CPUs with whatever else runs (load average in the run table)."
    )


def _warm_rows(warm: local_figures.WarmRun) -> list[Row]:
    """Warm against warm: p50 (with spread), p99 and max per side; the warm-up apart."""
    rows = []
    for side, samples, warm_up in (
        ("ours", warm.ours_ms, warm.ours_warm_up_ms),
        ("baseline", warm.baseline_ms, warm.baseline_warm_up_ms),
    ):
        rows += [
            Row(f"{side}, warm: receiver latency", "ms", summary=summarize(samples)),
            Row(f"{side}, warm: receiver p99", "ms", value=quantile(samples, 0.99)),
            Row(f"{side}, warm: receiver max", "ms", value=max(samples)),
            Row(
                f"{side}: warm-up after a fresh start (its cold start included)",
                "ms",
                summary=summarize(warm_up),
            ),
        ]
    ratio = Target(">=", local_figures.TARGET_WARM_P99_RATIO)
    return [
        *rows,
        Row(
            "receiver p99 ratio baseline / ours, warm", "ratio", value=warm.p99_ratio, target=ratio
        ),
    ]


def _peer_rows(r: local_figures.LocalResults) -> list[Row]:
    """The asynchronous peer beside ours, warm; a kill right after the effect, all three."""
    ours_p99 = quantile(r.warm.ours_ms, 0.99)
    peer_p99 = quantile(r.peer_ms, 0.99)
    return [
        Row("asynchronous peer, warm: receiver latency", "ms", summary=summarize(r.peer_ms)),
        Row("asynchronous peer, warm: receiver p99", "ms", value=peer_p99),
        Row("asynchronous peer, warm: receiver max", "ms", value=max(r.peer_ms)),
        Row(
            "asynchronous peer: warm-up after a fresh start (its cold start included)",
            "ms",
            summary=summarize(r.peer_warm_up_ms),
        ),
        Row("receiver p99 ours / asynchronous peer, warm", "ratio", value=ours_p99 / peer_p99),
        *(
            Row(
                f"{side}: duplicated effects after a kill right after the effect",
                "deliveries",
                value=run.effects.duplicated,
                target=Target("==", 0) if side == "ours" else None,
            )
            for side, run in (
                ("ours", r.ours_effect_kills),
                ("baseline", r.baseline_effect_kills),
                ("asynchronous peer", r.peer_effect_kills),
            )
        ),
        *(
            Row(f"{side}: kills right after the effect", "kills", value=run.kills)
            for side, run in (
                ("ours", r.ours_effect_kills),
                ("asynchronous peer", r.peer_effect_kills),
            )
        ),
    ]


def _peer_bound(r: local_figures.LocalResults) -> str:
    """What bounds the ours / asynchronous peer ratio, and what the kills show."""
    return (
        "The asynchronous peer (`bench/async_peer/`, not shipped): its receiver verifies "
        "with our code and sends the delivery to an SQS queue of the same emulator; its "
        "worker polls that queue as Lambda's event source would and runs each record "
        "through Powertools' batch processor and the baseline's `@idempotent_function` "
        "(fetch, then the workflow's effects). It is warmed and measured as ours, its "
        "worker paused while its receiver is timed. Both answer after one call to the "
        "emulator (ours a two-item TransactWriteItems, the peer an SQS SendMessage), so the "
        "ratio is bounded by what that call costs on moto and by the two processes' CPU on "
        "a shared machine: it says what our durable receipt costs in answer time, not "
        "AWS's. Kills right after the effect: the process that applied a delivery's "
        "notification is SIGKILLed as soon as the sink counts it (ours: the worker side, "
        f"{r.ours_effect_kills.kills} kills; the peer: its worker, "
        f"{r.peer_effect_kills.kills} kills; the baseline: its receiver). Ours re-runs the "
        "delivery from its ledger's intent and asks the target before re-sending; the "
        "peer's redelivery waits out the visibility timeout and the in-progress record, "
        "then sends again. A kill lands about a millisecond after the sink counts the "
        "notification: whether the baseline or the peer had already marked its "
        "idempotency record completed decides whether its retry sends again, so their "
        "counts vary from run to run (0 up to the number of kills); ours does not depend "
        "on that timing."
    )


def _warm_bound(warm: local_figures.WarmRun, local: local_figures.LocalSizes) -> str:
    """How the warm rows were measured and what bounds their ratio."""
    ours_p99 = quantile(warm.ours_ms, 0.99)
    base_p99 = quantile(warm.baseline_ms, 0.99)
    return (
        "Warm against warm: both receivers restarted (a fresh process each), each sent "
        f"the same warm-up load ({local.warm_up_deliveries} deliveries, rows `warm-up`: "
        "the first answers of a fresh process are its cold start), then "
        f"{local.warm_deliveries} deliveries each, {local.latency_concurrency} in flight, "
        "ours with the worker side paused and its backlog worked off before the "
        "baseline's turn. The warm loads (the peer's too) come from a lean client "
        "(`bench/lean_client.py`: each request signed before the clock starts, written "
        "as bytes on one kept-alive connection per slot in flight, a few tenths of a ms "
        "of CPU a request), the same for every side: the simulator's httpx costs about "
        "3.5 ms of CPU a request, a third of what a receipt takes on these 2 shared "
        "cores, and its queueing was in ours' answer time. The baseline's p99 is "
        f"bounded below by the MCP answer ({local_figures.MCP_LATENCY_MS} ms) plus its "
        "DynamoDB and notification calls; ours by one loopback HTTP round trip to the "
        "emulator and the CPU of the front door and the emulator on a shared "
        f"machine: ours {ours_p99:.0f} ms, the baseline {base_p99:.0f} ms, so a ratio of "
        f"{local_figures.TARGET_WARM_P99_RATIO:g} needs ours under "
        f"{base_p99 / local_figures.TARGET_WARM_P99_RATIO:.0f} ms."
    )


def _cpu_text(cpu: dict[str, float]) -> str:
    """``{"AWS emulator": 0.0123, ...}`` (seconds) -> "12.3 ms AWS emulator + ... = N ms"."""
    parts = [f"{1000 * seconds:.1f} ms {name}" for name, seconds in cpu.items()]
    return " + ".join(parts) + f" = {1000 * sum(cpu.values()):.1f} ms"


def _throughput_bound(e2e: dict[str, Any]) -> str:
    """What bounds deliveries completed per second, from the CPU time each process used."""
    cpu: dict[str, float] = e2e["cpu_seconds_per_delivery"]
    total = sum(cpu.values())
    emulator = cpu.get("AWS emulator", 0.0)
    worker = cpu.get("worker side", 0.0)
    cores = os.cpu_count() or 1
    target = local_figures.TARGET_COMPLETED_PER_SECOND
    requests: dict[str, float] = e2e.get("aws_requests_per_delivery", {})
    answering: dict[str, float] = e2e.get("aws_answer_cpu_seconds_per_delivery", {})
    elapsed = e2e["seconds_until_all_completed"]
    used = total * e2e["deliveries"] / max(elapsed, 1e-9)
    text = (
        "What bounds deliveries completed per second here is CPU time, measured per "
        f"process (user + system, load-independent): {_cpu_text(cpu)} per delivery. "
        f"With all {cores} CPUs to itself the stack could complete at most "
        f"{cores / total:.0f} deliveries per second; each process is one Python "
        "interpreter, which runs Python on one CPU at a time, so the emulator alone "
        f"allows at most {1 / max(emulator, 1e-9):.0f} and the worker side "
        f"{1 / max(worker, 1e-9):.0f}. Meanwhile the stack used {used:.2f} of the "
        f"{cores} CPUs on average"
    )
    if "load_average_at_end" in e2e:
        text += (
            f"; the load average at the end was {e2e['load_average_at_end']:.1f} "
            "(everything runnable on the machine, other work included)"
        )
    text += "."
    if answering:
        moto = sum(answering.values())
        top = sorted(answering, key=lambda op: -answering[op])[:5]
        each = ", ".join(
            f"{op} {requests.get(op, 0):.1f} x {1000 * answering[op] / requests[op]:.1f} ms"
            for op in top
            if requests.get(op)
        )
        text += (
            f" Of the emulator's {1000 * emulator:.1f} ms, moto's answers take "
            f"{1000 * moto:.1f} ms ({sum(requests.values()):.1f} AWS requests per delivery; "
            f"the largest: {each}) and its HTTP server the other "
            f"{1000 * max(emulator - moto, 0.0):.1f} ms."
        )
    return text + (
        f" The target of {target:g} per second needs at most {1000 * cores / target:.1f} "
        f"ms of CPU per delivery in all, {total * target / cores:.1f} times less than now; "
        f"the worker side alone takes {1000 * worker:.1f} ms: the real handlers with "
        "boto3 (an AWS call costs the caller about a millisecond of CPU, as in Lambda), "
        "the demo MCP client and the notification, which no emulator change reaches. "
        f"The receiver accepted {e2e['accepted_per_second']:.0f} deliveries per second "
        "meanwhile."
    )


def worker_time_at_mcp_latency(sizes: Sizes) -> Figure:
    result = worker_duration.measure(batches=sizes.worker_batches)
    # The same without the workflow's work: docs/cost.md bills the difference to it.
    bare = worker_duration.measure(batches=sizes.worker_batches, workflow=no_workflow.SPEC)
    return Figure(
        8,
        f"Worker time per message at a {result.mcp_latency_ms} ms MCP answer",
        "A fresh worker process (the real handler, its settings from the environment, the "
        "default workflow) gets a warm-up batch, then "
        f"{sizes.worker_batches} timed batches of {result.batch} messages, each message "
        f"for the demo MCP server answering `get_package` after {result.mcp_latency_ms} ms; "
        f"the batch runs {result.concurrency} messages at a time (one MCP session per "
        "server). AWS is moto's server on loopback; the MCP server and the notify sink "
        "serve from the bench's process, so the worker process's CPU time "
        "(`time.process_time`) is the worker's own, without the emulator's or the MCP "
        "server's. Elapsed time is this machine's, with moto's server far slower than "
        "DynamoDB; docs/cost.md bills the CPU time measured here plus the assumed "
        "in-region waits (figure 9).",
        [
            Row(
                "worker elapsed time per message, batch of 10 (local emulator)",
                "ms",
                summary=result.wall_ms_per_message,
            ),
            Row(
                "worker CPU time per message, batch of 10", "ms", summary=result.cpu_ms_per_message
            ),
            Row(
                "worker CPU time per message, batch of 10, a workflow that does nothing",
                "ms",
                summary=bare.cpu_ms_per_message,
            ),
            Row("worker peak resident memory", "MB", value=result.max_rss_mb),
            Row(
                "worker memory setting / peak resident memory",
                "ratio",
                value=round(StackConfig().worker_memory_mb / result.max_rss_mb, 2),
            ),
        ],
        notes=[
            "The peak resident memory sizes the worker's Lambda memory "
            "(`worker_memory_mb`, infra/config.py): the waiting part of its bill grows "
            "with memory, the CPU part does not (Lambda's CPU share grows with memory "
            "up to one vCPU at 1,769 MB).",
            "A workflow that does nothing (`bench/no_workflow.py`) completes each delivery "
            "once its package is fetched: the worker's own work (claim, fetch, complete); "
            "the default workflow's extra CPU time is its effects' (docs/cost.md bills it "
            "as a workflow effect).",
        ],
        details={**result.to_json(), "no_workflow": bare.to_json()},
    )


def usual_way_and_end_to_end(sizes: Sizes) -> list[Figure]:
    local = sizes.local
    r = local_figures.measure(local)
    ours_p50, base_p50 = r.ours_latency_ms.median, r.baseline_latency_ms.median

    def kills(label: str, run: local_figures.KillRun, *, target: bool) -> list[Row]:
        zero = Target("==", 0) if target else None
        return [
            Row(f"{label}: kills (SIGKILL)", "kills", value=run.kills),
            Row(f"{label}: attempts cut mid-request", "attempts", value=run.cut_attempts),
            Row(
                f"{label}: deliveries acknowledged",
                "deliveries",
                value=run.acknowledged,
            ),
            Row(f"{label}: lost effects", "deliveries", value=run.effects.lost, target=zero),
            Row(
                f"{label}: duplicated effects",
                "deliveries",
                value=run.effects.duplicated,
                target=zero,
            ),
        ]

    five = Figure(
        5,
        "The usual way, side by side",
        "Both receivers over HTTP on the local stack, each in its own process behind the "
        "same kind of door (an API Gateway HTTP API event into the handler), against the "
        "same emulator, the same demo MCP server answering `get_package` after "
        f"{local_figures.MCP_LATENCY_MS} ms, and the same notify sink. The baseline "
        "(`bench/baseline/`, not shipped) verifies the signature with our code, "
        "deduplicates with Powertools' `@idempotent_function` on a DynamoDB table, and "
        "fetches the package and runs the default workflow inside the request. Same "
        f"load for both: {local.latency_deliveries} new deliveries, "
        f"{local.latency_concurrency} in flight, from the RelayLink simulator; latency "
        "is the simulator's per-attempt time to the answer. While ours are sent, the "
        "local stack's worker side is paused (SIGSTOP, then SIGCONT: its work waits in the "
        "stream and the queue), as in AWS, where it never shares a CPU or the emulator "
        "with the receiver; the baseline's load runs after ours is processed, alone too. "
        "Kills: the receiver process "
        "is SIGKILLed while the simulator keeps deliveries in flight (4 at a time; retries "
        f"on the contract's schedule compressed {local.kill_time_scale_ours:g} times for "
        f"ours, {local.kill_time_scale:g} for the baseline, whose in-progress records must "
        "expire first) and restarted; "
        "after all are acknowledged (and, for ours, processed), the notify sink's count "
        "per idempotency key gives lost (0) and duplicated (>1) effects. Random kills hit "
        "both; the baseline is also killed right after a delivery's notification was "
        "first applied (its idempotency record still says in progress), the window the "
        "usual way cannot close.",
        [
            Row("ours: receiver latency", "ms", summary=r.ours_latency_ms),
            Row("ours: receiver p99", "ms", value=r.ours_p99_ms),
            Row("baseline: receiver latency", "ms", summary=r.baseline_latency_ms),
            Row("baseline: receiver p99", "ms", value=r.baseline_p99_ms),
            Row("p50 ratio baseline / ours", "ratio", value=base_p50 / ours_p50),
            Row("p99 ratio baseline / ours", "ratio", value=r.baseline_p99_ms / r.ours_p99_ms),
            Row(
                "receiver p99 ratio baseline / ours on the local stack",
                "ratio",
                value=r.baseline_p99_ms / r.ours_p99_ms,
                target=Target(">=", local_figures.TARGET_P99_RATIO),
            ),
            *_warm_rows(r.warm),
            *_peer_rows(r),
            Row(
                "ours: load sent until every effect applied (worker included)",
                "s",
                value=r.ours_completed_s,
            ),
            Row(
                "baseline: load sent until every effect applied", "s", value=r.baseline_completed_s
            ),
            *kills("ours, random kills", r.ours_kills, target=True),
            *kills("baseline, random kills", r.baseline_kills, target=False),
            *kills("baseline, kills right after its effect", r.baseline_effect_kills, target=False),
        ],
        notes=[
            "Ours answers after one durable write; the package fetch and the workflow run "
            "in the worker, whose effect ledger makes a retried effect apply once. The "
            "baseline answers after the whole workflow, so every MCP millisecond is in "
            "RelayLink's 10 s budget.",
            "Until every effect is applied, ours is bounded by the worker side's "
            f"concurrency ({r.e2e['worker_concurrency']} batches at a time here, "
            f"{BATCH_CONCURRENCY.default} messages of a batch at a time, 300 ms of MCP "
            "each), the baseline "
            "by the sender's (5 requests in flight, each doing the whole work): throughput "
            "is a setting for ours (`worker_max_concurrency`) that does not touch the "
            "answer time RelayLink sees.",
            _p99_bound(
                r.ours_p99_ms,
                r.baseline_p99_ms,
                r.details["ours_latency_cpu_seconds_per_delivery"],
            ),
            _warm_bound(r.warm, local),
            _peer_bound(r),
            "A baseline request killed after its effect leaves an in-progress idempotency "
            "record; Powertools lets the retry through once that record expires (the "
            "invocation's remaining time, 10 s here), and the effect runs again. "
            "Completed records expire after an hour (Powertools' default), while "
            "RelayLink retries for three days.",
        ],
        details=r.details,
    )
    e2e = r.e2e
    six = Figure(
        6,
        "End to end through the local stack",
        f"{e2e['deliveries']:,} new deliveries from the RelayLink simulator, "
        f"{sizes.local.e2e_concurrency} in flight, {100 * local.e2e_retried:.0f} % of them "
        "sent twice (half overlapping the first attempt, half after its 2xx), to the "
        "local stack's front door; the worker side (stream -> relay -> SQS -> worker "
        f"with {e2e['worker_concurrency']} concurrent batches) processes them against the "
        "emulator, the demo MCP server (no added latency) and the notify sink. "
        "Accepted per second: deliveries / time until the last was acknowledged. "
        "Completed: from the first attempt until the last delivery's `completed_at` "
        "(whole seconds, so ±0.5 s), once every inbox item is completed and the queues "
        "are empty.",
        [
            Row("accepted per second", "deliveries/s", value=e2e["accepted_per_second"]),
            Row(
                "end-to-end deliveries completed per second",
                "deliveries/s",
                value=e2e["deliveries"] / max(1.0, e2e["seconds_until_all_completed"]),
                target=Target(">=", local_figures.TARGET_COMPLETED_PER_SECOND),
            ),
            Row("receiver latency (every answered attempt)", "ms", summary=r.e2e_latency_ms),
            Row("receiver p99", "ms", value=r.details["e2e_p99_ms"]),
            Row("time until all acknowledged", "s", value=e2e["seconds_until_all_acknowledged"]),
            Row(
                "CPU time per delivery, every process of the local stack",
                "ms",
                value=1000 * sum(e2e["cpu_seconds_per_delivery"].values()),
            ),
            Row(
                "AWS emulator CPU time per delivery",
                "ms",
                value=1000 * e2e["cpu_seconds_per_delivery"].get("AWS emulator", 0.0),
            ),
            Row(
                "AWS requests per delivery",
                "requests",
                value=sum(e2e["aws_requests_per_delivery"].values()),
            ),
            Row("time until all completed", "s", value=e2e["seconds_until_all_completed"]),
            Row("attempts sent", "attempts", value=e2e["attempts"]),
            Row("lost effects", "deliveries", value=e2e["effects"]["lost"], target=Target("==", 0)),
            Row(
                "duplicated effects",
                "deliveries",
                value=e2e["effects"]["duplicated"],
                target=Target("==", 0),
            ),
        ],
        notes=[
            f"Answers: {e2e['answers']}.",
            "The target for deliveries completed per second is twice the 69 per second "
            "of the run before it, which was the rate of deliveries *accepted*; deliveries "
            "completed per second were 9.5 in that run (1,000 in 105 s).",
            _throughput_bound(e2e),
        ],
        details={"e2e": e2e, "latency_ms": r.details["e2e_latency_ms"]},
    )
    return [five, six]


def bulk_requeue_rate(sizes: Sizes) -> Figure:
    result = bulk_requeue.measure(items=sizes.bulk_items, runs=sizes.bulk_runs)
    rows = [
        Row(
            "bulk requeue items per second over moto",
            "items/s",
            summary=result.requeue_per_second,
        ),
        Row(
            "bulk requeue dry run items per second over moto",
            "items/s",
            summary=result.dry_run_per_second,
        ),
        Row(
            "bulk requeue run again: deliveries changed",
            "deliveries",
            value=result.rerun_changed,
            target=Target("==", 0),
        ),
    ]
    rows += [
        Row(f"bulk requeue: {op} per item", "calls", value=n)
        for op, n in result.calls_per_item.items()
    ]
    return Figure(
        10,
        "Operator bulk requeue over moto",
        f"`ops.bulk.requeue_matching` (what `requeue --state failed --yes` runs) over "
        f"{sizes.bulk_items} failed deliveries, against moto's server in a process of its "
        "own on loopback, with the operator's clients as `--local` makes them; "
        f"{sizes.bulk_runs} run(s), each on a fresh table. A rate is the items divided "
        "by the call's elapsed time: the listing through the state index, a "
        f"conditional `UpdateItem` per item ({bulk.CONCURRENCY} in flight) and a "
        "`SendMessageBatch` per 10; the dry run reads each item instead. Then the same "
        "requeue again, which must change nothing.",
        rows,
        notes=[
            "Report-only: moto answers one request at a time on a busy shared machine, so "
            "the rate is the emulator's and the machine's more than ours; against "
            "DynamoDB each request is a network round trip, in flight "
            f"{bulk.CONCURRENCY} at a time.",
        ],
        details=result.to_json(),
    )


def write_units_per_delivery(sizes: Sizes) -> Figure:
    n = sizes.write_unit_deliveries
    result = pipeline_calls.measure(deliveries=n, workflow=DEFAULT_WORKFLOW).write_units
    rows = [
        Row(
            "DynamoDB write request units per delivery",
            "WRU",
            value=result.total,
            target=WRITE_UNITS_TARGET,
        ),
        Row("DynamoDB write request units per delivery: table", "WRU", value=result.table_wru),
        Row("DynamoDB write request units per delivery: index", "WRU", value=result.index_wru),
    ]
    for write in result.breakdown():
        rows.append(
            Row(
                f"{write['write']}: table + index",
                "WRU",
                value=write["table_wru"] + write["index_wru"],
            )
        )
    return Figure(
        11,
        f"DynamoDB write request units per delivery, accepted -> completed ({DEFAULT_WORKFLOW})",
        f"{n} deliveries through the production handlers in process on moto, as in figure 7, "
        f"with the default workflow (`{DEFAULT_WORKFLOW}`). moto's ConsumedCapacity is a "
        "constant, so the units are metered (`bench/write_units.py`): a botocore hook on "
        "every client reads each written item just before and just after its request, and "
        "applies DynamoDB's rules: table ceil(max(size before, after) / 1 KB), at least 1, "
        "doubled for a transaction's item, a ConditionCheck's too (billed as a write of "
        "the item it checks); for each index of `infra/schema.py`, a new entry "
        "1 (ceil(entry / 1 KB)), a removed one 1, a changed index key 2, a changed projected "
        "attribute 1, anything else 0 (keys-only: updating a non-key attribute writes no "
        "index). One row per kind of write: which function, which record, which change.",
        rows,
        notes=[
            "The receipt lists nothing and the completion puts the only index entry (1); "
            "the reconciler lists `open` only a receipt still open after the received age, "
            "and reads the received log for it (reads only: docs/cost.md). Earlier runs: "
            "the end of this document.",
        ],
        details={"deliveries": n, "writes_per_delivery": result.breakdown()},
    )


def reconciler_backlog_rate(sizes: Sizes) -> Figure:
    result = reconciler_backlog.measure(open_items=sizes.reconciler_open)
    return Figure(
        12,
        "The reconciler against a large open backlog over moto",
        f"{result.open_items:,} open items (processing, their leases not yet run out: an "
        f"MCP outage's backlog) and {result.lost} receipts whose relay message was lost "
        "(pending, never listed, older than the received age), in moto in process. Runs "
        "of the production reconciler (its handler's deps), each with a run's real time "
        "budget, until its pass over the open items is through. The rate is the inbox "
        "items the runs read (BatchGetItem keys) over their elapsed time; the recovery is "
        "the time from the first run's start until the last lost receipt was sent to the "
        "work queue.",
        [
            Row(
                "reconciler items per second, 100,000 open",
                "items/s",
                value=round(result.items_per_second, 1),
            ),
            Row(
                "reconciler: seconds until the relay's lost receipts are back in the queue, "
                "during it",
                "s",
                value=round(result.recovered_seconds, 2),
            ),
            Row("reconciler: runs for one pass over the open items", "runs", value=result.runs),
            Row(
                "reconciler: seconds for one pass over the open items",
                "s",
                value=round(result.pass_seconds, 1),
            ),
        ],
        notes=[
            "Report-only: moto runs with the local emulator's faster paths, so an index "
            "Query reads the index partition it names (moto's own scans and sorts the "
            "whole table for every page); what bounds the rate is moto's work per item "
            "(each query result copied and projected, each BatchGetItem key parsed, "
            "looked up and serialized, all in this one process), far more than ours; "
            f"against DynamoDB a page of {reconcile.LIST_PAGE_SIZE:,} keys and its ten "
            "BatchGetItem calls take tens of milliseconds (docs/capacity.md).",
            "The received log is read first, so the lost receipts come back within the "
            "first seconds of the first run, however long the pass over the backlog takes.",
        ],
        details=result.to_json(),
    )


def burst_at_the_front_door(sizes: Sizes) -> Figure:
    # Each run in a process of its own: this one sends the burst and serves the stack's
    # MCP server and notify sink, so another figure's heap (figure 12 leaves millions
    # of objects) would stall them with its collections.
    result = _in_own_process(burst.measure, deliveries=sizes.burst)
    shared = _in_own_process(burst.measure, deliveries=sizes.burst, worker_side_paused=False)
    return Figure(
        13,
        "A burst sent at once through the local front door",
        f"The local stack (the emulated API Gateway in front of the production receiver, "
        f"the emulated AWS, relay, workers, the demo MCP server); {result.deliveries:,} new "
        "deliveries, the first attempt of every one sent at the same moment with "
        "RelayLink's 10 s answer timeout; any not answered 2xx go on RelayLink's retry "
        "schedule (time-scaled) until acknowledged. The share is of the deliveries whose "
        "first attempt was answered 2xx. In AWS a burst's receipts never share a CPU or a "
        "table server with the processing; here everything shares 2 cores and one "
        "emulator process, so the worker side (relay, workers) is paused while the first "
        "attempts are out and continued at once after (the time until every one is "
        "completed includes the pause): those rows are report-only. The headline is a "
        "second run with the worker side running throughout, as a deployed stack is "
        "(its share is given under two names: the headline's and the earlier row's).",
        [
            Row(
                "burst of 2,000 at once, worker running: share answered 2xx",
                "%",
                value=round(100 * shared.first_attempts_2xx, 1),
                target=Target(">=", burst.TARGET_SHARE_WORKER_RUNNING),
            ),
            Row(
                "burst of 2,000 at once: share answered 2xx",
                "%",
                value=round(100 * result.first_attempts_2xx, 1),
            ),
            Row(
                "burst of 2,000 at once: accepted per second",
                "deliveries/s",
                value=round(result.accepted_per_second, 1),
            ),
            Row(
                "burst of 2,000 at once: seconds until every one is completed",
                "s",
                value=round(result.seconds_until_all_completed, 1),
            ),
            Row(
                "burst of 2,000 at once: slowest first answer",
                "s",
                value=round(result.first_attempt_seconds_max, 2),
            ),
            Row(
                "burst of 2,000 at once, worker side running: share answered 2xx",
                "%",
                value=round(100 * shared.first_attempts_2xx, 1),
            ),
            Row(
                "burst of 2,000 at once, worker side running: seconds until every one is completed",
                "s",
                value=round(shared.seconds_until_all_completed, 1),
            ),
        ],
        notes=[
            "A receipt costs about 5 ms of CPU across the processes it crosses (measured "
            "over the whole burst from /proc: the front door and receiver 2.8 ms, the "
            "emulator 2.0, the sender 0.4); 2,000 of them are some 10 CPU-seconds, which "
            "fit RelayLink's 10 s on 2 cores only if nothing else runs. With the worker "
            "side running it takes about as much again (its own process and its calls to "
            "the one emulator), and the first attempts beyond what 2 cores answer in 10 s "
            "time out; each is retried and answered 200 (the receipt had been taken).",
            _burst_bound(shared),
            f"The front door runs {burst.FRONT_DOOR_CONTAINERS} receiver processes "
            "(`front_door_containers`: forked, on one listening socket, each with "
            f"{front_door.CONCURRENT_INVOCATIONS} invocations at once, as many as the "
            "receiver's client keeps connections) and takes every connection (its backlog "
            "is the stage's burst, as API Gateway's is). In AWS a burst is bounded by "
            "Lambda's quotas, not by CPU: the account's concurrency (1,000 by default, "
            "shared by every function), each function's scaling rate (up to 1,000 more "
            "environments every 10 s) and each new environment's cold start (figure 3); "
            "the stage's burst limit answers the rest 429, which RelayLink retries "
            "(docs/capacity.md).",
            "The first attempts are written by a lean client: the requests are signed "
            "before the clock starts and each goes out on its own connection (raw "
            "asyncio), about 0.4 ms of CPU an attempt against some 3.8 ms through httpx, "
            "CPU the sender would otherwise take from the stack it measures. The retries "
            f"use the simulated RelayLink (`local.sender`, {burst.SENDER_DELIVERIES} "
            "deliveries per HTTP client).",
        ],
        details={"worker_side_paused": result.to_json(), "worker_side_running": shared.to_json()},
    )


def _in_own_process(measure: Callable[..., T], **arguments: Any) -> T:
    """``measure(**arguments)`` in a new interpreter (spawned), its result sent back."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(measure, **arguments).result()


def _burst_bound(shared: burst.BurstResult) -> str:
    """What the receipts share with the worker side running, measured."""
    emulator = shared.first_attempts_emulator_ms
    receipts = emulator.get("TransactWriteItems", 0.0)
    rest = sum(emulator.values()) - receipts
    cpu = shared.first_attempts_cpu_ms
    other = shared.emulator_lock_held_share.get("everything else", 0.0)
    held = shared.emulator_lock_held_share.get("receipts", 0.0) + other
    return (
        "What the receipts share with the worker side running: while the first attempts "
        "were out, the one AWS emulator process (one Python interpreter; it serves one "
        f"request at a time under its lock) spent {receipts:.1f} ms per delivery of the "
        f"burst answering the receipts' TransactWriteItems and {rest:.1f} ms answering "
        "everything else (the worker side's stream reads, queue calls, claims and "
        f"completions), and the worker side completed "
        f"{shared.completed_during_first_attempts} deliveries meanwhile, its own process "
        f"using {cpu.get('worker side', 0.0):.1f} ms of CPU per delivery of the burst. "
        f"The emulator's lock was held {100 * held:.0f} % of that time, "
        f"{100 * shared.emulator_lock_held_share.get('receipts', 0.0):.0f} % by the "
        f"receipts and {100 * other:.0f} % by the worker side's calls, and a receipt's "
        f"TransactWriteItems waited {shared.receipt_lock_wait_ms:.0f} ms on average for it "
        "(for the rest of the time it was passing from one request's thread to the next). "
        "The receipts wait for the same 2 cores and the same emulator as the processing; "
        "in AWS the functions have their own CPUs and the table and the queues are "
        "services that serve both sides at once."
    )


def agent_model_spend(sizes: Sizes) -> Figure:
    result = agent_spend.measure(sizes.agent_deliveries)
    data = result.to_json()
    return Figure(
        AGENT_SPEND_FIGURE,
        "The agent workflow's model calls per delivery, from its spend records",
        f"{result.deliveries} new deliveries through the local stack running the shipped "
        "`agent` workflow (its default settings: no tools, no approval) against the Bedrock "
        "emulator, which answers every `Converse` call with token counts (characters / 4, "
        "rounded up). Once every delivery is finished, each one's spend record "
        "(`spend#model`) is read as `inbox show --json` reads it (`ops.inbox.show_progress`): "
        "every call that may have run, and the tokens of those that answered. No faults, "
        "no kills: the figure is what a delivery costs when nothing goes wrong "
        "(`chaos --workflow agent` counts the extra calls of kills and lost answers).",
        [
            Row(
                "agent: model calls per delivery",
                "calls",
                value=data["model_calls_per_delivery"],
            ),
            Row(
                "agent: input tokens per delivery",
                "tokens",
                value=data["input_tokens_per_delivery"],
            ),
            Row(
                "agent: output tokens per delivery",
                "tokens",
                value=data["output_tokens_per_delivery"],
            ),
            Row(
                "agent: model calls of unknown outcome per delivery",
                "calls",
                value=data["unknown_outcome_calls_per_delivery"],
                target=Target("==", 0),
            ),
            Row(
                "agent: Converse calls the emulator served per delivery",
                "calls",
                value=data["emulator_calls_per_delivery"],
            ),
        ],
        notes=[
            "docs/cost.md prices the agent workflow's model tokens from the first three "
            "rows (Bedrock's per-token prices, bench/prices.py). The emulator's tokens are "
            "an estimate of a real model's: the prompt is the shipped agent's own (system "
            "prompt, fenced package), the answer the emulator's one-line summary, so a real "
            "model's longer answer costs more output tokens.",
        ],
        details=data,
    )


ALL: Final[dict[int, Callable[[Sizes], Figure | list[Figure]]]] = {
    1: aws_calls_per_outcome,
    2: receiver_overhead,
    3: cold_start_times,
    4: worker_mcp_cost,
    5: usual_way_and_end_to_end,
    7: cost_inputs,
    8: worker_time_at_mcp_latency,
    10: bulk_requeue_rate,
    11: write_units_per_delivery,
    12: reconciler_backlog_rate,
    13: burst_at_the_front_door,
    14: agent_model_spend,
}
