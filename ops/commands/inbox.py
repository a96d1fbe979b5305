"""``relaylink-receiver inbox show|list``: what the inbox holds (never a body)."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cli.errors import ErrorCode, format_line
from ops.commands.output import iso, print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call

if TYPE_CHECKING:
    from functions.core.models import InboxItem
    from functions.core.ports.effects import EffectRecord
    from functions.core.ports.package_record import PackageRecord
    from functions.core.ports.steps import StepRecord
    from functions.core.spend import ModelSpend
    from ops.target import Target

STATES = ("pending", "processing", "completed", "failed", "ignored", "awaiting_approval")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "inbox",
        help="show one delivery's inbox item or list them",
        description=(
            "Inspect the inbox: state, attempts, digest, times, last error; and one"
            " delivery's steps and effects. Never a body, never a step's result."
        ),
    )
    actions = parser.add_subparsers(dest="inbox_action", metavar="ACTION", required=True)

    show = actions.add_parser(
        "show", help="one delivery's inbox item, steps and effects (exit 1 if unknown)"
    )
    show.add_argument("delivery_id", metavar="DELIVERY_ID", help="the delivery's id (a uuid)")
    show.add_argument("--json", action="store_true", help="one JSON object")
    show.add_argument(
        "--trace",
        action="store_true",
        help="the delivery's trace instead: every span from its receipt to its last"
        " effect, with durations (a local stack's span file; deployed: its X-Ray trace id)",
    )
    add_target_arguments(show)
    show.set_defaults(handler=run_show)

    listing = actions.add_parser(
        "list",
        help="inbox items, oldest received first (by state: the state index; all: a scan)",
    )
    listing.add_argument(
        "--state",
        choices=STATES,
        help="only items in this state, read through the state index (never a scan;"
        " completed: since their completion, for as long as the table keeps them)",
    )
    listing.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="at most N items (with --state: the N most recently listed)",
    )
    listing.add_argument("--json", action="store_true", help='one JSON object {"items": [...]}')
    add_target_arguments(listing)
    listing.set_defaults(handler=run_list)


def run_show(args: argparse.Namespace) -> int:
    from ops import approvals, inbox

    target = open_target(args)
    item = operator_call(inbox.show_inbox, target, args.delivery_id)
    if item is None:
        message = f"no delivery {args.delivery_id} in the inbox"
        print(format_line("inbox", ErrorCode.UNKNOWN_DELIVERY, message), file=sys.stderr)
        return 1
    if args.trace:
        return _show_trace(target, item, as_json=args.json)
    view = inbox.inbox_view(item)
    progress = operator_call(inbox.show_progress, target, args.delivery_id, item)
    asked = operator_call(approvals.delivery_approvals, target, args.delivery_id)
    if args.json:
        print_json(
            {
                **view,
                **progress.to_dict(),
                "approvals": [approvals.approval_view(r) for r in asked],
            }
        )
        return 0
    lines: list[tuple[str, object]] = [
        (name, iso(value) if name.endswith(("_at", "_until")) else value)
        for name, value in view.items()
    ]
    if progress.package is not None:
        lines += _package_lines(progress.package)
    lines += [(_step_label(s), _step_line(s)) for s in progress.steps]
    lines += [(f"effect {e.name}", _effect_line(e)) for e in progress.effects]
    lines += [
        (
            f"effect {name}",
            f"done {iso(progress.repeatable_done_at)} (repeatable: no record,"
            " marked by the completion)",
        )
        for name in progress.repeatable_done
    ]
    for record in asked:
        lines += [
            (f"approval {record.name}", approvals.approval_line(record)),
            (f"  proposal {record.short_digest()}", approvals.proposal_text(record)),
            ("  package", record.package_digest or "(not recorded)"),
        ]
    if progress.spend.model_calls:
        lines.append(("model calls", spend_line(progress.spend)))
    if progress.spend.guardrail_calls:
        lines.append(("guardrail calls", guardrail_line(progress.spend)))
    width = max(len(label) for label, _ in lines)
    for label, shown in lines:
        print(f"{label:<{width}}  {'-' if shown is None else shown}")
    return 0


def _show_trace(target: Target, item: InboxItem, *, as_json: bool) -> int:
    from ops import trace

    trace_id = trace.trace_id_of(item.traceparent)
    if trace_id is None:
        message = f"{item.delivery_id} has no trace (received before traces, or ignored)"
        print(format_line("inbox", ErrorCode.NO_TRACE, message), file=sys.stderr)
        return 1
    where = {
        "delivery_id": item.delivery_id,
        "xray_trace_id": trace.xray_trace_id(trace_id),
        "sampled": trace.sampled(item.traceparent),
    }
    if not where["sampled"]:
        # Decided at receipt (trace_sample_percent, or RelayLink's own flag): no hop
        # recorded a span, here or in X-Ray; the logs still carry the trace id.
        if as_json:
            print_json({**where, "trace_id": trace_id, "spans": []})
        else:
            print(f"delivery {item.delivery_id}  trace {trace_id}  not sampled: no spans")
            print("its log lines carry the trace id (docs/operations.md, Following a delivery)")
        return 0
    if target.spans_file is None:
        # Deployed, the spans are X-Ray's (and a team's OTLP backend's): the ids find
        # them there and in Logs Insights (docs/operations.md, Following a delivery).
        if as_json:
            print_json({**where, "trace_id": trace_id, "spans": []})
        else:
            print(f"delivery {item.delivery_id}  trace {trace_id}")
            print(f"X-Ray: aws xray batch-get-traces --trace-ids {where['xray_trace_id']}")
        return 0
    spans = trace.read_trace(target.spans_file, trace_id)
    if as_json:
        print_json({**where, **trace.trace_view(trace_id, spans)})
        return 0
    print(f"delivery {item.delivery_id}  trace {trace_id}  spans {len(spans)}")
    print(f"{'start':>12}  {'duration':>12}  span")
    for line in trace.tree_lines(spans):
        print(line)
    return 0


def spend_line(spend: ModelSpend) -> str:
    """The delivery's model calls: how many may have run, and the tokens reported."""
    line = f"{spend.model_calls} ({spend.answered} answered"
    if spend.unknown_outcomes:
        line += f", {spend.unknown_outcomes} of unknown outcome: killed or answer lost"
    return line + f"), tokens {spend.input_tokens} in / {spend.output_tokens} out"


