"""``docs/cost.md`` and figure 9 (the cost targets): the cost model's bill
(:mod:`bench.cost`), fed by this run's figures, as a document and as a figure."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from bench.cost import (
    COLD_START_RATE,
    DYNAMODB_BATCH_GET_MS,
    DYNAMODB_CALL_MS,
    DYNAMODB_WRITE_MS,
    FAULT_HOURS_PER_MONTH,
    KMS_ROTATIONS_BILLED,
    MCP_CALL_MS,
    MODEL_TOKENS,
    MODEL_TOKENS_PER_DELIVERY,
    MODEL_USD_PER_1000_TOKENS,
    NOTIFY_MS,
    S3_PUT_MS,
    SQS_EMPTY_RECEIVES_PER_MONTH,
    SQS_POLL_GATHER_SECONDS,
    SQS_POLLERS,
    STREAM_POLLS_PER_SECOND,
    STREAM_SHARDS_AT_START,
    TTL_DELETION_LAG_DAYS,
    VOLUMES,
    WORKER_BATCH,
    WORKFLOW_EFFECTS,
    Line,
    Model,
    model_with_batching_window,
    model_with_tracing,
    stack_config,
)
from bench.peers import PEERS, peer_bill
from bench.prices import PRICE_DATE, PRICES, REGION
from bench.report import Figure, Row, Target

# The target this document is measured against (docs/benchmarks.md, figure 9).
TARGET_PIPELINE_USD_PER_MILLION_AT_100M: Final = 8.0
# The same at 1 M deliveries a month, where the fixed items (alarms, metrics, secrets,
# key) weigh most.
SMALL_VOLUME: Final = 1_000_000
TARGET_PIPELINE_USD_PER_MILLION_AT_1M: Final = 15.0
TARGET_VOLUME: Final = 100_000_000
# The default install all in (the pipeline and its archive workflow's effects): what a
# user's bill shows.
TARGET_DEFAULT_INSTALL_USD_PER_MILLION_AT_100M: Final = 8.0
TARGET_DEFAULT_INSTALL_USD_PER_MILLION_AT_1M: Final = 12.0
ALL_IN_VOLUMES: Final = (1_000_000, 10_000_000, 100_000_000)
# A quarter of the worker's GB-seconds per delivery at a 300 ms MCP answer when a batch
# ran its messages one after another (docs/benchmarks.md, Earlier measurements).
TARGET_WORKER_GB_S: Final = 0.065796


def _volume(deliveries: int) -> str:
    return f"{deliveries / 1e9:g} B" if deliveries >= 1e9 else f"{deliveries / 1e6:g} M"


def _usd(value: float) -> str:
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.3f}"


TARGETS_FIGURE: Final = 9


def targets_figure(figures: list[Figure], *, alarms: int | None = None) -> Figure:
    """Figure 9: the cost targets, from the model fed by this run's figures (``alarms``:
    the stack's alarm count; None: the default stack's, synthesized)."""
    model = Model({f.number: f for f in figures}, stack_config(), alarms=alarms)
    per_m = TARGET_VOLUME / 1e6
    bill = model.lines(TARGET_VOLUME)
    effects = sum(x.usd_per_month for x in bill if x.group == WORKFLOW_EFFECTS) / per_m
    # The row named after the assumption keeps it; a run with figure 14 adds the measured one.
    assumed_tokens = model.assumed_model_tokens_line(TARGET_VOLUME).usd_per_month / per_m
    measured_tokens = (
        []
        if model.agent_spend is None
        else [
            Row(
                "model tokens per 1 M deliveries (agent workflow, measured: figure 14's "
                "spend records at Bedrock's per-token prices)",
                "$",
                value=round(model.model_tokens_line(TARGET_VOLUME).usd_per_month / per_m, 2),
            )
        ]
    )
    gb_s = model.worker_gb_s_per_delivery()
    traced = model_with_tracing(model)
    unwindowed = model_with_batching_window(model, 0)
    on_item = model.package_on_inbox_item(TARGET_VOLUME)
    peer_rows = [
        Row(
            f"peer per 1 M deliveries at 100 M / month, archive included: {name}",
            "$",
            value=round(peer_bill(model, name, TARGET_VOLUME).usd(archive=True) / per_m, 2),
        )
        for name in PEERS
    ]
    return Figure(
        TARGETS_FIGURE,
        "Cost targets (docs/cost.md)",
        "The cost model of docs/cost.md, fed by this run's figures (2, 3, 7, 8, 11) and the "
        "stated assumptions (in-region AWS latencies, a 300 ms MCP answer), at the "
        "stack's defaults. The pipeline: every AWS line of the bill for the default "
        f"workflow (`{model.workflow}`) except what the workflow itself does (its effects "
        "and their records) and model tokens, which are rows of their own. The "
        "worker: its batch's messages run concurrently, billed as its waiting plus every "
        "message's CPU time at the worker's memory; its average batch follows from the "
        "arrival rate, the batching window and the event source's 5 pollers (docs/cost.md, "
        "Inputs). The default install: the pipeline and the default workflow's effects, "
        "all in (the `archive` workflow has none: its archive is the package record on "
        "the inbox item, in the pipeline's DynamoDB lines). Peers: what a user would build "
        "instead, doing the same work with the same prices, latencies and measured CPU "
        "(bench/peers.py), without our guarantees.",
        [
            *(
                _per_million_row(measure, volume, usd, limit)
                for measure, volume, usd, limit in (
                    ("pipeline", TARGET_VOLUME, model.pipeline_usd, PIPELINE_100M),
                    ("pipeline", SMALL_VOLUME, model.pipeline_usd, PIPELINE_1M),
                    ("default install", TARGET_VOLUME, model.default_install_usd, INSTALL_100M),
                    ("default install", SMALL_VOLUME, model.default_install_usd, INSTALL_1M),
                )
            ),
            Row(
                "default install per 1 M at 100 M / month, the package kept on the inbox "
                "item instead of S3 (priced, not built)",
                "$",
                value=round(on_item.usd / per_m, 2),
            ),
            Row(
                "worker messages per batch at 100 M / month (the model's, "
                f"{model.batching_window_s:g} s batching window)",
                "messages",
                value=round(model.worker_batch(TARGET_VOLUME), 2),
            ),
            Row(
                "pipeline cost per 1 M deliveries at 100 M / month without a batching window",
                "$",
                value=round(unwindowed.pipeline_usd(TARGET_VOLUME) / per_m, 2),
            ),
            *peer_rows,
            Row(
                "workflow effects per 1 M deliveries at 100 M / month (default workflow)",
                "$",
                value=round(effects, 3),
            ),
            Row(
                f"model tokens per 1 M deliveries (agent workflow, "
                f"{MODEL_TOKENS_PER_DELIVERY.value:,.0f} tokens at "
                f"${MODEL_USD_PER_1000_TOKENS.value:g} per 1,000, assumed)",
                "$",
                value=round(assumed_tokens, 2),
            ),
            *measured_tokens,
            Row(
                "the same with tracing on (Lambda's default sampling)",
                "$",
                value=round(traced.pipeline_usd(TARGET_VOLUME) / (TARGET_VOLUME / 1e6), 3),
            ),
            Row(
                "worker GB-seconds per delivery at a 300 ms MCP answer",
                "GB-s",
                value=round(gb_s, 5),
                target=Target("<=", round(TARGET_WORKER_GB_S, 5)),
            ),
            Row(
                "worker GB-seconds per 1 M deliveries at a 300 ms MCP answer",
                "GB-s",
                value=round(gb_s * 1e6),
            ),
            Row(
                "worker billed time per message, batch of 10",
                "ms",
                value=round(model.worker_ms_per_message(), 1),
            ),
            Row(
                "DynamoDB write request units per delivery, as billed here",
                "WRU",
                value=round(model.dynamodb.wru_total, 3),
            ),
            Row(
                "DynamoDB write request units per delivery of the workflow's effect records",
                "WRU",
                value=round(model.dynamodb.effect_wru, 3),
            ),
        ],
        notes=[
            f"DynamoDB: {model.dynamodb.source}.",
            _pipeline_bound(model),
            _default_install_bound(model),
        ],
    )


def _pipeline_bound(model: Model) -> str:
    """What the pipeline's cost is made of at the target volume, and what bounds it."""
    per_m = TARGET_VOLUME / 1e6
    bill = [
        x for x in model.lines(TARGET_VOLUME) if x.group not in (WORKFLOW_EFFECTS, MODEL_TOKENS)
    ]
    ranked = sorted(bill, key=lambda x: -x.usd_per_month)[:3]
    top = ", ".join(f"{x.component} {_usd(x.usd_per_month / per_m)}" for x in ranked)
    total = sum(x.usd_per_month for x in bill) / per_m
    writes = next(x for x in bill if x.component.startswith("DynamoDB writes")).usd_per_month
    fixed_by_requests = sum(x.usd_per_month for x in bill if x.component == "API Gateway HTTP API")
    per_unit = writes / per_m / model.dynamodb.wru_total
    verdict = (
        f"met with {_usd(TARGET_PIPELINE_USD_PER_MILLION_AT_100M - total)} to spare"
        if total <= TARGET_PIPELINE_USD_PER_MILLION_AT_100M
        else f"missed by {_usd(total - TARGET_PIPELINE_USD_PER_MILLION_AT_100M)}"
    )
    return (
        f"At 100 M / month the largest lines per 1 M are {top}; the target is {verdict}. "
        f"DynamoDB writes ({model.dynamodb.wru_total:g} WRU, {_usd(writes / per_m)}) and "
        f"API Gateway's per-request price ({_usd(fixed_by_requests / per_m)}) are "
        f"{100 * (writes + fixed_by_requests) / per_m / total:.0f} % of it. "
        f"Each write unit per delivery costs {_usd(per_unit)} per 1 M: one of them keeps "
        "completed deliveries listed for operators (the completion moves its index entry "
        "to the `completed` label, a delete and a put, where dropping it would be one "
        f"delete); without that listing the pipeline would cost {_usd(total - per_unit)}."
    )


