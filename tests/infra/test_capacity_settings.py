"""The capacity settings reach what they size: the received log's shard count every
function that writes or reads the log, the relay's parallelization its stream mapping;
and the capacity plan (docs/capacity.md) reads the very numbers the stack synthesizes."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Annotations, Match

from functions.core import env_names, event_source_limits
from functions.receiver.settings import Settings as ReceiverSettings
from functions.reconciler.settings import Settings as ReconcilerSettings
from infra import capacity, capacity_model
from tests.infra.conftest import Synthesized, get_att, resolved, synthesize

FUNCTIONS = ("receiver", "relay", "worker", "reconciler")
# The functions that write (receiver) or read (reconciler) the received log, and the
# worker, whose completions spread over as many keys of the completed listing.
LOG_USERS = {"receiver", "worker", "reconciler"}


# The settings the capacity plan's 10,000 receipts/s depends on, at their largest.
BIG = capacity.largest()
PLAN_SETTINGS = (
    "api_rate_limit",
    "api_burst_limit",
    "received_log_shards",
    "relay_parallelization_factor",
    "worker_max_concurrency",
    "worker_batch_size",
    "reconcile_every_minutes",
    "reconcile_parallelism",
)


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    overrides = {key: str(getattr(BIG, key)) for key in PLAN_SETTINGS}
    return synthesize(tmp_path_factory, {**overrides, "table_warm_write_units": "12000"})


def test_the_shard_setting_reaches_every_function_that_uses_the_received_log(
    scaled: Synthesized,
) -> None:
    told = {
        name: scaled.environment(name).get(env_names.ENV_RECEIVED_LOG_SHARDS) for name in FUNCTIONS
    }
    assert {name for name, value in told.items() if value is not None} == LOG_USERS
    assert (
        ReceiverSettings.from_env(resolved(scaled.environment("receiver"))).received_log_shards
        == BIG.received_log_shards
    )
    reconciler = ReconcilerSettings.from_env(resolved(scaled.environment("reconciler")))
    assert reconciler.received_log_shards == BIG.received_log_shards
    assert reconciler.parallelism == BIG.reconcile_parallelism


def test_the_synth_says_the_shard_setting_only_rises(scaled: Synthesized) -> None:
    notes = Annotations.from_stack(scaled.stack).find_info(
        "*",
        Match.string_like_regexp(
            f"received_log_shards={BIG.received_log_shards}: .*only ever rises"
        ),
    )
    assert len(notes) == 1


def test_the_relay_parallelization_is_a_setting(scaled: Synthesized) -> None:
    (table,) = scaled.of_type("AWS::DynamoDB::Table")
    (mapping,) = [
        m["Properties"]
        for m in scaled.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == get_att(table, "StreamArn")
    ]
    assert mapping["ParallelizationFactor"] == BIG.relay_parallelization_factor


def test_the_table_can_be_warmed_for_a_launch(scaled: Synthesized) -> None:
    (table,) = scaled.of_type("AWS::DynamoDB::Table").values()
    assert table["Properties"]["WarmThroughput"] == {"WriteUnitsPerSecond": 12000}


def test_a_bare_synth_leaves_the_table_to_dynamodbs_own_warmth(
    synthesized: Synthesized,
) -> None:
    (table,) = synthesized.of_type("AWS::DynamoDB::Table").values()
    assert "WarmThroughput" not in table["Properties"]


def test_the_capacity_plan_reads_the_numbers_the_stack_synthesizes(scaled: Synthesized) -> None:
    mappings = {
        m["Properties"]["FunctionName"]["Ref"]: m["Properties"]
        for m in scaled.of_type("AWS::Lambda::EventSourceMapping").values()
    }
    worker = mappings[scaled.function_logical_id("worker")]
    relay = mappings[scaled.function_logical_id("relay")]
    assert worker["ScalingConfig"]["MaximumConcurrency"] == BIG.worker_max_concurrency
    assert worker["BatchSize"] == BIG.worker_batch_size
    assert relay["ParallelizationFactor"] == BIG.relay_parallelization_factor
    assert relay["BatchSize"] == event_source_limits.RELAY_BATCH_SIZE
    (stage,) = scaled.of_type("AWS::ApiGatewayV2::Stage").values()
    throttle = stage["Properties"]["DefaultRouteSettings"]
    assert (throttle["ThrottlingRateLimit"], throttle["ThrottlingBurstLimit"]) == (
        BIG.api_rate_limit,
        BIG.api_burst_limit,
    )
    (rule,) = [
        r["Properties"]
        for r in scaled.of_type("AWS::Events::Rule").values()
        if r["Properties"]["Targets"][0]["Arn"]
        == get_att(scaled.function_logical_id("reconciler"), "Arn")
    ]
    assert rule["ScheduleExpression"] == f"rate({BIG.reconcile_every_minutes} minute)"
    told = {
        name: resolved(scaled.environment(name)) for name in ("receiver", "worker", "reconciler")
    }
    assert {env[env_names.ENV_RECEIVED_LOG_SHARDS] for env in told.values()} == {
        str(BIG.received_log_shards)
    }
    assert told["reconciler"][env_names.ENV_RECONCILE_PARALLELISM] == str(BIG.reconcile_parallelism)
    # No function reserves concurrency: the plan's receiver takes what the others leave.
    for function in scaled.of_type("AWS::Lambda::Function").values():
        assert "ReservedConcurrentExecutions" not in function["Properties"]
    # And the plan's figures come from these very settings.
    plan = {x.component: x for x in capacity.limits(BIG, capacity.RAISED)}
    assert f"`worker_max_concurrency` {BIG.worker_max_concurrency:,}" in (
        plan["Worker (processing; protects the MCP server)"].arithmetic
    )
    assert capacity_model.listing_keys(BIG) == BIG.received_log_shards
