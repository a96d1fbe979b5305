"""The synth loads the workflow's code as the worker's cold start will, and refuses what fails.

The local stack refuses to start a worker whose workflow or tools do not load; a
deployed worker would fail every cold start instead. So the synth runs the same code
(``functions.core.workflow.import_attribute``, the agent's ``configured_tools``) on
the team's folder, in a child interpreter: the team's import-time code runs apart from
the CDK app, and its failure comes back as one line. The agent's tools are loaded and
their function called (with their ``tool_settings``), and ``approval`` and
``tools_without_approval`` are checked against them; a workflow of the team's own is
imported and its attribute looked up (its factory is not called: it builds the
deployed stack's clients and may read its secrets).

A module that imports a package only ``workflow_requirements`` provides cannot be
loaded here (those are installed for Lambda's platform, not this interpreter): the
check is then skipped, and the synth says so in a line. No CDK import here: the child
runs this module.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from functions.workflows.wiring import WORKFLOW_ALIASES
from infra.config import ConfigError

if TYPE_CHECKING:
    from infra.config import StackConfig

# The team's import-time code may be slow, never endless: the synth must end.
CHECK_TIMEOUT_SECONDS: Final = 60
_NOT_CHECKED: Final = 3  # the child's exit code: a requirement is not importable here
_FUNCTIONS_ROOT: Final = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class _Request:
    workflow: str  # module:attribute
    agent: bool
    settings: Mapping[str, str]
    source: str | None
    requirements: bool


def check_workflow_loads(config: StackConfig) -> None:
    """Load the workflow's code as the worker will (see the module's docstring).

    Raises:
        ConfigError: one line naming the workflow or tools setting and what failed.
    """
    code = config.workflow_code
    agent = code.target == WORKFLOW_ALIASES["agent"]
    shipped = code.target in WORKFLOW_ALIASES.values()
    if shipped and not (agent and _names_tools(config.workflow_settings)):
        return  # the receiver's own code, its settings read already (StackConfig)
    request = _Request(
        workflow=code.target,
        agent=agent,
        settings=dict(config.workflow_settings),
        source=str(code.source) if code.source else None,
        requirements=bool(code.requirements),
    )
    outcome = _run_child(request)
    if outcome.refusal:
        raise ConfigError(outcome.refusal)
    if outcome.note:
        print(f"cdk app: note: {outcome.note}", file=sys.stderr, flush=True)


def _names_tools(settings: Mapping[str, str]) -> bool:
    return any(settings.get(name) for name in ("tools", "tool_settings", "approval"))


@dataclass(frozen=True, slots=True)
class _Outcome:
    refusal: str | None = None
    note: str | None = None


def _run_child(request: _Request) -> _Outcome:
    paths = [p for p in (request.source, str(_FUNCTIONS_ROOT)) if p]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        # Whatever the team's code builds at import, it reaches no account from here.
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    }
    try:
        done = subprocess.run(  # noqa: S603 (this interpreter, this module, fixed argv)
            [sys.executable, "-m", __name__],
            input=json.dumps(dataclasses.asdict(request) | {"settings": dict(request.settings)}),
            capture_output=True,
            text=True,
            env=environment,
            cwd=request.source or None,
            timeout=CHECK_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return _Outcome(
            refusal=f"workflow {request.workflow}: loading its code took over "
            f"{CHECK_TIMEOUT_SECONDS} s (does a module wait on the network at import?)"
        )
    line = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode == 0:
        return _Outcome()
    if done.returncode == _NOT_CHECKED:
        return _Outcome(note=line)
    return _Outcome(refusal=line or f"workflow {request.workflow}: its check failed")


def _check(request: _Request) -> tuple[int, str]:
    """In the child: (exit code, line) for loading the workflow's code."""
    from functions.core.env_parsers import SettingsError  # noqa: PLC0415
    from functions.core.workflow import import_attribute  # noqa: PLC0415
    from functions.workflows.agent import AgentSettings, configured_tools  # noqa: PLC0415

    try:
        if request.agent:
            settings = AgentSettings.from_mapping(request.settings)
            configured_tools(settings)
            what = f"tools {settings.tools}"
            module = (settings.tools or ":").partition(":")[0]
        else:
            module, _, attribute = request.workflow.partition(":")
            import_attribute(module, attribute, what=f"workflow {request.workflow}")
            what = f"workflow {request.workflow}"
    except (ValueError, SettingsError) as exc:
        missing = _missing_requirement(exc, request)
        if missing is not None:
            return _NOT_CHECKED, (
                f"{_setting_of(request)} not loaded at synth: it imports {missing!r}, which "
                "workflow_requirements installs for Lambda only (its cold start checks it)"
            )
        # The workflow's own message names it already; the tools' gets the setting.
        return 1, f"{_setting_of(request)}: {exc}" if request.agent else str(exc)
    if module and not _shipped(module, request):
        return 1, (
            f"{_setting_of(request)}: {what}: module {module} is not shipped (it is neither "
            "in workflow_source nor under functions/)"
        )
    return 0, f"{what} loaded"


def _shipped(module: str, request: _Request) -> bool:
    """Whether the worker's asset holds ``module``: the workflow folder's or ours."""
    found = getattr(importlib.import_module(module), "__file__", None)
    if found is None:
        return False
    path = Path(found).resolve()
    roots = [Path(request.source).resolve()] if request.source else []
    roots.append(_FUNCTIONS_ROOT / "functions")
    return any(path.is_relative_to(root) for root in roots)


def _setting_of(request: _Request) -> str:
    return "agent_tools (workflow agent)" if request.agent else f"workflow {request.workflow}"


def _missing_requirement(exc: Exception, request: _Request) -> str | None:
    """The third-party module a failed import lacked, when a requirement may provide it."""
    cause = exc.__cause__
    if not isinstance(cause, ModuleNotFoundError) or not request.requirements or not cause.name:
        return None
    top = cause.name.partition(".")[0]
    own = {p.name.removesuffix(".py") for p in Path(request.source or ".").iterdir()}
    return None if top in own or top == "functions" else cause.name


def main() -> int:
    """The child: read the request on stdin, print one line, exit 0, 1 or 3."""
    request = _Request(**json.loads(sys.stdin.read()))
    code, line = _check(request)
    print(line, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
