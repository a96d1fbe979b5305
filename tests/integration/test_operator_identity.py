"""Who an approval's decision records: the AWS principal deployed, a name locally."""

from __future__ import annotations

import getpass

import pytest
from moto import mock_aws

from ops import operator_identity
from ops.target import OperatorError


def test_deployed_the_decider_is_the_callers_principal_from_sts() -> None:
    with mock_aws():
        arn = operator_identity.caller_arn("eu-west-1")
        assert arn.startswith("arn:aws:")
        assert operator_identity.deployed_decider(lambda: arn, None) == arn
        # A name the caller gives is kept beside the principal, never instead of it.
        given = operator_identity.deployed_decider(lambda: arn, "alice")
        assert given == f"{arn} (name: alice)"


def test_locally_the_decider_is_the_name_given_then_the_environment_then_the_login() -> None:
    env = {operator_identity.OPERATOR_ENV: "bob"}
    assert operator_identity.local_decider("alice", env) == "alice"
    assert operator_identity.local_decider(None, env) == "bob"
    assert operator_identity.local_decider(None, {}) == getpass.getuser()


@pytest.mark.parametrize("name", ["eve\u202e", "a\nb", "x" * 201])
def test_a_name_that_could_mislead_a_reader_is_refused(name: str) -> None:
    with pytest.raises(OperatorError, match="no control or invisible character"):
        operator_identity.local_decider(name, {})
