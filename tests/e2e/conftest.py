"""The local stack in subprocesses, driven over real HTTP on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.stack import LocalStack, StackOptions

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """One stack per module: starting one costs about a second and a half."""
    with LocalStack(StackOptions(seed=11)) as running:
        yield running
