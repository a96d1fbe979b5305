"""The per-delivery spend record on moto: idempotent per call id, shown by ``inbox show``.

Writes are resent here as an SDK retry (or a worker's own) resends them after an
answer that was lost: the first write committed, so the second must change nothing.
"""

from __future__ import annotations

import json

import pytest

from functions.core.adapters.dynamodb_spend import DynamoDbSpend
from functions.core.models import State
from functions.core.spend import ModelSpend
from tests.operator_harness import Stack, run_cli


def _spend(stack: Stack) -> DynamoDbSpend:
    return DynamoDbSpend(client=stack.target.dynamodb, table_name=stack.target.table_name)


def test_spend_writes_resent_after_a_lost_answer_count_once(stack: Stack) -> None:
    spend = _spend(stack)
    delivery_id = stack.accept()
    assert spend.get(delivery_id) is None
    for _ in range(2):  # each write committed twice: the second is the resend
        spend.sent(delivery_id, "call-1", expires_at=2_000_000_000)
        spend.answered(delivery_id, "call-1", input_tokens=900, output_tokens=40)
        spend.sent(delivery_id, "call-2", expires_at=2_000_000_000)  # lost, never answered
        spend.sent(delivery_id, "call-3", expires_at=2_000_000_000)
        spend.not_run(delivery_id, "call-3")  # throttled: never ran
    assert spend.get(delivery_id) == ModelSpend(
        model_calls=2, answered=1, input_tokens=900, output_tokens=40
    )


def test_guardrail_calls_count_apart_once_per_call_id_and_inbox_show_gives_them(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    spend = _spend(stack)
    delivery_id = stack.accept()
    for _ in range(2):  # each write resent after a lost answer: counted once
        spend.sent(delivery_id, "model-1", expires_at=0)
        spend.answered(delivery_id, "model-1", input_tokens=900, output_tokens=40)
        spend.guardrail_sent(delivery_id, "screen-1", expires_at=0)
        spend.guardrail_answered(delivery_id, "screen-1", text_units=3, tokens=700)
        spend.guardrail_sent(delivery_id, "screen-2", expires_at=0)
        spend.not_run(delivery_id, "screen-2")  # throttled: never ran, never billed
    recorded = spend.get(delivery_id)
    assert recorded == ModelSpend(
        model_calls=1,
        answered=1,
        input_tokens=900,
        output_tokens=40,
        guardrail_calls=1,
        guardrail_answered=1,
        guardrail_text_units=3,
        guardrail_tokens=700,
    )
    assert recorded.tokens == 1640
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert status == 0
    shown = [line.split(None, 2) for line in out.splitlines() if line.startswith("guardrail")]
    assert shown == [["guardrail", "calls", "1 (3 text units, 700 tokens)"]]


def test_spend_record_shares_the_delivery_partition_and_retention(stack: Stack) -> None:
    delivery_id = stack.accept()
    _spend(stack).sent(delivery_id, "call-1", expires_at=2_000_000_000)
    (item,) = stack.target.delivery_records(delivery_id, "spend#")
    assert item["pk"] == {"S": delivery_id}
    assert item["expires_at"] == {"N": "2000000000"}
    assert "state_shard" not in item  # never listed: it needs no one's attention


def test_inbox_show_gives_model_calls_and_tokens(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    stack.finish(delivery_id, State.COMPLETED)
    spend = _spend(stack)
    spend.sent(delivery_id, "killed", expires_at=0)
    spend.sent(delivery_id, "answered", expires_at=0)
    spend.answered(delivery_id, "answered", input_tokens=812, output_tokens=57)
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id, "--json"))
    assert status == 0
    shown = json.loads(out)
    assert {k: shown[k] for k in ModelSpend().to_dict()} == {
        "model_calls": 2,
        "answered_calls": 1,
        "unknown_outcome_calls": 1,
        "input_tokens": 812,
        "output_tokens": 57,
        "guardrail_calls": 0,
        "guardrail_text_units": 0,
        "guardrail_tokens": 0,
    }
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert status == 0
    lines = dict(
        line.split(None, 1) for line in out.replace("model calls", "model_calls").splitlines()
    )
    assert lines["model_calls"] == (
        "2 (1 answered, 1 of unknown outcome: killed or answer lost), tokens 812 in / 57 out"
    )


def test_inbox_show_of_a_delivery_without_model_calls_says_zero(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery_id = stack.accept()
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id, "--json"))
    assert status == 0
    shown = json.loads(out)
    assert (shown["model_calls"], shown["input_tokens"], shown["output_tokens"]) == (0, 0, 0)
    status, out, _ = run_cli(capsys, stack.cli("inbox", "show", delivery_id))
    assert status == 0
    assert "model calls" not in out
