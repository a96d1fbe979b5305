"""Installing the distribution claims one name in site-packages, ``relaylink_receiver``,
and the installed copy still runs the CLI and synthesizes a team's app whose Lambda
assets hold ``functions/`` exactly as the repository does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from infra.distribution import PACKAGE, TOP_LEVEL, LayoutError, rewrite_imports
from tests.infra.conftest import ROOT

EXAMPLE_APP = ROOT / "examples" / "existing_app" / "app.py"
INSTALLED = f"{PACKAGE}."
LOAD_ARCHIVE = """
from relaylink_receiver.functions.core.clock import SystemClock
from relaylink_receiver.functions.core.workflow import WorkflowContext
from relaylink_receiver.functions.workflows.wiring import load as load_workflow
context = WorkflowContext(None, "bucket", False, 5.0, SystemClock())
print(type(load_workflow("archive", context)).__module__)
"""
PURELIB = "import sysconfig; print(sysconfig.get_path('purelib'))"


def _sources() -> list[Path]:
    return sorted(path for top in TOP_LEVEL for path in (ROOT / top).rglob("*.py"))


def test_every_module_moves_into_the_package_and_back_unchanged() -> None:
    for path in _sources():
        original = path.read_text(encoding="utf-8")
        moved = rewrite_imports(original, old="", new=INSTALLED, filename=str(path))
        for top in TOP_LEVEL:
            assert f"\nfrom {top}." not in moved and f"\nfrom {top} " not in moved, path
        assert rewrite_imports(moved, old=INSTALLED, new="", filename=str(path)) == original


def test_only_the_four_packages_imports_move() -> None:
    source = (
        "from functions.core import clock  # functions.core stays in comments\n"
        "from functionsx import y\n"
        "from aws_cdk import Stack\n"
        "def f() -> None:\n"
        "    from cli.state import LocalState\n"
        'NAME = "functions.worker.handler"\n'
    )
    assert rewrite_imports(source, old="", new=INSTALLED) == (
        "from relaylink_receiver.functions.core import clock  # functions.core stays in comments\n"
        "from functionsx import y\n"
        "from aws_cdk import Stack\n"
        "def f() -> None:\n"
        "    from relaylink_receiver.cli.state import LocalState\n"
        'NAME = "functions.worker.handler"\n'
    )


def test_a_plain_import_of_a_package_is_refused_naming_the_line() -> None:
    with pytest.raises(LayoutError, match=r"mod.py:2: .*import functions.core"):
        rewrite_imports(
            "import os\nimport functions.core\n", old="", new=INSTALLED, filename="mod.py"
        )


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        command, capture_output=True, text=True, timeout=600, check=False, **kwargs
    )


@pytest.mark.slow
def test_the_installed_wheel_runs_the_cli_and_synthesizes_the_example_app(
    tmp_path: Path,
) -> None:
    # Built offline, without isolation (setuptools comes from the development venv),
    # from a clean copy: setuptools leaves build/lib and *.egg-info where it builds.
    source = tmp_path / "source"
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        copy = source / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes((ROOT / name).read_bytes())
    for top in TOP_LEVEL:
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    built = _run([*pip_wheel, "-q", "--wheel-dir", str(tmp_path / "dist"), str(source)], env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert tops == {PACKAGE, wheel.name.split("-py3")[0] + ".dist-info"}

    # A throwaway venv: the wheel alone, its dependencies seen from the development venv.
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    found = _run([str(python), "-c", PURELIB])
    site_packages = Path(found.stdout.strip())
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    installed = _run([*install, "--no-deps", str(wheel)], env=env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert {entry.name for entry in site_packages.iterdir()} & set(TOP_LEVEL) == set()
    # Only now: seen before, the development venv's editable install would satisfy pip.
    development = _run([sys.executable, "-c", PURELIB]).stdout.strip()
    (site_packages / "development_venv.pth").write_text(development + "\n")

    # Nothing of the repository is reachable: another folder, no PYTHONPATH.
    workdir = tmp_path / "team"
    workdir.mkdir()
    missing = _run([str(python), "-c", "import functions"], cwd=workdir, env=env)
    assert "No module named 'functions'" in missing.stderr
    cli = str(venv / "bin" / "relaylink-receiver")
    helped = _run([cli, "--help"], cwd=workdir, env=env)
    assert helped.returncode == 0 and "inbox" in helped.stdout, helped.stderr
    # The version comes from the installed distribution's metadata, not the checkout.
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    versioned = _run([cli, "--version"], cwd=workdir, env=env)
    assert versioned.stdout.split() == ["relaylink-receiver", declared], versioned.stderr
    for command in ("local", "send", "demo", "chaos", "simulate", "inbox", "budget"):
        one = _run([cli, command, "--help"], cwd=workdir, env=env)
        assert one.returncode == 0 and "usage:" in one.stdout, (command, one.stderr[-2000:])

    # The worker's workflow aliases name the asset's layout; installed, they still load.
    loaded = _run([str(python), "-c", LOAD_ARCHIVE], cwd=workdir, env=env)
    assert loaded.stdout.split() == [f"{PACKAGE}.functions.workflows.archive"], loaded.stderr

    # The example app, as a team writes it against the installed package.
    app = EXAMPLE_APP.read_text(encoding="utf-8")
    (workdir / "app.py").write_text(rewrite_imports(app, old="", new=INSTALLED))
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    if (ROOT / "build" / "deps").is_dir():  # the pip step's cache: offline when warm
        (build_dir / "deps").symlink_to(ROOT / "build" / "deps")
    outdir = tmp_path / "cdk.out"
    synth = _run(
        [str(python), "app.py"],
        cwd=workdir,
        env=env | {"CDK_OUTDIR": str(outdir), "RELAYLINK_RECEIVER_BUILD_DIR": str(build_dir)},
    )
    assert synth.returncode == 0, synth.stderr[-3000:]
    (nag,) = json.loads((outdir / "validation-report.json").read_text())["pluginReports"]
    assert (nag["pluginName"], nag["conclusion"], nag["violations"]) == (
        "AwsSolutions",
        "success",
        [],
    )
    # Every asset's functions/ is the repository's, byte for byte (imports written back).
    assets = [path for path in outdir.glob("asset.*") if (path / "functions").is_dir()]
    assert len(assets) == 4
    for asset in assets:
        for shipped in (asset / "functions").rglob("*.py"):
            original = ROOT / shipped.relative_to(asset)
            assert shipped.read_bytes() == original.read_bytes(), shipped
