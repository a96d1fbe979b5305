"""Your own workflow, shipped: the synth bundles what is on disk, with the workflow's code.

The first test runs the app exactly as the CDK CLI does (``cdk.json``'s ``app`` with
``CDK_OUTDIR`` and ``CDK_CONTEXT_JSON`` set), in a copy of the project whose receiver
was edited after the copy was made: no build step runs in between.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from functions.core import env_names
from infra.application import build_app
from infra.bundle import FUNCTIONS, BundleError, dependency_dir
from infra.workflow_code import WorkflowCodeError
from tests.infra.conftest import ROOT, cdk_json_context

# Pure Python, pinned in constraints.txt (hypothesis needs it), its wheel in the package
# index on this machine; the worker's own dependencies do not include it.
REQUIREMENT = "sortedcontainers"
FACTORY = "shipped_agent.flow:build"
# Only what CDK needs to stage the assets; skipping bundling keeps construct-time
# failures fast and shows they come before any bundling.
NO_BUNDLING: dict[str, list[str]] = {"aws:cdk:bundling-stacks": []}

FLOW = '''"""A deployer's workflow: archive the package through the ledger."""

import sortedcontainers

from functions.core.errors import PermanentError
from shipped_agent.prompts import PROMPT


def build(context):
    return Flow(context.settings.get("greeting", ""))


class Flow:
    def __init__(self, greeting):
        self.greeting = greeting
        self.seen = sortedcontainers.SortedSet()

    def run(self, work, package, effects):
        if not PROMPT:
            raise PermanentError("no_prompt")
        effects.run("note", lambda key: None)
