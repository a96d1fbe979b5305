"""The errors every ``relaylink-receiver`` command raises, and the one formatter of the
lines the CLI prints about them (local and operator commands alike)."""

from __future__ import annotations

from enum import StrEnum

PROG = "relaylink-receiver"


class ErrorCode(StrEnum):
    """The short codes the CLI's error and warning lines start with."""

    USAGE = "usage"  # a missing or contradictory option, argparse's own errors
    BAD_OPTION = "bad_option"  # an option's value out of range or malformed
    STATE_FILE = "state_file"  # a directory, an unreadable or a foreign state file
    STATE_FILE_IN_USE = "state_file_in_use"  # local: a live stack holds that state file
    STACK_UNREACHABLE = "stack_unreachable"  # the local stack is stopped
    PORT_IN_USE = "port_in_use"
    START_FAILED = "start_failed"
    WORKFLOW_INVALID = "workflow_invalid"  # local: the worker cannot load or build it
    MODEL_SCRIPT_INVALID = "model_script_invalid"  # local, chaos: --model-script's file
    RECEIVER_UNREACHABLE = "receiver_unreachable"  # send: nothing answers at the URL
    ATTEMPT_REFUSED = "attempt_refused"  # send: the receiver answered, not with a 2xx
    WAIT_DEADLINE = "wait_deadline"  # send --wait: deliveries not final in time
    AWAITING_APPROVAL = "awaiting_approval"  # send --wait: deliveries wait for a person
    INTERRUPTED = "interrupted"  # send: Ctrl-C, with what was sent so far
    UNKNOWN_DELIVERY = "unknown_delivery"  # inbox show: no such delivery id
    NO_TRACE = "no_trace"  # inbox show --trace: the delivery was received untraced
    AWS_REGION = "aws_region"
    AWS_CREDENTIALS = "aws_credentials"
    AWS_UNAVAILABLE = "aws_unavailable"  # throttling, or the endpoint unreachable
    AWS_ERROR = "aws_error"  # what AWS refused: a missing stack, table, permission
    MISSING_EXTRA = "missing_extra"  # an optional extra's package is not installed
    NOT_AWAITING_APPROVAL = "not_awaiting_approval"  # approvals: nothing waits for a decision
    APPROVAL_DECIDED = "approval_decided"  # approvals: the other decision is recorded
    APPROVAL_EXPIRED = "approval_expired"  # approvals: decided at or after the deadline
    APPROVAL_OTHER_PROPOSAL = "approval_other_proposal"  # approvals: another one waits
    # approvals: approve names no proposal where more than one was asked for
    APPROVAL_PROPOSAL_REQUIRED = "approval_proposal_required"


class CommandError(Exception):
    """A failure the user can act on: printed as one line, exit status 2."""

    def __init__(self, message: str, *, code: ErrorCode = ErrorCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


def format_line(command: str | None, code: ErrorCode, message: str, *, level: str = "error") -> str:
    """The one shape of every error and warning line the CLI prints.

    ``relaylink-receiver inbox: error: stack_unreachable: no local stack answers ...``:
    argparse's ``prog: error:`` prefix, then a code a script can match on.
    """
    prog = f"{PROG} {command}" if command else PROG
    one_line = " ".join(message.split())
    return f"{prog}: {level}: {code.value}: {one_line}"