PIPELINE_100M: Final = TARGET_PIPELINE_USD_PER_MILLION_AT_100M
PIPELINE_1M: Final = TARGET_PIPELINE_USD_PER_MILLION_AT_1M
INSTALL_100M: Final = TARGET_DEFAULT_INSTALL_USD_PER_MILLION_AT_100M
INSTALL_1M: Final = TARGET_DEFAULT_INSTALL_USD_PER_MILLION_AT_1M


def _per_million_row(what: str, volume: int, usd: Callable[[int], float], limit: float) -> Row:
    """ "<what> cost per 1 M deliveries at <volume> / month", against its target."""
    return Row(
        f"{what} cost per 1 M deliveries at {_volume(volume)} / month",
        "$",
        # Cents, as docs/cost.md shows it: rounding twice could show another cent.
        value=round(usd(volume) / (volume / 1e6), 2),
        target=Target("<=", limit),
    )


def _default_install_bound(model: Model) -> str:
    """What the default install's all-in cost is made of, and what bounds it."""
    notes = []
    for volume, target in (
        (TARGET_VOLUME, TARGET_DEFAULT_INSTALL_USD_PER_MILLION_AT_100M),
        (SMALL_VOLUME, TARGET_DEFAULT_INSTALL_USD_PER_MILLION_AT_1M),
    ):
        per_m = volume / 1e6
        total = model.default_install_usd(volume) / per_m
        verdict = (
            f"met with {_usd(target - total)} to spare"
            if total <= target
            else f"**missed** by {_usd(total - target)}"
        )
        notes.append(f"at {_volume(volume)} / month {_usd(total)} against ${target:g} ({verdict})")
    per_m = TARGET_VOLUME / 1e6
    inbox = model.items["inbox"]["mean_bytes"]
    s3 = model.s3_object_per_delivery_usd
    return (
        "The default install, all in: "
        + "; ".join(notes)
        + ". Its archive is the package record: the package's canonical form and digest "
        "on the delivery's inbox item, written by the completion's own conditional update "
        f"(figure 11: no write unit of its own; the item is {inbox:,.0f} B at rest with the "
        "measured package, figure 7), kept for the inbox's retention with point-in-time "
        "recovery. An S3 object per delivery, as before, would add S3's price per PUT "
        f"($5.00 per 1 M): {_usd(s3(TARGET_VOLUME) / per_m)} per 1 M at 100 M and "
        f"{_usd(s3(SMALL_VOLUME))} at 1 M. The record costs nothing while the inbox item "
        "stays under 1 KB; a larger package makes the completing update cost a unit per "
        "further KB ($0.625 per 1 M each), and content over 64 KB goes to "
        "the archive bucket under its digest (a PUT). " + _small_volume_bound(model)
    )


