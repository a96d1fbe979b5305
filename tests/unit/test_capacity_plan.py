"""docs/capacity.md: the plan of infra/capacity.py, current, with the ceilings it promises."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from infra import capacity, capacity_model, capacity_quotas
from infra.capacity_model import LAG, SENDER, WORK
from infra.config import StackConfig

ROOT = Path(__file__).resolve().parents[2]


def test_docs_capacity_is_the_plan_the_code_renders() -> None:
    # Regenerate with `python -m bench --render-only` (or `make bench`).
    assert (ROOT / "docs" / "capacity.md").read_text(encoding="utf-8") == capacity.render()


def test_the_defaults_accept_at_least_a_thousand_receipts_a_second() -> None:
    top = capacity.ceiling(StackConfig(), capacity.Quotas())
    assert top.per_second >= 1_000
    assert top.bounds == capacity.ACCEPTED


def test_the_largest_settings_accept_at_least_ten_thousand_receipts_a_second() -> None:
    top = capacity.ceiling(capacity.largest(), capacity.RAISED)
    assert top.per_second >= 10_000


def test_every_limit_names_its_arithmetic_an_alarm_and_what_to_raise() -> None:
    for limit in capacity.limits(StackConfig(), capacity.Quotas()):
        assert limit.arithmetic and limit.alarm and limit.raise_it
        assert limit.bounds in (capacity.ACCEPTED, capacity.KEPT_UP)


def test_the_plan_follows_the_settings_it_names() -> None:
    more = capacity.limits(
        StackConfig(received_log_shards=32, relay_parallelization_factor=4),
        capacity.Quotas(),
    )
    fewer = capacity.limits(StackConfig(), capacity.Quotas())
    by_name = {x.component: x.per_second for x in fewer}
    moved = {x.component for x in more if x.per_second != by_name[x.component]}
    assert {"Received log partitions", "Relay (stream to queue)", "Completed listing keys"} <= (
        moved
    )


def test_the_receiver_is_held_to_ten_requests_per_environment() -> None:
    (receiver,) = [
        x for x in capacity.limits(StackConfig(), capacity.Quotas()) if "Receiver" in x.component
    ]
    assert receiver.per_second <= capacity_quotas.LAMBDA_ACCOUNT_CONCURRENCY * 10


def test_more_reconciler_passes_at_once_read_more() -> None:
    one, four = (
        {
            x.component: x.per_second
            for x in capacity.limits(StackConfig(reconcile_parallelism=n), capacity.Quotas())
        }
        for n in (1, 4)
    )
    name = "Reconciler, received log kept current"
    assert four[name] == 4 * one[name]


def grows(queues: list[capacity_model.Queue]) -> set[str]:
    return {queue.name for queue in queues if queue.grows}


def test_at_ten_thousand_a_second_every_queue_stays_bounded_with_the_raised_quotas() -> None:
    queues = capacity_model.run(capacity.largest(), capacity_model.RAISED)
    assert grows(queues) == set()
    assert {queue.name for queue in queues} == {SENDER, capacity_model.STREAM, WORK, LAG}
    # It did carry the load: the work queue is no deeper at the end than a second's
    # receipts in transit.
    (work,) = [queue for queue in queues if queue.name == WORK]
    assert 0 < work.end <= 10_000


def test_taking_back_each_raised_quota_makes_the_queue_it_names_grow() -> None:
    big, raised = capacity.largest(), capacity_model.RAISED
    for limits in (
        dataclasses.replace(raised, lambda_concurrency=capacity_quotas.LAMBDA_ACCOUNT_CONCURRENCY),
        dataclasses.replace(raised, table_write_units=capacity_quotas.TABLE_WRITE_UNITS),
    ):
        assert SENDER in grows(capacity_model.run(big, limits)), limits


def test_one_reconciler_pass_at_a_time_lets_the_watermark_fall_behind() -> None:
    one = dataclasses.replace(capacity.largest(), reconcile_parallelism=1)
    assert grows(capacity_model.run(one, capacity_model.RAISED)) == {LAG}


def test_the_completed_listing_does_not_cap_below_the_worker() -> None:
    rows = {x.component: x.per_second for x in capacity.limits(capacity.largest(), capacity.RAISED)}
    worker = rows["Worker (processing; protects the MCP server)"]
    assert rows["Completed listing keys"] >= worker >= 10_000


def test_a_300_ms_mcp_answer_is_more_than_one_event_source_can_work_off() -> None:
    queues = capacity_model.run(
        capacity.largest(),
        capacity_model.RAISED,
        worker_seconds=capacity_quotas.WORKER_SECONDS_PER_MESSAGE_MCP_300MS,
    )
    assert grows(queues) == {WORK}


def test_the_largest_settings_are_valid_settings() -> None:
    hosts = StackConfig(mcp_allowed_hosts=("*.relaylink.example",))
    big = capacity.largest(hosts)
    assert big.checked() == big
