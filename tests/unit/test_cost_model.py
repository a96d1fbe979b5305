"""docs/cost.md's model: what it bills to the pipeline and what to the workflow."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench import agent_spend, cost, cost_doc, peers, prices
from bench.report import Figure, Target
from bench.write_units import WORKFLOW_PHASE
from functions.core import metric_names
from functions.core.spend import ModelSpend
from infra.access_log import ACCESS_LOG_FIELDS, ACCESS_LOG_FORMAT

# Stands in for the default stack's synthesized alarm count (the synth is slow; the
# bill from the real count is checked in tests/infra/test_cost_targets.py).
ALARMS = 14

VOLUME = cost_doc.TARGET_VOLUME


def _write(function: str, record: str, table: float, index: float = 0.0) -> dict[str, Any]:
    return {
        "write": f"{function}: Put {record} (new)",
        "function": function,
        "record": record,
        "count": 1.0,
        "table_wru": table,
        "index_wru": index,
    }


def _figures(**changes: Any) -> dict[int, Figure]:
    pipeline: dict[str, Any] = {
        "calls_per_delivery": {
            "receiver": {"dynamodb.TransactWriteItems": 1.0},
            "relay": {"sqs.SendMessageBatch": 0.1},
            "worker": {
                "dynamodb.GetItem": 1.0,
                "dynamodb.PutItem": 1.0,
                "dynamodb.UpdateItem": 2.0,
                "s3.PutObject": 1.0,
            },
        },
        "workflow_calls_per_delivery": {
            "worker": {"dynamodb.GetItem": 1.0, "dynamodb.PutItem": 1.0, "s3.PutObject": 1.0}
        },
        "dynamodb_capacity_units_per_delivery": {WORKFLOW_PHASE: {"rru": 1.0}},
        "log_bytes_per_delivery": {"receiver": 450.0, "worker": 180.0},
        "items_at_rest": {
            "effect": {"count_per_delivery": 1.0, "mean_bytes": 235.0},
            "inbox": {"count_per_delivery": 1.0, "mean_bytes": 361.0},
            "outbox": {"count_per_delivery": 1.0, "mean_bytes": 223.0},
        },
        "archive_bytes_per_delivery": 500.0,
        "workflow": "archive",
        "notifications_per_delivery": 0.0,
        "mcp_request_bytes_per_delivery": 800.0,
    }
    writes = [
        _write("receiver", "inbox", 2.0, 1.0),
        _write("receiver", "outbox", 2.0),
        _write("worker", "inbox", 2.0, 1.0),
        _write("worker", "effect#archive", 1.0),
    ]
    worker = {
        "cpu_ms_per_message": {"median": 16.0},
        "batch_size": 10,
        "max_rss_mb": 100.0,
        "no_workflow": {"cpu_ms_per_message": {"median": 11.0}},
    }
    pipeline.update(changes.pop("pipeline", {}))
    worker.update(changes.pop("worker", {}))
    details: dict[int, dict[str, Any]] = {
        2: {"canned": {"handler_us": {"median": 1000.0}}},
        3: {"receiver": {"receiver_ms": {"total_ms": {"median": 350.0}}}},
        7: pipeline,
        8: worker,
        11: {"writes_per_delivery": changes.pop("writes", writes)},
    }
    return {n: Figure(n, "t", "m", [], details=d) for n, d in details.items()}


def _model(**changes: Any) -> cost.Model:
    return cost.Model(_figures(**changes), cost.stack_config(), alarms=ALARMS)


def _line(model: cost.Model, component: str) -> cost.Line:
    return next(x for x in model.lines(VOLUME) if x.component == component)


def test_the_workflows_effect_records_are_billed_apart_from_the_pipeline() -> None:
    model = _model()
    assert model.dynamodb.wru == {"receiver": 4.0 + 1.0, "worker": 3.0}
    assert model.dynamodb.effect_wru == 1.0
    assert model.dynamodb.rru == 0.0 and model.dynamodb.effect_rru == 1.0
    assert _line(model, "DynamoDB effect records (writes)").group == cost.WORKFLOW_EFFECTS
    assert _line(model, "DynamoDB effect records (reads)").group == cost.WORKFLOW_EFFECTS
    # The same unit written as a pipeline record costs the pipeline.
    as_pipeline = _model(
        writes=[*_figures()[11].details["writes_per_delivery"][:3], _write("worker", "x", 1.0)]
    )
    pipeline = model.pipeline_usd(VOLUME)
    assert as_pipeline.pipeline_usd(VOLUME) - pipeline == pytest.approx(
        VOLUME / 1e6 * prices.PRICES["ddb_wru"].usd
    )


def test_the_workflows_worker_time_is_its_cpu_and_its_calls_waits() -> None:
    model = _model()
    full, bare = model.worker_batch_ms(10), model.worker_batch_ms(10, effects=False)
    scale = model._cpu_scale("worker")
    assert full - bare == pytest.approx(
        10 * (16.0 - 11.0) * scale + cost.S3_PUT_MS.value + 2 * cost.DYNAMODB_CALL_MS.value
    )
    effects = _line(model, "Lambda worker time of the effects")
    assert effects.group == cost.WORKFLOW_EFFECTS and effects.usd_per_month > 0
    # Without a measurement of the bare worker, all its CPU time is the pipeline's.
    unsplit = _model(worker={"no_workflow": {"cpu_ms_per_message": {"median": 16.0}}})
    assert unsplit.pipeline_usd(VOLUME) > model.pipeline_usd(VOLUME)


def test_the_relay_is_billed_one_request_per_ten_records_when_it_batches() -> None:
    assert _model().relay_sends(9.6) == 1
    assert _model().relay_sends(10) == 1
    assert _model().relay_sends(11) == 2
    one_each = _model(
        pipeline={
            "calls_per_delivery": {
                **_figures()[7].details["calls_per_delivery"],
                "relay": {"sqs.SendMessage": 1.0},
            }
        }
    )
    assert one_each.relay_sends(9.6) == pytest.approx(9.6)
    assert _line(one_each, "SQS").usd_per_month > _line(_model(), "SQS").usd_per_month


def test_records_are_stored_for_their_ttl() -> None:
    model = _model()
    lag = cost.TTL_DELETION_LAG_DAYS.value
    # The outbox record (the received log) expires with its inbox item.
    assert model.lifetime_days("outbox") == model.config["inbox_retention_days"] + lag
    assert model.lifetime_days("inbox") == model.config["inbox_retention_days"] + lag
    longer = copy.copy(model)
    longer.config = {**model.config, "inbox_retention_days": 30}
    assert longer.byte_months({"outbox": 323.0}) > model.byte_months({"outbox": 323.0})
    assert longer.byte_months({"inbox": 461.0}) > model.byte_months({"inbox": 461.0})


def test_the_access_log_is_priced_from_the_deployed_format() -> None:
    expected = ACCESS_LOG_FORMAT  # what API Gateway writes, each variable filled in
    for variable in sorted(ACCESS_LOG_FIELDS.values(), key=len, reverse=True):
        expected = expected.replace(variable, cost.ACCESS_LOG_SAMPLE[variable])
    assert cost.access_log_bytes().value == len(expected.encode()) + 1
    logs = _line(_model(), "CloudWatch Logs ingestion + storage")
    assert f"access log {len(expected) + 1:,}" in logs.basis


def test_only_the_alarmed_counts_are_billed_as_metrics_and_no_dashboard_by_default() -> None:
    model = _model()
    (line,) = [x for x in model.lines(VOLUME) if x.component.startswith("CloudWatch metrics")]
    billed = metric_names.PUBLISHED_METRICS - metric_names.WORKFLOW_ONLY_METRICS
    # Seven: PackagesChanged joined for its alarm (a package that changed under a run).
    assert model.metrics == len(billed) <= 7
    assert model.dashboards == 0
    assert "0 dashboard" in line.basis


def _with_agent_spend(total: ModelSpend, deliveries: int) -> dict[int, Figure]:
    """The cost figures and figure 14 as the bench writes it from the spend records."""
    measured = agent_spend.AgentSpend(
        deliveries=deliveries, total=total, emulator_calls=total.model_calls, acknowledged=4
    )
    figures = _figures()
    figures[cost.AGENT_SPEND_FIGURE] = Figure(
        cost.AGENT_SPEND_FIGURE, "t", "m", [], details=measured.to_json()
    )
    return figures


def _model_tokens(model: cost.Model) -> cost.Line:
    (line,) = [x for x in model.lines(VOLUME) if x.group == cost.MODEL_TOKENS]
    return line


def test_the_agents_model_cost_is_priced_from_its_spend_records() -> None:
    # 4 deliveries: 6 calls that may have run (one never answered), tokens of 5.
    total = ModelSpend(model_calls=6, answered=5, input_tokens=4000, output_tokens=800)
    figures = _with_agent_spend(total, deliveries=4)
    line = _model_tokens(cost.Model(figures, cost.stack_config(), alarms=ALARMS))
    per_delivery = (
        1000 * prices.PRICES["bedrock_input"].usd + 200 * prices.PRICES["bedrock_output"].usd
    ) / 1e6
    assert line.usd_per_month == pytest.approx(VOLUME * per_delivery)
    assert "1.5 model calls and 1,200 tokens per delivery (measured)" in line.component
    assert "figure 14" in line.basis
    rows = {
        r.measure: r for r in cost_doc.targets_figure(list(figures.values()), alarms=ALARMS).rows
    }
    measured = next(v for k, v in rows.items() if "measured: figure 14" in k)
    assert measured.central == pytest.approx(round(1e6 * per_delivery, 2))
    inputs = cost_doc.render(
        list(figures.values()), {"date (UTC)": "d", "commit": "c"}, alarms=ALARMS
    )
    assert "measured: figure 14, the spend records of 4 agent deliveries" in inputs


def test_without_the_spend_figure_the_agents_model_cost_is_the_stated_assumption() -> None:
    model = _model()
    assert model.agent_spend is None
    line = _model_tokens(model)
    assumed = cost.MODEL_TOKENS_PER_DELIVERY.value / 1000 * cost.MODEL_USD_PER_1000_TOKENS.value
    assert line.usd_per_month == pytest.approx(VOLUME * assumed)
    assert "assumed: no figure 14 in this run" in line.basis
    document = cost_doc.render(
        list(_figures().values()), {"date (UTC)": "d", "commit": "c"}, alarms=ALARMS
    )
    assert "this run has no figure 14, which measures them" in document


def test_the_workers_batch_follows_the_arrivals_the_window_gathers() -> None:
    model = _model()
    rps = VOLUME / cost.SECONDS_PER_MONTH
    gather = model.batching_window_s + cost.SQS_POLL_GATHER_SECONDS.value
    assert model.worker_batch(VOLUME) == pytest.approx(
        min(10.0, rps * gather / cost.SQS_POLLERS.value)
    )
    unwindowed = cost.model_with_batching_window(model, 0)
    assert unwindowed.worker_batch(VOLUME) == pytest.approx(
        rps * cost.SQS_POLL_GATHER_SECONDS.value / cost.SQS_POLLERS.value
    )
    assert model.worker_batch(1_000_000) == 1.0  # never less than one message
    assert cost.model_with_batching_window(model, 60).worker_batch(VOLUME) == 10.0  # full
    # Smaller batches wait out an MCP answer for fewer messages: the bill grows.
    assert unwindowed.pipeline_usd(VOLUME) > model.pipeline_usd(VOLUME)
    halves = cost.model_with_worker_batch(model, 2)
    assert halves.worker_batch(VOLUME) == 2
    worker = _line(halves, "Lambda worker")
    assert f"{VOLUME / 2:,.0f} invocations" in worker.basis


def test_a_new_tables_stream_shards_share_the_relays_records() -> None:
    model = _model()
    assert model._stream_shards(1_000_000) == cost.STREAM_SHARDS_AT_START.value == 4
    rps = VOLUME / cost.SECONDS_PER_MONTH
    per_batch = rps / (cost.STREAM_POLLS_PER_SECOND * 4)
    assert f"{per_batch:.1f} records per relay batch over 4 stream shards" in (
        _line(model, "SQS").basis
    )
    relay = _line(model, "Lambda relay")
    assert f"{VOLUME / per_batch:,.0f} invocations" in relay.basis


def test_the_rotated_key_and_hourly_metrics_are_billed_as_aws_bills_them() -> None:
    model = _model()
    # The default alarm topic has no key of its own; with one, it is billed rotated.
    assert _line(model, "KMS key of the alarm topic").usd_per_month == 0
    keyed = cost.Model(_figures(), {**cost.stack_config(), "alarm_topic_key": True}, alarms=ALARMS)
    key = _line(keyed, "KMS key of the alarm topic")
    assert key.usd_per_month == pytest.approx(3 * prices.PRICES["kms_key"].usd)
    assert keyed.pipeline_usd(VOLUME) == pytest.approx(model.pipeline_usd(VOLUME) + 3.0)
    # The received log's lag every run; the other alarmed counts only on faults.
    always = len(cost.ALWAYS_PUBLISHED_METRICS)
    expected = always + (model.metrics - always) * cost.FAULT_HOURS_PER_MONTH.value / 720
    assert model.metric_months() == pytest.approx(expected)
    metrics = _line(model, "CloudWatch metrics (EMF), alarms, dashboard")
    assert metrics.usd_per_month == pytest.approx(
        expected * prices.PRICES["metric"].usd + ALARMS * prices.PRICES["alarm"].usd
    )


def test_the_default_install_is_the_pipeline_and_its_archive() -> None:
    model = _model()
    effects = sum(x.usd_per_month for x in model.lines(VOLUME) if x.group == cost.WORKFLOW_EFFECTS)
    assert model.default_install_usd(VOLUME) == pytest.approx(model.pipeline_usd(VOLUME) + effects)
    assert effects >= VOLUME / 1000 * prices.PRICES["s3_put"].usd  # a PUT per delivery
    rows = {
        r.measure: r for r in cost_doc.targets_figure(list(_figures().values()), alarms=ALARMS).rows
    }
    big = rows["default install cost per 1 M deliveries at 100 M / month"]
    small = rows["default install cost per 1 M deliveries at 1 M / month"]
    assert big.central == pytest.approx(round(model.default_install_usd(VOLUME) / 100, 2))
    assert big.target == Target("<=", 8.0)
    assert small.target == Target("<=", 12.0)


def test_the_package_kept_on_the_inbox_item_trades_the_put_for_bytes_at_rest() -> None:
    model = _model()
    kept = model.package_on_inbox_item(VOLUME)
    # 361 B item + "package" + 500 B document: still one write unit for the completion.
    assert kept.inbox_bytes_with_package == 361 + 7 + 500
    assert kept.extra_wru == 0
    assert kept.usd == pytest.approx(
        model.default_install_usd(VOLUME) - kept.saved_s3_usd + kept.added_usd
    )
    assert kept.usd < model.default_install_usd(VOLUME)
    larger = _model(pipeline={"archive_bytes_per_delivery": 1500.0})
    assert larger.package_on_inbox_item(VOLUME).extra_wru == 1
    added = larger.package_on_inbox_item(VOLUME).added_usd - kept.added_usd
    assert added > VOLUME / 1e6 * prices.PRICES["ddb_wru"].usd


def test_the_peers_are_billed_for_the_same_work_by_the_same_prices() -> None:
    model = _model()
    bills = {name: peers.peer_bill(model, name, VOLUME) for name in peers.PEERS}

    def usd(name: str, component: str) -> float:
        return sum(x.usd_per_month for x in bills[name].lines if x.component == component)

    for name, bill in bills.items():
        assert usd(name, "S3 archive PUTs") == pytest.approx(
            _line(model, "S3 archive PUTs").usd_per_month
        )
        assert bill.usd(archive=True) - bill.usd(archive=False) == pytest.approx(
            usd(name, "S3 archive PUTs") + usd(name, "S3 archive storage")
        )
        idempotency = usd(name, "DynamoDB idempotency records")
        assert idempotency >= VOLUME / 1e6 * 2 * prices.PRICES["ddb_wru"].usd
    assert usd(peers.IN_REQUEST, "SQS") == 0.0
    assert usd(peers.EVENTBRIDGE, "API Gateway HTTP API") == 0.0
    assert usd(peers.EVENTBRIDGE, "EventBridge PutEvents") == pytest.approx(
        VOLUME / 1e6 * prices.PRICES["eventbridge_events"].usd
    )
    assert usd(peers.ASYNC_SQS, "API Gateway HTTP API") == pytest.approx(
        _line(model, "API Gateway HTTP API").usd_per_month
    )


@pytest.mark.parametrize("percent", [100, 10])
def test_xray_with_tracing_on_bills_lambdas_own_traces_and_the_sampled_deliveries(
    percent: int,
) -> None:
    def xray(sampled: int) -> cost.Line:
        traced = cost.model_with_tracing(_model())
        traced.trace_sample_percent = sampled
        return _line(traced, "X-Ray")

    # Lambda's own traces do not depend on the percent; each sampled delivery is one
    # more trace at $5 per 1 M, whatever number of segments its hops send.
    added = xray(percent).usd_per_month - xray(0).usd_per_month
    assert added == pytest.approx(VOLUME * percent / 100 / 1e6 * prices.PRICES["xray"].usd)
    assert xray(0).usd_per_month > 0  # Lambda's own, sampled by its default rule
    assert f"`trace_sample_percent` {percent}" in xray(percent).basis
    assert _line(_model(), "X-Ray").usd_per_month == 0.0  # tracing off: nothing
