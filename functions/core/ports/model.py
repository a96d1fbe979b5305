"""The port of one model call for a model step."""

from __future__ import annotations

from typing import Protocol

from functions.core.model_step import ModelCall, ModelReply, PromptT_contra


class ModelCaller(Protocol[PromptT_contra]):
    """Port: makes one model call for a model step (budgeted and counted)."""

    def answer(self, prompt: PromptT_contra, call: ModelCall) -> ModelReply:
        """Call the model once on ``prompt``.

        Raises:
            NotApplied: the call certainly did not run (throttled); the worker retries.
            PermanentError: it never will (``model_rejected``, ``budget_too_small``).
            BudgetExhausted: the day's token budget is spent; the delivery waits.
            TransientError: the outcome is unknown (it may have run); retried.
        """
        ...
