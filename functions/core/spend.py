"""What a delivery's model calls cost: every call that may have run, counted once.

The recorded answer of a model step says what the *recorded* call used; it says
nothing of the calls before it: a rerun after a worker died inside the call, a call
whose answer was lost (a 5xx, a timeout after sending), a run whose result came too
late to be recorded. Each of those may have run the model, and each is paid for.
So every call writes to its delivery's spend record:

* before it is sent, its call id (:meth:`SpendStore.sent`): a worker killed during
  the call has already counted it;
* when the service answers that it did not run it (throttled, rejected), its id
  again (:meth:`SpendStore.not_run`): it is no longer counted;
* when it answers, the tokens it reports (:meth:`SpendStore.answered`).

Each write is keyed by the call id, so a write sent twice (an SDK retry after an
answer that was lost) counts once. A call sent but neither answered nor refused has
an *unknown* outcome: counted as a call, its tokens not known (the token budget keeps
it at its estimate).

A screening guardrail's ``ApplyGuardrail`` calls are paid too and counted the same
way, apart from the model's (:meth:`SpendStore.guardrail_sent`,
:meth:`SpendStore.guardrail_answered`): each with the text units it is billed for
(:func:`guardrail_text_units`) and the tokens it is charged to the day's budget and
the delivery's cap (:func:`guardrail_tokens`: the tokens of its text, estimated as a
prompt's are, so one budget in one unit bounds all the text a delivery pays for).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Final

# What ApplyGuardrail bills by: a text unit holds up to 1,000 characters, per policy.
GUARDRAIL_TEXT_UNIT_CHARS: Final = 1000
# As the model client estimates a prompt's tokens (its CHARS_PER_TOKEN_ESTIMATE).
GUARDRAIL_CHARS_PER_TOKEN: Final = 3


@dataclass(frozen=True, slots=True)
class ModelSpend:
    """A delivery's model calls so far.

    Attributes:
        model_calls: calls that may have run (sent and not refused by the service).
        answered: calls that answered (their tokens are counted below).
        input_tokens: the answered calls' prompt tokens.
        output_tokens: the answered calls' answer tokens.
    """

    model_calls: int = 0
    answered: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    guardrail_calls: int = 0
    guardrail_answered: int = 0
    guardrail_text_units: int = 0
    guardrail_tokens: int = 0

    @property
    def unknown_outcomes(self) -> int:
        """Calls that may have run but never answered (killed, lost, failed after sending)."""
        return max(0, self.model_calls - self.answered)

    @property
    def tokens(self) -> int:
        """The tokens the delivery's answered calls used: the model's, and the guardrail's
        texts (what its token cap counts)."""
        return self.input_tokens + self.output_tokens + self.guardrail_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "model_calls": self.model_calls,
            "answered_calls": self.answered,
            "unknown_outcome_calls": self.unknown_outcomes,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "guardrail_calls": self.guardrail_calls,
            "guardrail_text_units": self.guardrail_text_units,
            "guardrail_tokens": self.guardrail_tokens,
        }


def new_call_id() -> str:
    """A fresh id for one model call (unique, not secret)."""
    return secrets.token_hex(8)


def guardrail_text_units(text: str) -> int:
    """The text units one ApplyGuardrail call on ``text`` is billed for (per policy)."""
    return max(1, math.ceil(len(text) / GUARDRAIL_TEXT_UNIT_CHARS))


def guardrail_tokens(text: str) -> int:
    """What one ApplyGuardrail call on ``text`` is charged to the token budget and cap."""
    return max(1, math.ceil(len(text) / GUARDRAIL_CHARS_PER_TOKEN))
