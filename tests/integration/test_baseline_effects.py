"""The bench's baseline receiver hands the shipped workflows an effect hook of its own
(no ledger): it must take every argument the ledger takes, or the workflow's first
effect raises and the baseline answers 500 to every delivery (figure 5 then waits out
RelayLink's whole retry schedule)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

from functions.core.effects import EffectLedger


@pytest.fixture
def direct_effects() -> Any:
    # Imported once the offline AWS environment is set: the module builds its
    # persistence layer (a DynamoDB client) at import, as a handler module does.
    return importlib.import_module("bench.baseline.handler").DirectEffects


def test_the_baseline_effect_hook_takes_what_the_ledger_takes(direct_effects: Any) -> None:
    ledger = inspect.signature(EffectLedger.run).parameters
    direct = inspect.signature(direct_effects.run).parameters
    assert list(direct) == list(ledger)
    for name, parameter in ledger.items():
        assert direct[name].kind is parameter.kind, name
        assert direct[name].default == parameter.default, name


def test_the_baseline_effect_hook_runs_the_effect_once_with_its_key(direct_effects: Any) -> None:
    keys: list[str] = []
    assert direct_effects("d-1").run("notify", keys.append) is True
    assert direct_effects("d-1").run("notify", keys.append, key="k") is True
    assert keys == ["d-1:notify", "k"]
