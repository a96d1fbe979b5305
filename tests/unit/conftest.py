"""Unit fixtures shared by more than one module."""

from __future__ import annotations

from typing import Any

import pytest

from functions.core.adapters.dynamodb_effects import DynamoDbEffects
from tests.fakes import FakeEffects


@pytest.fixture(params=["fake", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Any:
    """An effect store: the DynamoDB adapter over the in-memory store (the fake), then over
    moto."""
    if request.param == "fake":
        return FakeEffects()
    return DynamoDbEffects(
        client=request.getfixturevalue("dynamodb"), table_name=request.getfixturevalue("table")
    )