'''


@pytest.fixture(scope="module")
def workflow_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``../my-agent``: a package outside the project, with a data file."""
    folder = tmp_path_factory.mktemp("my-agent")
    package = folder / "shipped_agent"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "flow.py").write_text(FLOW)
    (package / "prompts.py").write_text("PROMPT = 'Summarise the package.'\n")
    (package / "system.txt").write_text("You are careful.\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "flow.cpython-311.pyc").write_bytes(b"stale")
    (folder / "conftest.py").write_text("raise RuntimeError('tests do not ship')\n")
    return folder


def _project_copy(destination: Path, *, own_deps_cache: bool = False) -> Path:
    """The project's files the synth reads; the pip cache is the project's own (filled
    if empty) or, with ``own_deps_cache``, a copy that the test may spoil alone."""
    destination.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("app.py", "cdk.json", "constraints.txt"):
        shutil.copy2(ROOT / name, destination / name)
    for name in ("functions", "infra"):
        shutil.copytree(ROOT / name, destination / name, ignore=ignore)
    (ROOT / "build" / "deps").mkdir(parents=True, exist_ok=True)
    (destination / "build").mkdir()
    if own_deps_cache:
        for asset in FUNCTIONS.values():
            dependency_dir(asset.requirements)
        ignore_partial = shutil.ignore_patterns("*.partial")
        shutil.copytree(
            ROOT / "build" / "deps", destination / "build" / "deps", ignore=ignore_partial
        )
    else:
        (destination / "build" / "deps").symlink_to(ROOT / "build" / "deps")
    return destination


def _run_app(
    project: Path, outdir: Path, overrides: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """What ``npx cdk synth -c key=value ...`` does: run the app with the context."""
    context = json.loads((project / "cdk.json").read_text())["context"] | overrides
    environment = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "PYTHONPATH": str(project),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "18,20",
    }
    return subprocess.run(
        [sys.executable, "app.py"],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _synth_like_the_cli(project: Path, outdir: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    completed = _run_app(project, outdir, overrides)
    assert completed.returncode == 0, completed.stderr[-4000:]
    stack = "relaylink-receiver-prod"
    return dict(json.loads((outdir / f"{stack}.template.json").read_text()))


def _function(template: dict[str, Any], handler: str) -> dict[str, Any]:
    functions: list[dict[str, Any]] = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Handler"] == f"functions.{handler}.handler.lambda_handler"
    ]
    (function,) = functions
    return function


def _asset_dir(outdir: Path, function: dict[str, Any]) -> Path:
    asset_hash = function["Code"]["S3Key"].removesuffix(".zip")
    return outdir / f"asset.{asset_hash}"


def test_cli_synth_ships_edited_code_and_the_workflow_with_its_requirement(
    tmp_path: Path, workflow_folder: Path
) -> None:
    project = _project_copy(tmp_path / "project")
    marker = f"# edited after the copy: {uuid.uuid4()}\n"
    with (project / "functions" / "receiver" / "handler.py").open("a") as handler:
        handler.write(marker)
    outdir = tmp_path / "cdk.out"

    template = _synth_like_the_cli(
        project,
        outdir,
        {
            "workflow": FACTORY,
            "workflow_source": str(workflow_folder),
            "workflow_requirements": REQUIREMENT,
            "workflow_setting_greeting": "hello",
        },
    )

    receiver = _asset_dir(outdir, _function(template, "receiver"))
    assert (receiver / "functions" / "receiver" / "handler.py").read_text().endswith(marker)
    worker_function = _function(template, "worker")
    worker = _asset_dir(outdir, worker_function)
    assert (worker / "shipped_agent" / "flow.py").read_text() == FLOW
    assert (worker / "shipped_agent" / "system.txt").is_file()
    # The developer's stale bytecode stays home; the asset's own is the runtime's.
    assert not (worker / "shipped_agent" / "__pycache__" / "flow.cpython-311.pyc").exists()
    assert not (worker / "conftest.py").exists()
    assert (worker / "sortedcontainers" / "__init__.py").is_file()
    assert (
        not (receiver / "shipped_agent").exists() and not (receiver / "sortedcontainers").exists()
    )
    environment = worker_function["Environment"]["Variables"]
    assert environment[env_names.ENV_WORKFLOW] == FACTORY
    assert json.loads(environment[env_names.ENV_WORKFLOW_SETTINGS]) == {"greeting": "hello"}
    # The worker's own loader, run from the asset alone, finds the factory and its
    # requirement there (what the Lambda runtime's import path holds).
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import functions.core.workflow as loader;"
        "from functions.core.workflow import WorkflowContext, load_workflow;"
        "assert loader.__file__.startswith(sys.argv[1]), loader.__file__;"
        "import sortedcontainers, shipped_agent.flow as flow;"
        "assert sortedcontainers.__file__.startswith(sys.argv[1]), sortedcontainers.__file__;"
        "context = WorkflowContext(notify_url=None, archive_bucket='a', "
        "allow_insecure_loopback=False, timeout_seconds=1.0, clock=None, "
        "settings={'greeting': 'hello'});"
        "workflow = load_workflow(sys.argv[2], context, shipped={});"
        "assert isinstance(workflow, flow.Flow) and workflow.greeting == 'hello'"
    )
    subprocess.run(
        [sys.executable, "-I", "-c", probe, str(worker), environment[env_names.ENV_WORKFLOW]],
        check=True,
        timeout=60,
    )


def _files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


def test_cli_synth_ships_nothing_from_outside_the_folder_and_never_spoils_a_dependency(
    tmp_path: Path,
) -> None:
    project = _project_copy(tmp_path / "project", own_deps_cache=True)
    secret = f"aws_secret_access_key = {uuid.uuid4()}"
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(secret + "\n")
    folder = tmp_path / "my-agent"
    (folder / "mine").mkdir(parents=True)
    (folder / "mine" / "__init__.py").write_text("def build(context):\n    return None\n")
    link = folder / "mine" / "prompt_template.txt"
    link.symlink_to(tmp_path / ".aws" / "credentials")
    workflow = {"workflow": "mine:build", "workflow_source": str(folder)}

    leaked = _run_app(project, tmp_path / "out-link", workflow)
    assert leaked.returncode != 0
    assert leaked.stderr.splitlines()[-1].startswith(
        f"cdk app: error: workflow_source: {link} leads to"
    )
    assert "Traceback" not in leaked.stderr
    shipped = _files_under(tmp_path / "out-link")
    assert not [path for path in shipped if secret.encode() in path.read_bytes()]

    link.unlink()
    (folder / "pydantic").mkdir()
    (folder / "pydantic" / "__init__.py").write_text("TAMPERED = True\n")
    replaced = _run_app(project, tmp_path / "out-clash", workflow)
    assert replaced.returncode != 0
    assert replaced.stderr.splitlines()[-1].startswith(
        f"cdk app: error: workflow_source: {folder / 'pydantic'} would replace the worker's "
        "dependency 'pydantic' (from pydantic "
    )

    # The next synth, without a workflow, ships the dependency as pip installed it.
    template = _synth_like_the_cli(project, tmp_path / "out-clean", {})
    worker = _asset_dir(tmp_path / "out-clean", _function(template, "worker"))
    pristine = dependency_dir(FUNCTIONS["worker"].requirements) / "pydantic" / "__init__.py"
    assert (worker / "pydantic" / "__init__.py").read_bytes() == pristine.read_bytes()
    cache = _files_under(project / "build" / "deps")
    assert not [path for path in cache if b"TAMPERED" in path.read_bytes()]


def _build(overrides: dict[str, Any]) -> None:
    build_app(context=cdk_json_context() | NO_BUNDLING | overrides)


@pytest.mark.parametrize(
    ("workflow", "named"),
    [
        ("absent_agent.flow:build", "'absent_agent.flow'"),
        ("shipped_agent.absent:build", "'shipped_agent.absent'"),
        ("functions.workflows.absent:build", "'functions.workflows.absent'"),
        ("shipped_agent.flow:absent", "defines no 'absent'"),
    ],
)
def test_a_workflow_that_is_not_there_fails_the_synth_naming_it(
    workflow_folder: Path, workflow: str, named: str
) -> None:
    with pytest.raises(WorkflowCodeError, match=named):
        _build({"workflow": workflow, "workflow_source": str(workflow_folder)})


def test_a_deployers_module_is_not_found_without_its_folder() -> None:
    with pytest.raises(WorkflowCodeError, match=r"'shipped_agent\.flow' not found"):
        _build({"workflow": FACTORY})


def test_a_workflow_folder_may_not_replace_the_receivers_package(tmp_path: Path) -> None:
    (tmp_path / "functions").mkdir()
    (tmp_path / "functions" / "__init__.py").write_text("")
    (tmp_path / "mine.py").write_text("def build(context):\n    return None\n")
    with pytest.raises(WorkflowCodeError, match="functions"):
        _build({"workflow": "mine:build", "workflow_source": str(tmp_path)})


def test_an_import_no_requirement_provides_fails_the_synth(
    tmp_path: Path, workflow_folder: Path
) -> None:
    # The folder imports sortedcontainers; without workflow_requirements nothing bundles it.
    with pytest.raises(RuntimeError, match=r"imports sortedcontainers .*workflow_requirements"):
        build_app(
            context=cdk_json_context()
            | {"workflow": FACTORY, "workflow_source": str(workflow_folder)},
            outdir=str(tmp_path / "cdk.out"),
        )


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            {"worker_max_concurrency": "many"},
            "cdk app: error: worker_max_concurrency: an integer from 2 to 1000",
        ),
        # Refused inside CDK's bundling callback, where jsii wraps every exception.
        (
            {"workflow": FACTORY},
            "cdk app: error: worker imports sortedcontainers but does not bundle it"
            " (add it to workflow_requirements)",
        ),
    ],
)
def test_a_refused_synth_says_why_in_one_line_without_a_traceback(
    tmp_path: Path, workflow_folder: Path, overrides: dict[str, Any], line: str
) -> None:
    project = _project_copy(tmp_path / "project")
    if "workflow" in overrides:
        overrides = overrides | {"workflow_source": str(workflow_folder)}
    completed = _run_app(project, tmp_path / "cdk.out", overrides)
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert [text for text in completed.stderr.splitlines() if "error" in text] == [line]


def test_a_requirement_at_odds_with_the_worker_pins_fails_naming_it() -> None:
    # constraints.txt pins sortedcontainers to another version: pip cannot honour both.
    with pytest.raises(BundleError, match=r"sortedcontainers==2\.3\.0.*constraints\.txt"):
        dependency_dir(["aws-lambda-powertools"], ["sortedcontainers==2.3.0"])
