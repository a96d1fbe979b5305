"""Loading the workflow (:class:`~functions.core.ports.workflow.Workflow`) the worker runs.

The worker loads one workflow at cold start from the ``WORKFLOW`` setting: one of the
shipped workflows by its alias (the caller passes them in, see
:data:`functions.workflows.wiring.SHIPPED`), or your own written
``"package.module:attribute"``. The attribute is either an object with a ``run``
method (a :class:`Workflow`) or a factory that takes a :class:`WorkflowContext`
and returns one. The shipped ones live in :mod:`functions.workflows`: ``archive``
keeps the package on its inbox item (the package record), ``notify`` also sends one
HTTP notification, ``agent`` has a model summarise the package and sends the summary
as an alert.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from functions.core import settings_table
from functions.core.clock import Clock
from functions.core.ports.workflow import Workflow

# Where ``functions`` is imported from: itself in Lambda and the repository, inside the
# ``relaylink_receiver`` package when installed from the wheel (infra/distribution.py).
_FUNCTIONS_PACKAGE: Final = __name__.removesuffix(".core.workflow")


@dataclass(frozen=True, slots=True)
class WorkflowContext:
    """What the worker's settings offer a workflow factory.

    Attributes:
        settings: the workflow's own knobs (``WORKFLOW_SETTINGS``, a JSON object of
            strings); each workflow reads and checks the names it knows.
        table_name: the stack's table (the agent workflow keeps its token budget there).
        alert_topic_arn: the SNS topic the stack creates for alerts (``ALERT_TOPIC_ARN``).
        secrets_max_age_seconds: how long a secret a workflow reads is used before it is
            read again (``secrets_max_age_seconds``; rotated values reach warm containers).
    """

    notify_url: str | None
    archive_bucket: str | None
    allow_insecure_loopback: bool
    timeout_seconds: float
    clock: Clock
    settings: Mapping[str, str] = field(default_factory=dict)
    table_name: str = ""
    alert_topic_arn: str | None = None
    secrets_max_age_seconds: int = settings_table.SECRETS_MAX_AGE_SECONDS.default


# A shipped workflow's factory: checks the context and builds the workflow.
WorkflowFactory = Callable[["WorkflowContext"], Workflow]


class WorkflowSettings(Protocol):
    """A workflow's own settings, read and checked by its settings class."""

    @property
    def bedrock_model_ids(self) -> tuple[str, ...]:
        """The Bedrock models the workflow invokes (the stack grants InvokeModel on them)."""
        ...

    @property
    def bedrock_guardrail_ids(self) -> tuple[str, ...]:
        """The guardrails (ids or ARNs) it applies (the stack grants ApplyGuardrail on them)."""
        ...

    @property
    def secret_arns(self) -> tuple[str, ...]:
        """Secrets its settings name by ARN for it to read (the stack grants reading them)."""
        ...


@dataclass(frozen=True, slots=True)
class FactoryWithSettings:
    """A workflow factory that declares how its settings (``WORKFLOW_SETTINGS``) are
    read, so that the synth refuses, with the workflow's own message, what its cold
    start would (:func:`read_workflow_settings`).

    Attributes:
        build: The factory itself.
        read_settings: The settings class's reader; raises ``SettingsError``.
    """

    build: Callable[[WorkflowContext], Workflow]
    read_settings: Callable[[Mapping[str, str]], WorkflowSettings]

    def __call__(self, context: WorkflowContext) -> Workflow:
        return self.build(context)


def reads_settings(
    read: Callable[[Mapping[str, str]], WorkflowSettings],
) -> Callable[[Callable[[WorkflowContext], Workflow]], FactoryWithSettings]:
    """Declare a factory's settings reader: ``@reads_settings(MySettings.from_mapping)``."""

    def declare(build: Callable[[WorkflowContext], Workflow]) -> FactoryWithSettings:
        return FactoryWithSettings(build=build, read_settings=read)

    return declare


def factory_name(factory: WorkflowFactory) -> str:
    """The attribute a shipped factory is found under (a declared one's own function)."""
    built = factory.build if isinstance(factory, FactoryWithSettings) else factory
    return built.__name__


def read_workflow_settings(
    spec: str, settings: Mapping[str, str], *, shipped: Mapping[str, WorkflowFactory]
) -> WorkflowSettings | None:
    """A shipped workflow's settings as its own class reads them, or None for a workflow
    that declares no reader. A deployer's own workflow (not an alias) is not imported
    here: its requirements need not be installed where the stack is synthesized.

    Raises:
        SettingsError: the workflow's reader refuses the settings.
    """
    factory = shipped.get(spec)
    if not isinstance(factory, FactoryWithSettings):
        return None
    return factory.read_settings(settings)


def load_workflow(
    spec: str, context: WorkflowContext, *, shipped: Mapping[str, WorkflowFactory]
) -> Workflow:
    """Build the shipped workflow ``spec`` names, or import ``module:attribute`` and
    return its workflow.

    Args:
        shipped: the shipped workflows' factories by alias (the caller wires them).

    Raises:
        ValueError: The spec is malformed or names nothing usable (fail at cold start).
    """
    factory = shipped.get(spec)
    if factory is not None:
        return factory(context)
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(
            f"workflow setting must be one of {sorted(shipped)} or 'module:attribute', got {spec!r}"
        )
    target = import_attribute(_importable(module_name), attribute, what=f"workflow {spec}")
    if not hasattr(target, "run") and callable(target):
        target = target(context)
    if not callable(getattr(target, "run", None)):
        raise ValueError(f"workflow {spec!r} has no run method")
    workflow: Workflow = target  # type: ignore[assignment]
    return workflow


def import_attribute(module_name: str, attribute: str, *, what: str) -> object:
    """``module_name.attribute``, imported as the worker imports it.

    Raises:
        ValueError: one line: the module is missing, raises on import (its exception's
            type, never its message), or has no such attribute.
    """
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"{what}: no module named {exc.name!r}") from exc
    except Exception as exc:  # the team's module: named by type, never its message
        raise ValueError(f"{what}: module {module_name} raised {type(exc).__name__}") from exc
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{what}: module {module_name} has no attribute {attribute!r}") from None


def _importable(module_name: str) -> str:
    """``functions.x`` (the asset's layout) where this interpreter finds it."""
    if module_name.partition(".")[0] != "functions":
        return module_name
    return _FUNCTIONS_PACKAGE + module_name.removeprefix("functions")