def _small_volume_bound(model: Model) -> str:
    """What bounds the bill at 1 M a month: the fixed items, and batches of one."""
    bill = {x.component: x.usd_per_month for x in model.lines(SMALL_VOLUME)}
    alarms = bill["CloudWatch metrics (EMF), alarms, dashboard"]
    secrets = bill["Secrets Manager (2 secrets + fetches)"]
    key = bill["KMS key of the alarm topic"]
    index_unit = SMALL_VOLUME / 1e6 * PRICES["ddb_wru"].usd
    return (
        f"At 1 M / month the fixed items bound the bill: {model.alarms} alarms and their "
        f"metrics {_usd(alarms)}, two secrets {_usd(secrets)}, the event source's idle "
        "polling (in the SQS line)"
        + (f", the alarm topic's key {_usd(key)}" if key else "")
        + "; and batches of one, each billing a whole MCP wait. The next unit down is a "
        f"write: the completed listing's index entry ({_usd(index_unit)} per 1 M), which "
        "`inbox list --state completed` and the console read."
    )


def _model_tokens_input(model: Model) -> str:
    """The Inputs row of the agent workflow's model calls: measured, or which assumption."""
    spend = model.agent_spend
    if spend is None:
        return (
            f"| model tokens (agent workflow) | {MODEL_TOKENS_PER_DELIVERY.value:,.0f} per "
            f"delivery at ${MODEL_USD_PER_1000_TOKENS.value:g} per 1,000 | "
            f"{MODEL_TOKENS_PER_DELIVERY.source}; {MODEL_USD_PER_1000_TOKENS.source} "
            "(this run has no figure 14, which measures them) |"
        )
    return (
        f"| model calls (agent workflow) | {spend.model_calls:g} "
        f"call{'' if spend.model_calls == 1 else 's'}, "
        f"{spend.input_tokens:,.0f} input and {spend.output_tokens:,.0f} output tokens per "
        f"delivery, at Bedrock's per-token prices (Prices used) | {spend.source} |"
    )


