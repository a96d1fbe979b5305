"""What a failed MCP exchange means, in the receiver's error vocabulary.

Error codes are stored as ``last_error``: fixed strings, never the URL, the token or the
response text.
"""

from __future__ import annotations

from typing import Final

from mcp.shared.exceptions import MCPError
from mcp_types import REQUEST_TIMEOUT
from pydantic import ValidationError

from functions.core.adapters.mcp_transport import Exchange
from functions.core.errors import (
    HostNotAllowed,
    InvalidPackage,
    McpAuthError,
    PermanentError,
    ProcessingError,
    TransientError,
)

CODE_UNAVAILABLE: Final = "mcp_unavailable"  # 5xx, connection refused or reset
CODE_TIMEOUT: Final = "mcp_timeout"
CODE_THROTTLED: Final = "mcp_throttled"  # HTTP 429
CODE_HTTP_ERROR: Final = "mcp_http_error"  # another 4xx (wrong path, session lost, ...)
CODE_PROTOCOL: Final = "mcp_protocol_error"  # a JSON-RPC error for our request
CODE_TOOL_ERROR: Final = "mcp_tool_error"  # a tool error other than "not found"
CODE_TOO_LARGE: Final = "mcp_result_too_large"
CODE_RESULT_INVALID: Final = "mcp_result_invalid"
CODE_PACKAGE_MISMATCH: Final = "mcp_package_mismatch"
CODE_REDIRECTED: Final = "mcp_origin_changed"
CODE_REDIRECT_ANSWERED: Final = "mcp_redirected"  # a 3xx, never followed


def translate(exc: BaseException | None, exchange: Exchange) -> ProcessingError:  # noqa: PLR0911 (one ordered list of rules)
    """Map a failed exchange to our vocabulary; what the transport saw comes first.

    The SDK reports every HTTP error status as one JSON-RPC error, so the status the
    transport recorded decides between auth, throttling and unavailability.
    """
    status = exchange.status
    if exchange.refused:
        return HostNotAllowed(CODE_REDIRECTED)
    if exchange.oversized:
        return InvalidPackage(CODE_TOO_LARGE)
    if exchange.redirected:
        # The server sends us elsewhere for this URL: asking again gets the same answer.
        return PermanentError(CODE_REDIRECT_ANSWERED)
    if status in (401, 403):
        return McpAuthError()
    if status == 429:
        return TransientError(CODE_THROTTLED)
    if status is not None and status >= 500:
        return TransientError(CODE_UNAVAILABLE)
    if (
        exchange.failure == "timeout"
        or isinstance(exc, TimeoutError)
        or (isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT)
    ):
        return TransientError(CODE_TIMEOUT)
    if exchange.failure == "connect":
        return TransientError(CODE_UNAVAILABLE)
    if status is not None and status >= 400:
        return TransientError(CODE_HTTP_ERROR)
    if isinstance(exc, ValidationError | RuntimeError):
        # pydantic: the result does not fit the protocol's shape. RuntimeError: the SDK
        # found structured content that fails the tool's declared output schema.
        return InvalidPackage(CODE_RESULT_INVALID)
    if isinstance(exc, MCPError):
        return TransientError(CODE_PROTOCOL)
    return TransientError(CODE_UNAVAILABLE)


def is_transport_failure(error: ProcessingError, exchange: Exchange) -> bool:
    """Whether ``error`` (from :func:`translate`) means the server could not be reached or
    did not answer in time: refused, reset, TLS failure or timeout.

    Another request to that server would most likely wait or fail the same way, so the
    worker does not contact it again in the same batch. An HTTP status (5xx, 429, 401)
    is an answer: the server is there.
    """
    answered = exchange.status is not None and exchange.status >= 500
    return error.code == CODE_TIMEOUT or (
        error.code == CODE_UNAVAILABLE and exchange.failure == "connect" and not answered
    )
