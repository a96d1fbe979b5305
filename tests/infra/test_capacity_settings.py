"""The capacity settings reach what they size: the received log's shard count every
function that writes or reads the log, the relay's parallelization its stream mapping."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Annotations, Match

from functions.core import env_names
from functions.receiver.settings import Settings as ReceiverSettings
from functions.reconciler.settings import Settings as ReconcilerSettings
from tests.infra.conftest import Synthesized, get_att, resolved, synthesize

FUNCTIONS = ("receiver", "relay", "worker", "reconciler")
# The functions that write (receiver) or read (reconciler) the received log.
LOG_USERS = {"receiver", "reconciler"}


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(
        tmp_path_factory,
        {
            "received_log_shards": "32",
            "relay_parallelization_factor": "6",
            "table_warm_write_units": "12000",
        },
    )


def test_the_shard_setting_reaches_every_function_that_uses_the_received_log(
    scaled: Synthesized,
) -> None:
    told = {
        name: scaled.environment(name).get(env_names.ENV_RECEIVED_LOG_SHARDS) for name in FUNCTIONS
    }
    assert {name for name, value in told.items() if value is not None} == LOG_USERS
    assert (
        ReceiverSettings.from_env(resolved(scaled.environment("receiver"))).received_log_shards
        == 32
    )
    reconciler = ReconcilerSettings.from_env(resolved(scaled.environment("reconciler")))
    assert reconciler.received_log_shards == 32


def test_the_synth_says_the_shard_setting_only_rises(scaled: Synthesized) -> None:
    notes = Annotations.from_stack(scaled.stack).find_info(
        "*", Match.string_like_regexp("received_log_shards=32: .*only ever rises")
    )
    assert len(notes) == 1


def test_the_relay_parallelization_is_a_setting(scaled: Synthesized) -> None:
    (table,) = scaled.of_type("AWS::DynamoDB::Table")
    (mapping,) = [
        m["Properties"]
        for m in scaled.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == get_att(table, "StreamArn")
    ]
    assert mapping["ParallelizationFactor"] == 6


def test_the_table_can_be_warmed_for_a_launch(scaled: Synthesized) -> None:
    (table,) = scaled.of_type("AWS::DynamoDB::Table").values()
    assert table["Properties"]["WarmThroughput"] == {"WriteUnitsPerSecond": 12000}


def test_a_bare_synth_leaves_the_table_to_dynamodbs_own_warmth(
    synthesized: Synthesized,
) -> None:
    (table,) = synthesized.of_type("AWS::DynamoDB::Table").values()
    assert "WarmThroughput" not in table["Properties"]
