"""``cdk.json`` runs ``app.py`` with the system's ``python3``: it hands over to the
project's ``.venv``, or says in one line what to run when that venv cannot synthesize."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import threading
import venv
from pathlib import Path

import pytest

from tests.polling import poll

ROOT = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy2(ROOT / "app.py", project / "app.py")
    return project


def _run(python: Path | str, project: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *flags, "app.py", "--example"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_cli_runs_the_app_with_the_system_python() -> None:
    assert json.loads((ROOT / "cdk.json").read_text())["app"] == "python3 app.py"


def test_without_a_venv_it_says_to_run_make(tmp_path: Path) -> None:
    project = _project(tmp_path)
    # -S: no site-packages, so no CDK, as with a system Python.
    completed = _run(sys.executable, project, "-S")
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr == (
        f"cdk app: {project / '.venv'} is missing; run `make` in {project} first (it builds it)\n"
    )


def test_it_hands_over_to_the_project_venv(tmp_path: Path) -> None:
    project = _project(tmp_path)
    fake = project / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho "venv python ran: $*"\n')
    fake.chmod(0o755)
    completed = _run(sys.executable, project, "-S")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == f"venv python ran: {project / 'app.py'} --example\n"


def test_a_venv_without_the_cdk_says_to_run_make(tmp_path: Path) -> None:
    project = _project(tmp_path)
    venv.create(project / ".venv", with_pip=False)
    completed = _run(project / ".venv" / "bin" / "python", project)
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert completed.stderr.count("\n") == 1
    assert "has no CDK" in completed.stderr
    assert f"run `make` in {project} first" in completed.stderr


def test_a_quiet_step_gets_a_still_line_so_a_synth_is_never_silent_for_long(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("cdk_app_entry", ROOT / "app.py")
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    monkeypatch.setattr(app, "HEARTBEAT_SECONDS", 0.05)
    app._say("bundling everything (the first synth installs wheels)")
    stop = threading.Event()
    beating = threading.Thread(target=app._heartbeat, args=(stop,), daemon=True)
    beating.start()
    try:
        said = poll(
            lambda: capsys.readouterr().err,
            lambda err: "still" in err,
            deadline_seconds=10,
        )
    finally:
        stop.set()
        beating.join(timeout=10)
    assert "cdk app: still bundling everything (0 s)" in said
    assert not beating.is_alive()
