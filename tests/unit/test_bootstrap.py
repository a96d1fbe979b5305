"""``bootstrap.py`` (what ``make`` runs first): talkative while an installer is quiet,
terse where uv lists every package, and able to find a pyenv interpreter PATH lacks."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import bootstrap


def test_a_quiet_step_gets_progress_lines_and_its_output_is_indented(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bootstrap, "HEARTBEAT_SECONDS", 0.2)
    script = "import time; print('Resolved 3 packages', flush=True); time.sleep(1.5); print(' + x')"
    bootstrap._run(
        [sys.executable, "-c", script],
        activity="installing",
        keep=lambda line: not line.startswith(bootstrap._UV_PACKAGE_LINE_PREFIXES),
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "    Resolved 3 packages"
    progress = [line for line in lines[1:] if line.startswith("    ... still installing (")]
    assert len(progress) >= 2
    assert " + x" not in "\n".join(lines)


def test_a_failed_step_names_the_program_and_its_exit_code() -> None:
    with pytest.raises(bootstrap.BootstrapError, match=r"failed \(exit 3\)"):
        bootstrap._run([sys.executable, "-c", "raise SystemExit(3)"])


def test_a_version_missing_from_path_is_found_among_pyenvs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interpreter = tmp_path / "versions" / "3.99.1" / "bin" / "python3.99"
    interpreter.parent.mkdir(parents=True)
    interpreter.symlink_to(sys.executable)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert bootstrap._interpreter("python3.99") == str(interpreter)


def test_no_such_interpreter_says_how_to_name_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(
        bootstrap.BootstrapError, match=re.escape("make LAMBDA_PYTHON=/path/to/python3.98")
    ):
        bootstrap._interpreter("python3.98")
