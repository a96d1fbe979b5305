"""The local stack in subprocesses, driven over real HTTP on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.stack import LocalStack
from local.stack_options import StackOptions
from tests.e2e.stacks import audited


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything here is marked ``e2e`` (``pytest -m "not e2e"`` skips the subprocesses)."""
    for item in items:
        if "tests/e2e/" in item.nodeid:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """One stack per module: starting one costs about a second and a half."""
    with audited(StackOptions(seed=11)) as running:
        yield running
