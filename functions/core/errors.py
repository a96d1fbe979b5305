"""The processing side's error vocabulary: each class says what to do next.

Adapters translate only the provider errors they know into these and
``raise ... from exc``; the worker maps each class to one action.
Every ``code`` is a short, fixed, secret-free string: it is stored as the inbox
item's ``last_error`` and may be shown to operators.
"""

from __future__ import annotations


class ProcessingError(Exception):
    """Base class: ``code`` is what gets recorded, never a message with input in it."""

    code: str = "processing_error"

    def __init__(self, code: str | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(self.code)


class TransientError(ProcessingError):
    """Retry later from our own queue (5xx, connection, timeout, throttling)."""

    code = "transient"


class StorageUnavailable(TransientError):
    """DynamoDB or SQS throttled or failed; nothing was half-written."""

    code = "storage_unavailable"


class McpAuthError(TransientError):
    """The MCP server refused our token: an operator fixes it, so keep retrying."""

    code = "mcp_auth_failed"


class NotApplied(TransientError):
    """An effect function knows its effect certainly did not happen.

    Raise it only when the answer proves that nothing was done: the connection never
    opened, or the protocol says "not processed" (a 429, an AWS throttling error);
    a timeout after sending, a 5xx, a 408 or a connection lost mid-request is not that.
    The effect ledger then clears the effect's intent, so the next attempt applies it
    as new instead of finding it uncertain; the attempt is retried with back-off.
    ``code`` says why, e.g. ``notify_unavailable``.
    """

    code = "not_applied"


class BudgetExhausted(TransientError):
    """Today's token budget is spent: wait for the next day (or a higher limit).

    Attributes:
        retry_at: epoch seconds of the next UTC midnight, when a new day's budget opens;
            a worker delays the delivery until then instead of spending its attempts.
    """

    code = "budget_exhausted"

    def __init__(self, retry_at: int, code: str | None = None) -> None:
        super().__init__(code)
        self.retry_at = retry_at


class PermanentError(ProcessingError):
    """Give up now: mark the delivery failed, no retry."""

    code = "permanent"


class BudgetTooSmall(PermanentError):
    """One call needs more tokens than the day's whole token budget: no day can afford it.

    Waiting would not help (every day opens with the same limit), so the delivery fails
    at once. The fix is a higher limit (``budget set``, or the workflow's own budget
    setting) or a smaller call, then a requeue.

    Attributes:
        tokens: what the call would reserve.
        limit: the day's limit it exceeds.
    """

    code = "budget_too_small"

    def __init__(self, *, tokens: int, limit: int) -> None:
        super().__init__()
        self.tokens = tokens
        self.limit = limit


class Rejected(PermanentError):
    """The far side refused an effect for good: certainly not applied, and never will be.

    A definite rejection (a 400, 401, 403, 404 or 422 from an HTTP endpoint, an AWS
    validation or access error): the effect ledger clears the effect's intent, so it is
    not left in doubt, and the delivery fails now with ``code`` (``WorkFailed``) instead
    of being retried until its horizon. Once the cause is fixed (the URL, a grant), an
    operator's requeue applies the effect as new. ``code`` says which, e.g.
    ``notify_rejected``.
    """

    code = "rejected"


class HostNotAllowed(PermanentError):
    """``mcp_url`` is not on the allowlist, or its scheme is not allowed."""

    code = "mcp_host_not_allowed"


class PackageNotFound(PermanentError):
    """The MCP server says the package does not exist (it never will)."""

    code = "package_not_found"


class InvalidPackage(PermanentError):
    """The MCP result is not a valid package (wrong shape or over the size cap)."""

    code = "invalid_package"


class PackageChanged(PermanentError):
    """A refetched package is not the one the delivery recorded (its content was gone).

    What a person approved and what the model read is the recorded package: nothing
    runs on another one. The delivery fails; its package record keeps both digests.
    """

    code = "package_changed"


class UncertainEffect(ProcessingError):
    """An effect's intent exists without its outcome and it cannot be checked or repeated.

    The delivery waits for the reconciler (or an operator); retrying blindly could
    repeat a non-repeatable effect.
    """

    code = "uncertain_effect"


class SigningSecretsUnavailable(TransientError):
    """The signing secrets could not be fetched or are malformed; the sender retries."""

    code = "signing_secrets_unavailable"


class McpTokenUnavailable(TransientError):
    """The MCP token could not be read from Secrets Manager, or it is malformed."""

    code = "mcp_token_unavailable"
