"""Figure 14: what the agent workflow's model calls cost per delivery, from its spend records.

The local stack runs the shipped ``agent`` workflow against the Bedrock emulator
(which answers with token counts, :mod:`local.bedrock_emulator`); once every delivery
is finished, each one's spend record is read as ``inbox show --json`` reads it
(:func:`ops.inbox.show_progress`): every call that may have run, the tokens of those
that answered. The emulator's own count of the ``Converse`` calls it served is kept
beside it, as a check that the records miss none.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from functions.core.spend import ModelSpend
from local.stack_options import AGENT_WORKFLOW, StackOptions

# RelayLink's back-off compressed: a retry (none expected) waits milliseconds.
TIME_SCALE = 3600.0


@dataclass(frozen=True)
class AgentSpend:
    """The spend records of ``deliveries`` agent deliveries, summed; and the emulator's count."""

    deliveries: int
    total: ModelSpend
    emulator_calls: int
    acknowledged: int

    def to_json(self) -> dict[str, Any]:
        n = self.deliveries
        return {
            "deliveries": n,
            "acknowledged": self.acknowledged,
            "workflow": AGENT_WORKFLOW,
            "totals": self.total.to_dict(),
            "model_calls_per_delivery": self.total.model_calls / n,
            "input_tokens_per_delivery": self.total.input_tokens / n,
            "output_tokens_per_delivery": self.total.output_tokens / n,
            "unknown_outcome_calls_per_delivery": self.total.unknown_outcomes / n,
            "emulator_calls_per_delivery": self.emulator_calls / n,
        }


def measure(deliveries: int) -> AgentSpend:
    """Send ``deliveries`` new deliveries through a local stack running the agent
    workflow, wait until each is finished, and sum their spend records."""
    # The whole local stack, imported only to measure: the cost model reads AgentSpend.
    from bench.local_figures import _deliveries, _wait_done  # noqa: PLC0415
    from local.sender import SenderConfig, send_all  # noqa: PLC0415
    from local.stack import LocalStack  # noqa: PLC0415
    from ops.inbox import show_progress  # noqa: PLC0415
    from ops.target import Target  # noqa: PLC0415

    rng = random.Random(14)  # reproducible package ids
    run_dir = Path(tempfile.mkdtemp(prefix="relaylink-bench-agent-"))
    options = StackOptions(workflow=AGENT_WORKFLOW, log_level="WARNING", run_dir=str(run_dir))
    with LocalStack(options) as stack:
        state = stack.state
        sent = _deliveries(stack, deliveries, rng)
        config = SenderConfig(
            url=state.webhook_url,
            secrets=tuple(state.signing_secrets),
            concurrency=4,
            time_scale=TIME_SCALE,
            seed=14,
        )
        summary = send_all(config, sent)
        _wait_done(stack, sent)
        target = Target.from_local(state)
        spends = [show_progress(target, d.delivery_id).spend for d in sent]
        called = stack.model_calls()
        emulator_calls = sum(called.get(d.delivery_id, 0) for d in sent)
    return AgentSpend(
        deliveries=deliveries,
        total=ModelSpend(
            model_calls=sum(s.model_calls for s in spends),
            answered=sum(s.answered for s in spends),
            input_tokens=sum(s.input_tokens for s in spends),
            output_tokens=sum(s.output_tokens for s in spends),
        ),
        emulator_calls=emulator_calls,
        acknowledged=summary.acknowledged,
    )