def render(figures: list[Figure], run: dict[str, Any], *, alarms: int | None = None) -> str:
    by_number = {f.number: f for f in figures}
    config = stack_config()
    model = Model(by_number, config, alarms=alarms)
    traced = model_with_tracing(model)
    bills = {v: model.lines(v) for v in VOLUMES}
    lines = [
        "# Cost per delivery",
        "",
        f"Written by `make bench` ({run['date (UTC)']}, commit {run['commit']}) from the "
        "figures of the same run (docs/benchmarks.md)"
        + "".join(f"; {key}: {value}" for key, value in run.items() if key.startswith("figures "))
        + "; do not edit by hand.",
        "",
        f"**Prices:** AWS list prices for **{REGION}**, as published on the services' "
        f"pricing pages and known to the author as of **{PRICE_DATE}** (DynamoDB on-demand "
        "after its November 2024 reduction; Lambda's INIT phase billed like invocation "
        "time, as AWS announced for 1 August 2025); no free tier, savings plans or "
        "reserved capacity. Check https://aws.amazon.com/pricing/ before relying on them. "
        "Lambda on arm64 (the build target). Measured quantities come from this run; "
        "assumed ones (network times inside AWS, the partner's MCP server, and the agent's "
        "model tokens in a run without figure 14) are marked `assumed` under Inputs.",
        "",
        "## Dollars per million deliveries",
        "",
        f"A delivery: one accepted `package.received`, processed once by the default "
        f"workflow (`{model.workflow}`: the package kept on its record). Variable cost at 1 M "
        "deliveries a month, per million; the fixed monthly items (alarms, metrics, dashboard, "
        "secrets, key) are listed at the end of the same table (the SQS line includes "
        "the event-source mapping's idle polling). The workflow's own effects and model "
        "tokens are lines of their own, outside the pipeline's total.",
        "",
        "| component | $ per 1 M deliveries | basis (at 1 M / month) |",
        "|---|---|---|",
    ]
    one_million = bills[VOLUMES[0]]
    fixed_names = {
        "CloudWatch metrics (EMF), alarms, dashboard",
        "Secrets Manager (2 secrets + fetches)",
        "KMS key of the alarm topic",
    }
    apart = (WORKFLOW_EFFECTS, MODEL_TOKENS)
    variable = [x for x in one_million if x.component not in fixed_names and x.group not in apart]
    for x in sorted(variable, key=lambda x: -x.usd_per_month):
        lines.append(f"| {x.component} | {_usd(x.usd_per_month)} | {x.basis} |")
    variable_total = sum(x.usd_per_month for x in variable)
    lines.append(f"| **pipeline, variable total** | **{_usd(variable_total)}** | |")
    rest = model.rest_api(VOLUMES[0])
    lines.append(
        f"| (REST API instead of HTTP API) | {_usd(rest)} "
        f"| +{_usd(rest - one_million[0].usd_per_month)} per 1 M |"
    )
    xray_on = next(x for x in traced.lines(VOLUMES[0]) if x.component == "X-Ray")
    lines.append(f"| (X-Ray with tracing on) | {_usd(xray_on.usd_per_month)} | {xray_on.basis} |")
    for x in one_million:
        if x.component in fixed_names:
            lines.append(
                f"| {x.component} (fixed, per month) | {_usd(x.usd_per_month)} | {x.basis} |"
            )
    for x in [
        *(x for x in one_million if x.group in apart),
        model.tool_agent_tokens_line(VOLUMES[0]),
    ]:
        lines.append(f"| {x.group}: {x.component} | {_usd(x.usd_per_month)} | {x.basis} |")
    lines += [
        "",
        "## At 1 M, 100 M and 1 B deliveries a month",
        "",
        "| group | 1 M / month | 100 M / month | 1 B / month |",
        "|---|---|---|---|",
    ]
    groups = ["API Gateway", "Lambda", "DynamoDB", "SQS", "CloudWatch", "Other"]

    def total(volume: int, groups: list[str] | tuple[str, ...]) -> float:
        return sum(x.usd_per_month for x in bills[volume] if x.group in groups)

    for group in groups:
        cells = [_usd(total(v, [group])) for v in VOLUMES]
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    pipeline = {v: total(v, groups) for v in VOLUMES}
    lines.append(
        "| **pipeline total** | " + " | ".join(f"**{_usd(pipeline[v])}**" for v in VOLUMES) + " |"
    )
    lines.append(
        "| **pipeline per 1 M deliveries** | "
        + " | ".join(f"**{_usd(pipeline[v] / (v / 1e6))}**" for v in VOLUMES)
        + " |"
    )
    for group in apart:
        cells = [_usd(total(v, [group]) / (v / 1e6)) for v in VOLUMES]
        lines.append(f"| {group}, per 1 M deliveries | " + " | ".join(cells) + " |")
    everything = {v: total(v, [*groups, WORKFLOW_EFFECTS]) for v in VOLUMES}
    lines.append(
        "| with the default workflow's effects, per 1 M | "
        + " | ".join(_usd(everything[v] / (v / 1e6)) for v in VOLUMES)
        + " |"
    )
    at_target = pipeline[TARGET_VOLUME] / (TARGET_VOLUME / 1e6)
    met = "met" if at_target <= TARGET_PIPELINE_USD_PER_MILLION_AT_100M else "**missed**"
    lines += [
        "",
        f"Pipeline cost per 1 M deliveries at 100 M / month: **{_usd(at_target)}** against "
        f"a target of ${TARGET_PIPELINE_USD_PER_MILLION_AT_100M:g} ({met}; earlier "
        "bills, with the commit they were measured at: docs/benchmarks.md, Earlier "
        "measurements).",
        "",
        "What dominates (the pipeline's lines):",
        "",
    ]
    for v in VOLUMES:
        ranked = sorted(
            (x for x in bills[v] if x.group not in apart), key=lambda x: -x.usd_per_month
        )
        top = ", ".join(
            f"{x.component} {100 * x.usd_per_month / pipeline[v]:.0f} %" for x in ranked[:3]
        )
        lines.append(f"- **{_volume(v)} / month:** {top}.")
    lines += _reading(model, bills)
    lines += _all_in(model)
    effect_wait_ms = model.worker_wait_ms(WORKER_BATCH) - model.worker_wait_ms(
        WORKER_BATCH, effects=False
    )
    lines += [
        "",
        "## Inputs",
        "",
        "| input | value | source |",
        "|---|---|---|",
        f"| receiver billed duration | {model.receiver_ms():.0f} ms | CPU "
        f"{model.receiver_cpu_ms.value:.2f} ms ({model.receiver_cpu_ms.source}) x "
        f"{model._cpu_scale('receiver'):.1f} (CPU share at {model.memory['receiver']} MB) + "
        f"{DYNAMODB_WRITE_MS.value:.0f} ms ({DYNAMODB_WRITE_MS.source}) |",
        f"| worker billed duration per batch of {WORKER_BATCH} | "
        f"{model.worker_batch_ms(WORKER_BATCH):.0f} ms "
        f"({model.worker_ms_per_message():.0f} ms per message), of which the pipeline's "
        f"{model.worker_batch_ms(WORKER_BATCH, effects=False):.0f} ms | the pipeline: "
        f"waits {model.worker_wait_ms(WORKER_BATCH, effects=False):.0f} ms (messages side "
        f"by side; two MCP answers of {MCP_CALL_MS.value:.0f} ms ({MCP_CALL_MS.source}), "
        f"the first message probing the server; {DYNAMODB_CALL_MS.value:.0f} ms per "
        f"DynamoDB call) + {WORKER_BATCH} x CPU {model.worker_bare_cpu_ms.value:.1f} ms "
        f"({model.worker_bare_cpu_ms.source}); the {model.workflow} workflow's effects: "
        f"waits {effect_wait_ms:.0f} ms "
        f"(S3 {S3_PUT_MS.value:.0f} ms per PUT, {model.notifications:g} notification(s) of "
        f"{NOTIFY_MS.value:.0f} ms ({NOTIFY_MS.source}), its records' DynamoDB calls) + "
        f"{WORKER_BATCH} x CPU "
        f"{model.worker_cpu_ms.value - model.worker_bare_cpu_ms.value:.1f} ms (figure 8: "
        f"{model.worker_cpu_ms.value:.1f} ms with it, {model.worker_cpu_ms.source}); CPU "
        f"x {model._cpu_scale('worker'):.1f} (CPU share at {model.memory['worker']} MB); a "
        f"batch of one: {model.worker_batch_ms(1):.0f} ms |",
        f"| reconciler billed duration | 200 ms per run, + "
        f"{DYNAMODB_BATCH_GET_MS.value:.0f} ms per 100 receipts of the received log | "
        f"assumed: a run's fixed work; {DYNAMODB_BATCH_GET_MS.source} |",
        f"| memory | {', '.join(f'{k} {v} MB' for k, v in model.memory.items())} | "
        "infra/function_memory.py; "
        f"the worker's from its measured peak of {model.worker_rss_mb:.0f} MB (figure 8) |",
        f"| tracing | {'on' if model.tracing else 'off'} | infra/config.py default "
        "(`-c tracing=true`) |",
        f"| trace_sample_percent | {model.trace_sample_percent} | infra/config.py "
        "default: deliveries whose own trace X-Ray records with tracing on |",
    ]
    for function, ops in model.calls.items():
        calls = ", ".join(f"{op} {n:g}" for op, n in ops.items())
        lines.append(f"| {function} AWS calls per delivery | {calls} | measured: figure 7 |")
    log_text = ", ".join(f"{k} {v:,.0f}" for k, v in model.log_bytes.items())
    items_text = ", ".join(
        f"{k} {v['count_per_delivery']:g} x {v['mean_bytes']:.0f} B" for k, v in model.items.items()
    )
    wru_text = ", ".join(f"{f} {n:g}" for f, n in model.dynamodb.wru.items())
    lines += [
        f"| DynamoDB per delivery | WRU {model.dynamodb.wru_total:g} ({wru_text}; "
        f"{model.dynamodb.index_wru:g} of them index writes), RRU {model.dynamodb.rru:g}, "
        f"{model.dynamodb.bytes_at_rest:,.0f} B at rest; the workflow's records: WRU "
        f"{model.dynamodb.effect_wru:g}, RRU {model.dynamodb.effect_rru:g}, "
        f"{model.dynamodb.effect_bytes_at_rest:,.0f} B at rest | {model.dynamodb.source} |",
        f"| log bytes per delivery | {log_text}; HTTP API access log "
        f"{model.access_log_bytes.value:,.0f} | measured: figure 7; "
        f"{model.access_log_bytes.source} |",
        f"| items at rest per delivery | {items_text} | measured: figure 7 |",
        f"| retention | inbox and outbox (the received log) "
        f"{config['inbox_retention_days']} days, logs "
        f"{config['log_retention_days']} "
        f"days; + {TTL_DELETION_LAG_DAYS.value:g} days before DynamoDB deletes an expired "
        f"item | infra/config.py defaults, functions/core/table_layout.py; "
        f"{TTL_DELETION_LAG_DAYS.source} |",
        f"| cold starts | {COLD_START_RATE.value:g} per request x {model.cold_ms.value:.0f} ms "
        f"| {COLD_START_RATE.source}; {model.cold_ms.source} |",
        f"| data transfer out | {model.egress.value:,.0f} B per delivery | {model.egress.source} |",
        f"| idle SQS polling | {SQS_EMPTY_RECEIVES_PER_MONTH.value:,.0f} receives / month "
        f"| {SQS_EMPTY_RECEIVES_PER_MONTH.source} |",
        "| worker messages per batch | "
        + ", ".join(f"{model.worker_batch(v):.1f} at {_volume(v)}" for v in ALL_IN_VOLUMES)
        + f" / month: arrivals in {model.batching_window_s:g} s (the batching window, "
        f"infra/config.py) + {SQS_POLL_GATHER_SECONDS.value:g} s, shared by "
        f"{SQS_POLLERS.value:g} pollers, from 1 to {WORKER_BATCH} | "
        f"{SQS_POLLERS.source}; {SQS_POLL_GATHER_SECONDS.source} |",
        f"| stream shards | at least {STREAM_SHARDS_AT_START.value:g} (1 per 1,000 WRU/s "
        f"above); the relay reads each {STREAM_POLLS_PER_SECOND} times a second | "
        f"{STREAM_SHARDS_AT_START.source} |",
        f"| KMS key rotation | {KMS_ROTATIONS_BILLED.value:g} rotations billed | "
        f"{KMS_ROTATIONS_BILLED.source} |",
        f"| metrics billed by the hour | {model.metric_months():.2f} metric-months for "
        f"{model.metrics} metrics | {FAULT_HOURS_PER_MONTH.source} |",
        _model_tokens_input(model),
        "",
        "## Prices used",
        "",
        "| item | USD | per |",
        "|---|---|---|",
        *(f"| {p.what} | {p.usd:g} | {p.per} |" for p in PRICES.values()),
    ]
    lines += _limits()
    return "\n".join(lines).rstrip() + "\n"


