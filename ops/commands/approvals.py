"""``relaylink-receiver approvals list|approve|deny``: deliveries waiting for a person."""

# ruff: noqa: PLC0415 (boto3 and the adapters are imported inside the handlers)

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from cli.errors import ErrorCode, format_line
from ops.commands.output import iso, print_json
from ops.commands.target_options import add_target_arguments, open_target, operator_call

if TYPE_CHECKING:
    from ops.approvals import DecisionReport, Waiting

# A proposal's text is shown on one line, cut here saying so (``--full`` and ``--json``
# show all of it).
_SHOWN_CHARS = 160


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "approvals",
        help="deliveries waiting for a person's approval: list, approve, deny",
        description=(
            "A workflow with an approval gate (the agent's 'approval' setting: its alert, or"
            " the acting tools it names) parks each delivery once its proposal is recorded;"
            " with a screening guardrail (guardrail_id), so does each briefing the guardrail"
            " blocked (approval 'screening'). List them with what they propose;"
            " approve (the delivery resumes and does what it proposed) or deny (it ends"
            " failed, approval_denied). A decision is recorded once: a second approve"
            " changes nothing, and approving a denied one (or denying an approved one)"
            " is refused (exit 1). A decision names the proposal it decides (--proposal,"
            " the digest approvals list prints): it is refused when another one waits"
            " (approval_other_proposal), and an approve without it is refused where the"
            " delivery ever asked for more than one (approval_proposal_required). A"
            " decision at or after the deadline is refused (approval_expired, exit 1);"
            " undecided ones are denied at their deadline by the reconciler."
        ),
    )
    actions = parser.add_subparsers(dest="approvals_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="every delivery waiting, the oldest first")
    listing.add_argument("--json", action="store_true", help='one JSON object {"items": [...]}')
    listing.add_argument(
        "--full", action="store_true", help="each proposal whole, on lines of its own (no cut)"
    )
    add_target_arguments(listing)
    listing.set_defaults(handler=run_list)
    for action, verb in (("approve", "approve"), ("deny", "deny")):
        decide = actions.add_parser(action, help=f"{verb} what one delivery waits for")
        decide.add_argument("delivery_id", metavar="ID", help="the delivery's id")
        decide.add_argument("--note", help="why (kept with the decision; inbox show prints it)")
        decide.add_argument(
            "--name", help="which approval, when a delivery has several (default: the one)"
        )
        decide.add_argument(
            "--proposal",
            metavar="DIGEST",
            help="the digest of the proposal you read (approvals list prints it): refused"
            " when another one waits",
        )
        decide.add_argument(
            "--by",
            metavar="NAME",
            help="who decides (local stack: default $RELAYLINK_OPERATOR, else your login"
            " name; deployed: your AWS principal is recorded, NAME beside it)",
        )
        decide.add_argument("--json", action="store_true", help="one JSON object")
        add_target_arguments(decide)
        decide.set_defaults(handler=run_decide, decision=action)


def run_list(args: argparse.Namespace) -> int:
    from ops import approvals

    target = open_target(args)
    waiting = operator_call(approvals.list_waiting, target)
    if args.json:
        print_json({"count": len(waiting), "items": [w.to_dict() for w in waiting]})
        return 0
    print(
        f"{'waiting_since':<20}  {'deadline':<20}  {'delivery_id':<36}  {'proposal':<12}"
        "  what it proposes"
    )
    for entry in waiting:
        digest = "-" if entry.record is None else entry.record.short_digest()
        limit = None if args.full else _SHOWN_CHARS
        print(
            f"{iso(entry.item.state_changed_at) or '-':<20}"
            f"  {iso(entry.item.approval_deadline) or '-':<20}"
            f"  {entry.item.delivery_id:<36}  {digest:<12}  {_proposal_line(entry, limit)}"
        )
        if args.full and entry.record is not None:
            print(f"    package {entry.record.package_digest or '(not recorded)'}")
            print(f"    proposal {approvals.proposal_text(entry.record)}")
    print(f"{len(waiting)} waiting")
    return 0


def _proposal_line(entry: Waiting, limit: int | None = _SHOWN_CHARS) -> str:
    record = entry.record
    if record is None:
        return f"{entry.item.approval}: (no record)"
    from ops.approvals import proposal_parts
    from ops.shown_text import cut, visible

    proposal = record.proposal
    headline, detail = proposal_parts(proposal)
    # An acting tool's call (the tool and its arguments), or a held briefing (the
    # guardrail's verdict); else the agent's alert.
    if "tool" in proposal or "channels" not in proposal:
        shown = f"{record.name}: {headline} {detail}"
    else:
        channels = visible(",".join(str(c) for c in proposal.get("channels", [])))
        shown = f"{record.name} via {channels or '-'}: '{headline}' '{detail}'"
    return cut(shown, limit)


def run_decide(args: argparse.Namespace) -> int:
    from cli.errors import CommandError
    from functions.core.ports.approvals import ApprovalDecision
    from ops import approvals
    from ops.operator_identity import BadOperatorName, operator_name

    wanted = ApprovalDecision.APPROVED if args.decision == "approve" else ApprovalDecision.DENIED
    try:  # the caller's options first: refused as such, before any AWS call
        approvals.named_digest(args.proposal)
        operator_name(args.by)
    except (approvals.BadDigest, BadOperatorName) as exc:
        raise CommandError(str(exc), code=ErrorCode.BAD_OPTION) from None
    target = open_target(args)
    decided_by = operator_call(_decider, args)
    report = operator_call(
        approvals.decide_approval,
        target,
        args.delivery_id,
        wanted,
        now=int(time.time()),
        decided_by=decided_by,
        note=args.note,
        name=args.name,
        proposal=args.proposal,
    )
    if args.json:
        print_json(report.to_dict())
    failure = _refusal(report)
    if failure is not None:
        code, message = failure
        print(format_line("approvals", code, message), file=sys.stderr)
        return 1
    if not args.json:
        print(_said(report))
    return 0


def _decider(args: argparse.Namespace) -> str:
    """Who decides: a local stack's named operator, a deployed one's AWS principal."""
    from ops import operator_identity

    if args.local:
        return operator_identity.local_decider(args.by)
    return operator_identity.deployed_decider(
        lambda: operator_identity.caller_arn(args.region), args.by
    )


def _said(report: DecisionReport) -> str:
    from functions.core.approval import DecideOutcome

    decided = None if report.record is None else report.record.decided
    if report.outcome is DecideOutcome.APPLIED:
        then = "its work item is sent: a worker resumes it" if report.resumed else "it ends failed"
        return f"{report.wanted.value} {report.delivery_id} ({report.name}): {then}"
    assert decided is not None  # (UNCHANGED carries the recorded decision)
    return (
        f"{report.delivery_id} ({report.name}) was already {decided.decision.value}"
        f" {iso(decided.decided_at)} by {decided.decided_by}: nothing changed"
    )


def _refusal(report: DecisionReport) -> tuple[ErrorCode, str] | None:
    from functions.core.approval import DecideOutcome

    record = report.record
    if report.outcome is DecideOutcome.OTHER_PROPOSAL and record is not None:
        short = record.short_digest()
        if report.proposal_required:
            return ErrorCode.APPROVAL_PROPOSAL_REQUIRED, (
                f"{report.delivery_id} asked for more than one approval; the one waiting"
                f" ({report.name}) is proposal {short}: read it (approvals list --full)"
                f" and pass --proposal {short}"
            )
        return ErrorCode.APPROVAL_OTHER_PROPOSAL, (
            f"{report.delivery_id} waits for proposal {short} ({report.name}), not the one"
            f" named: read it (approvals list --full) and pass --proposal {short}"
        )
    if report.outcome is DecideOutcome.EXPIRED and record is not None:
        return ErrorCode.APPROVAL_EXPIRED, (
            f"{report.delivery_id} ({report.name}): its deadline {iso(record.deadline)} has"
            f" passed; nothing was {report.wanted.value}, nothing acts (the reconciler"
            " records it as expired)"
        )
    if report.outcome is DecideOutcome.NOT_WAITING:
        return ErrorCode.NOT_AWAITING_APPROVAL, (
            f"{report.delivery_id} waits for no approval (unknown, not parked yet, or"
            " without an approval gate); see approvals list"
        )
    if report.outcome is DecideOutcome.REFUSED and report.record is not None:
        decided = report.record.decided
        assert decided is not None  # (REFUSED carries the recorded decision)
        return ErrorCode.APPROVAL_DECIDED, (
            f"{report.delivery_id} was {decided.decision.value} {iso(decided.decided_at)}"
            f" by {decided.decided_by}: a decision is recorded once and cannot be"
            f" changed to {report.wanted.value}"
        )
    return None