def guardrail_line(spend: ModelSpend) -> str:
    """The delivery's screening calls: how many may have run, what they were billed for."""
    return (
        f"{spend.guardrail_calls} ({spend.guardrail_text_units} text units,"
        f" {spend.guardrail_tokens} tokens)"
    )


def _package_lines(record: PackageRecord) -> list[tuple[str, object]]:
    """The recorded package; a refetch that returned another one on a line of its own."""
    lines: list[tuple[str, object]] = [
        (
            "package",
            f"{record.digest} ({record.content.size} bytes, recorded {iso(record.recorded_at)})",
        )
    ]
    if record.refetched_digest is not None:
        lines.append(
            (
                "package refetched",
                f"{record.refetched_digest} at {iso(record.refetched_at)}"
                " (package_changed: not the recorded package; nothing ran on it)",
            )
        )
    return lines


def _step_label(step: StepRecord) -> str:
    """``step tool.8493dfe8... (tool lookup)``: the readable name beside a digest."""
    return f"step {step.name}" + (f" ({step.label})" if step.label else "")


def _step_line(step: StepRecord) -> str:
    status = step.status.value + (f": {step.error}" if step.error else "")
    parts = [status, f"runs {step.runs}", f"started {iso(step.started_at)}"]
    if step.recorded_at is not None:
        parts.append(f"recorded {iso(step.recorded_at)}")
    if step.result is not None:
        parts.append(f"result {step.result.size} bytes")
    return ", ".join(parts)


def _effect_line(effect: EffectRecord) -> str:
    parts = [effect.status.value, f"intent {iso(effect.intent_at)}"]
    if effect.done_at is not None:
        parts.append(f"done {iso(effect.done_at)}")
    if effect.flagged_at is not None:
        parts.append(f"flagged {iso(effect.flagged_at)}")
    parts.append(f"key {effect.key}")
    return ", ".join(parts)


def run_list(args: argparse.Namespace) -> int:
    from cli.errors import CommandError, ErrorCode
    from functions.core.models import State
    from ops import inbox

    if args.limit is not None and args.limit < 1:
        raise CommandError("--limit must be at least 1", code=ErrorCode.BAD_OPTION)
    target = open_target(args)
    state = State(args.state) if args.state else None
    items = operator_call(inbox.list_inbox, target, state=state, limit=args.limit)
    if args.json:
        print_json({"count": len(items), "items": [inbox.inbox_view(i) for i in items]})
        return 0
    print(f"{'received_at':<20}  {'state':<10}  {'attempts':>8}  {'delivery_id':<36}  last_error")
    for item in items:
        print(
            f"{iso(item.received_at):<20}  {item.state.value:<10}  {item.attempts:>8}"
            f"  {item.delivery_id:<36}  {item.last_error or '-'}"
        )
    print(f"{len(items)} item(s)")
    return 0
