"""The port of the per-delivery model spend records (the table in production)."""

from __future__ import annotations

from typing import Protocol

from functions.core.spend import ModelSpend


class SpendStore(Protocol):
    """Port: the per-delivery spend records (the table in production)."""

    def sent(self, delivery_id: str, call_id: str, *, expires_at: int) -> None:
        """Count call ``call_id`` as one that may have run (once, however often sent)."""
        ...

    def not_run(self, delivery_id: str, call_id: str) -> None:
        """The service refused call ``call_id`` before running it: it is not counted."""
        ...

    def answered(
        self, delivery_id: str, call_id: str, *, input_tokens: int, output_tokens: int
    ) -> None:
        """Add the answered call's tokens, once per ``call_id``."""
        ...

    def guardrail_sent(self, delivery_id: str, call_id: str, *, expires_at: int) -> None:
        """Count guardrail call ``call_id`` as one that may have run (once); ``not_run``
        withdraws it as it does a model call."""
        ...

    def guardrail_answered(
        self, delivery_id: str, call_id: str, *, text_units: int, tokens: int
    ) -> None:
        """Add the answered guardrail call's text units and tokens, once per ``call_id``."""
        ...

    def get(self, delivery_id: str) -> ModelSpend | None:
        """The delivery's spend; None when no paid call was ever sent for it."""
        ...
