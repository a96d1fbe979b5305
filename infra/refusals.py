"""The errors that refuse a synth for a reason the deployer fixes (a setting, a folder).

``app.py`` prints them as one line; anything else is a bug and keeps its traceback.
Bundling runs inside a CDK callback, whose exception comes back to the app wrapped in
a jsii error and traceback: the callback notes the refusal (:func:`note`) before it
propagates, so the app can still print the deployer's one line (:func:`noted`).
"""

from __future__ import annotations

from typing import Final

from functions.core.env_parsers import SettingsError
from infra.bundle import BundleError
from infra.config import ConfigError
from infra.distribution import LayoutError
from infra.workflow_code import WorkflowCodeError

REFUSALS: Final = (ConfigError, SettingsError, BundleError, WorkflowCodeError, LayoutError)

_noted: list[Exception] = []


def note(refusal: Exception) -> None:
    """Remember ``refusal``, raised inside a CDK callback, for the app's error line."""
    _noted.append(refusal)


def noted() -> Exception | None:
    """The first refusal a callback noted in this process, if any."""
    return _noted[0] if _noted else None
