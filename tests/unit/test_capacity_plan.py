"""docs/capacity.md: the plan of infra/capacity.py, current, with the ceilings it promises."""

from __future__ import annotations

from pathlib import Path

from infra import capacity
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
    assert {"Received log partitions", "Relay (stream to queue)"} <= moved


def test_the_largest_settings_are_valid_settings() -> None:
    hosts = StackConfig(mcp_allowed_hosts=("*.relaylink.example",))
    big = capacity.largest(hosts)
    assert big.checked() == big
