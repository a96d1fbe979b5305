"""What a Bedrock Runtime answer proves, for every call the workflows make to it.

A call's failure becomes one outcome (docs/reliability.md, "The outcome contract"),
named after what was called (``model``, ``guardrail``):

* throttled (``ThrottlingException``, ``ModelNotReadyException``,
  ``ServiceQuotaExceededException``), or never connected: **not applied**,
  :class:`~functions.core.errors.NotApplied` ``<subject>_throttled`` /
  ``<subject>_unavailable``;
* a request that can never succeed (``ValidationException``,
  ``AccessDeniedException``, ``ResourceNotFoundException``): **never**,
  :class:`~functions.core.errors.PermanentError` ``<subject>_rejected``;
* anything else (a 5xx, a timeout, another error code, the connection lost once the
  request was sent): **unknown**, :class:`~functions.core.errors.TransientError`
  ``<subject>_unavailable``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from functions.core.errors import NotApplied, PermanentError, TransientError

T = TypeVar("T")

THROTTLED: Final = frozenset(
    {"ThrottlingException", "ModelNotReadyException", "ServiceQuotaExceededException"}
)
REJECTED: Final = frozenset(
    {"ValidationException", "AccessDeniedException", "ResourceNotFoundException"}
)


def bedrock_call(call: Callable[[], T], *, subject: str) -> T:
    """``call()``, its failure raised as the outcome it proves (see the module docstring)."""
    try:
        return call()
    except ClientError as exc:
        raise translated(exc, subject=subject) from exc
    except (EndpointConnectionError, ConnectTimeoutError) as exc:
        raise NotApplied(f"{subject}_unavailable") from exc  # never connected
    except BotoCoreError as exc:
        raise TransientError(f"{subject}_unavailable") from exc


def translated(exc: ClientError, *, subject: str) -> Exception:
    """The outcome an AWS error answer proves."""
    code = exc.response.get("Error", {}).get("Code", "")
    if code in THROTTLED:
        return NotApplied(f"{subject}_throttled")
    if code in REJECTED:
        return PermanentError(f"{subject}_rejected")
    return TransientError(f"{subject}_unavailable")