def _reading(model: Model, bills: dict[int, list[Line]]) -> list[str]:
    """What the numbers say, in sentences computed from them."""

    def usd(volume: int, component: str) -> float:
        return sum(x.usd_per_month for x in bills[volume] if x.component.startswith(component))

    def exact(volume: int, component: str) -> float:
        return sum(x.usd_per_month for x in bills[volume] if x.component == component)

    dynamodb = model.dynamodb
    low, mid, high = VOLUMES
    per_m = 1e6 / low
    xray_on = sum(
        x.usd_per_month for x in model_with_tracing(model).lines(low) if x.component == "X-Ray"
    )
    return [
        "",
        f"- **DynamoDB writes**: {dynamodb.wru_total:g} WRU per delivery "
        f"({', '.join(f'{f} {n:g}' for f, n in dynamodb.wru.items())}), "
        f"{dynamodb.index_wru:g} of them index writes; "
        f"{_usd(usd(mid, 'DynamoDB writes') / (mid / 1e6))} per 1 M at 100 M / month.",
        f"- **X-Ray** is off by default ($0). With tracing on (`-c tracing=true`) it bills "
        "two kinds of trace, $5 per 1 M recorded: Lambda's own, one per invocation its "
        "default rule samples (1 request/s and 5 % above it, per function; no setting "
        "changes it), and one per sampled delivery (`trace_sample_percent`, "
        f"{model.trace_sample_percent} by default: every hop's segments share the "
        "delivery's trace id, so a delivery is one trace however many segments it sends). "
        f"Together {_usd(xray_on * per_m)} per 1 M at 1 M / month, the largest line at "
        f"that volume; the deliveries' part is "
        f"{_usd(PRICES['xray'].usd * model.trace_sample_percent / 100)} per 1 M "
        "deliveries at any volume. Why 100 by default: tracing is a choice you make to "
        "follow deliveries, and a sample would miss most of the deliveries an alarm names; "
        "at high volume, where Lambda's own share falls to 5 %, lower it "
        "(`-c trace_sample_percent=10` bills a tenth). Not counted, as no free tier is "
        "here: the first 100,000 traces recorded a month are free, and reading traces "
        "back (the console, `aws xray batch-get-traces`) costs $0.50 per 1 M retrieved "
        "or scanned, the first 1 M a month free.",
        f"- **The worker's Lambda time** ({_usd(exact(mid, 'Lambda worker') / (mid / 1e6))} "
        f"per 1 M at 100 M / month for the pipeline, "
        f"{_usd(exact(mid, 'Lambda worker time of the effects') / (mid / 1e6))} for the "
        "workflow's effects) runs a batch's messages side by side: a full batch "
        f"bills {model.worker_ms_per_message():.0f} ms per message at "
        f"{model.memory['worker']} MB, against 526 ms at 512 MB when they ran one after "
        "another. At 1 M / month batches hold about one message, so each bills the whole "
        f"wait ({model.worker_batch_ms(1):.0f} ms).",
        "- **The archive** is the package record on the inbox item (DynamoDB lines); an S3 "
        f"object per delivery would add {_usd(PRICES['s3_put'].usd * 1000)} per 1 M "
        f"(S3 archive PUTs: {_usd(usd(low, 'S3 archive PUTs') * per_m)} per 1 M now).",
        f"- **API Gateway** is {_usd(usd(low, 'API Gateway') * per_m)} per 1 M with the HTTP "
        f"API; the REST API would be {_usd(model.rest_api(low) * per_m)}.",
        f"- At 1 B / month the pipeline costs {_usd(_pipeline(bills[high]) / (high / 1e6))} "
        "per 1 M.",
    ]


