"""A cap on one delivery's tokens: a paid call that would pass it is never made.

The day's token budget bounds all deliveries together; one delivery (a briefing of
20,000 escaped characters, a tool loop that keeps the model busy) could still spend a
large share of it. With the setting ``delivery_token_cap`` (0: none), every paid call
of a delivery, a model call or a screening guardrail's, first reads the delivery's
spend record (:mod:`functions.core.spend`): when the tokens its answered calls used
plus the call's own estimate would pass the cap, the delivery fails
``delivery_token_cap`` (permanent, its log line naming the setting) before the call.

Calls of unknown outcome (a worker killed during one, an answer lost) report no
tokens, so the cap cannot count them; the worker's attempts bound those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from functions.core.errors import PermanentError
from functions.core.observability import logger
from functions.core.spend import ModelSpend

if TYPE_CHECKING:
    from functions.core.ports.spend import SpendStore

SETTING_DELIVERY_TOKEN_CAP: Final = "delivery_token_cap"  # noqa: S105 (a setting's name)
DELIVERY_TOKEN_CAP: Final = "delivery_token_cap"  # noqa: S105 (the error code)
MAX_DELIVERY_TOKEN_CAP: Final = 10**12


def require_within_cap(
    spend: SpendStore | None, *, delivery_id: str, tokens: int, cap: int, call: str
) -> None:
    """Let a paid call of about ``tokens`` tokens go ahead, or fail the delivery first.

    ``cap`` 0 (or no spend record) is no cap.

    Raises:
        PermanentError: ``delivery_token_cap``: the call would pass the cap.
        TransientError: the spend record could not be read (retried: nothing was sent).
    """
    if cap <= 0 or spend is None:
        return
    used = (spend.get(delivery_id) or ModelSpend()).tokens
    if used + tokens <= cap:
        return
    logger.error(
        f"the delivery's next {call} would pass its token cap: it fails before the call;"
        f" raise {SETTING_DELIVERY_TOKEN_CAP} if it needs more, then requeue",
        extra={
            "delivery_id": delivery_id,
            "setting": SETTING_DELIVERY_TOKEN_CAP,
            SETTING_DELIVERY_TOKEN_CAP: cap,
            "used_tokens": used,
            "call_tokens": tokens,
        },
    )
    raise PermanentError(DELIVERY_TOKEN_CAP)