def _all_in(model: Model) -> list[str]:
    """The default install's bill beside the pipeline's and the peers', per 1 M."""

    def per_m(usd: float, volume: int) -> str:
        return _usd(usd / (volume / 1e6))

    header = " | ".join(f"{_volume(v)} / month" for v in ALL_IN_VOLUMES)
    lines = [
        "",
        "## The default install, all in, and what a user would build instead",
        "",
        "Per 1 M deliveries. The default install: the pipeline and the default workflow's "
        "effects (none: its archive is the package record), all in; the model tokens of the "
        "agent workflow apart. The peers do the same work (verify, fetch over MCP, archive "
        "to S3) priced by the same model (bench/peers.py: the same prices, "
        "assumed latencies, measured CPU and log bytes, worker batches run side by side "
        "as ours, two secrets and three alarms) and have none of our guarantees: no "
        "durable receipt before the answer (the in-request peer answers after the work), "
        "no reconciler, no effect ledger, no operator's listing.",
        "",
        f"| | {header} |",
        "|---|" + "---|" * len(ALL_IN_VOLUMES),
    ]
    rows: list[tuple[str, list[str]]] = [
        ("ours: pipeline", [per_m(model.pipeline_usd(v), v) for v in ALL_IN_VOLUMES]),
        (
            "**ours: default install, all in**",
            [f"**{per_m(model.default_install_usd(v), v)}**" for v in ALL_IN_VOLUMES],
        ),
        (
            "ours: default install with an S3 object per delivery (the archive before)",
            [per_m(model.s3_object_per_delivery_usd(v), v) for v in ALL_IN_VOLUMES],
        ),
        (
            "ours: pipeline without a batching window",
            [
                per_m(model_with_batching_window(model, 0).pipeline_usd(v), v)
                for v in ALL_IN_VOLUMES
            ],
        ),
    ]
    for name in PEERS:
        bills = [peer_bill(model, name, v) for v in ALL_IN_VOLUMES]
        rows.append(
            (
                f"peer: {name}",
                [
                    f"{per_m(b.usd(archive=False), v)} "
                    f"({per_m(b.usd(archive=True), v)} with the archive)"
                    for b, v in zip(bills, ALL_IN_VOLUMES, strict=True)
                ],
            )
        )
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    lines += ["", _default_install_bound(model)]
    return lines


def _pipeline(bill: list[Line]) -> float:
    return sum(x.usd_per_month for x in bill if x.group not in (WORKFLOW_EFFECTS, MODEL_TOKENS))


def _limits() -> list[str]:
    """Where the limits are: one capacity plan, docs/capacity.md (infra/capacity.py)."""
    return [
        "",
        "## Scaling limits, and the setting that moves each",
        "",
        "Each component's limit, its arithmetic from AWS's published quotas, the ceiling at "
        "the defaults and at the largest settings, the alarm that fires first and what to "
        "raise: docs/capacity.md (one source of numbers, `infra/capacity.py`).",
    ]


def write(figures: list[Figure], run: dict[str, Any], path: Path) -> None:
    path.write_text(render(figures, run), encoding="utf-8")
