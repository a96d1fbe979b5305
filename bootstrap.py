"""Build one of the project's virtualenvs for a make target: fast, and saying what it does.

``make`` runs this with the system's ``python3`` before any venv exists, so it uses the
standard library only. It installs with uv (a pinned release, fetched once from the
package index into the user's cache) and falls back to pip when uv cannot be had.
Both keep their download caches, so a second fresh clone installs from disk. A line
goes out for every step, and one every few seconds while an installer is quiet.

    python3 bootstrap.py --venv .venv --extra local --stamp .venv/.stamp-demo
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
CONSTRAINTS = ROOT / "constraints.txt"
UV_VERSION = "0.13.9"
# Quiet installers get a progress line this often, well inside make's 15 s budget.
HEARTBEAT_SECONDS = 5.0
# uv lists every package it adds or removes; the summary lines around them say enough.
_UV_PACKAGE_LINE_PREFIXES = (" + ", " - ", " ~ ")


class BootstrapError(RuntimeError):
    """A step failed; its output has been shown above the message."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--venv", type=Path, required=True, help="the virtualenv to build")
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter for a new venv (default: this one)"
    )
    parser.add_argument("--extra", required=True, help="the project's extra to install")
    parser.add_argument("--stamp", type=Path, required=True, help="file touched when done")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        _bootstrap(args.venv, args.python, args.extra)
    except BootstrapError as error:
        print(f"bootstrap: {error}", file=sys.stderr, flush=True)
        return 1
    args.stamp.touch()
    _say(f"{args.venv} ready ({time.monotonic() - started:.0f} s)")
    return 0


def _bootstrap(venv: Path, python: str, extra: str) -> None:
    interpreter = _interpreter(python)
    target = f".[{extra}]"
    uv = None if os.environ.get("RELAYLINK_INSTALLER") == "pip" else _uv()
    venv_python = venv / "bin" / "python"
    if uv is not None:
        if not venv_python.exists():
            _say(f"creating {venv} ({_version_of(interpreter)}, uv {UV_VERSION})")
            # --seed: pip in the venv too, which infra.bundle runs for the Lambda wheels.
            _run([str(uv), "venv", "--quiet", "--seed", "--python", interpreter, str(venv)])
        _say(f"installing {target} into {venv} with uv (cache: uv's own)")
        _run(
            [
                str(uv), "pip", "install", "--python", str(venv_python),
                "--constraints", str(CONSTRAINTS), "--editable", target,
            ],
            activity="installing",
            keep=lambda line: not line.startswith(_UV_PACKAGE_LINE_PREFIXES),
        )  # fmt: skip
        return
    if not venv_python.exists():
        _say(f"creating {venv} ({_version_of(interpreter)}, venv + pip)")
        _run([interpreter, "-m", "venv", str(venv)])
    _say(f"installing {target} into {venv} with pip (cache: pip's own)")
    _run(
        [
            str(venv_python), "-m", "pip", "install", "--quiet", "--quiet",
            "--disable-pip-version-check", "--progress-bar", "off",
            "--constraint", str(CONSTRAINTS), "--editable", target,
        ],
        activity="installing",
    )  # fmt: skip


def _uv() -> Path | None:
    """The pinned uv, installed once per user beside the other caches; None without it."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    home = cache / "relaylink-receiver" / f"uv-{UV_VERSION}"
    uv = home / "bin" / "uv"
    if uv.exists():
        return uv
    _say(f"fetching uv {UV_VERSION} into {home} (once per machine)")
    staging = home.with_name(home.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _run(
            [
                sys.executable, "-m", "pip", "install", "--quiet", "--quiet",
                "--disable-pip-version-check", "--progress-bar", "off", "--no-deps",
                "--target", str(staging), f"uv=={UV_VERSION}",
            ],
            activity="fetching uv",
        )  # fmt: skip
        shutil.rmtree(home, ignore_errors=True)
        staging.rename(home)
    except (BootstrapError, OSError) as error:
        shutil.rmtree(staging, ignore_errors=True)
        _say(f"uv is not available ({error}); pip installs instead")
        return None
    return uv


def _interpreter(python: str) -> str:
    """``python`` as found on PATH or, for a ``pythonX.Y`` that PATH lacks (a pyenv shim
    of a version not selected), among pyenv's installed versions."""
    candidates = [shutil.which(python) or python]
    name = Path(python).name
    if name.startswith("python3."):
        pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
        version = name.removeprefix("python")
        found = sorted((pyenv / "versions").glob(f"{version}.*/bin/{name}"), reverse=True)
        candidates += [str(path) for path in found]
    for candidate in candidates:
        if _version_of(candidate) is not None:
            return candidate
    raise BootstrapError(
        f"no working {python} here (looked on PATH and in pyenv's versions); install it, "
        f"or pass another interpreter of that version: make LAMBDA_PYTHON=/path/to/{name}"
    )


def _version_of(interpreter: str) -> str | None:
    try:
        completed = subprocess.run(  # noqa: S603 (fixed argv, no shell)
            [interpreter, "--version"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return completed.stdout.strip() or completed.stderr.strip()


def _run(
    command: list[str],
    *,
    activity: str = "working",
    keep: Callable[[str], bool] | None = None,
) -> None:
    """Run ``command`` from the project folder, its output indented, with a progress
    line whenever it has been quiet for ``HEARTBEAT_SECONDS``."""
    started = time.monotonic()
    environment = os.environ | {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    try:
        process = subprocess.Popen(  # noqa: S603 (argv built above, no shell)
            command,
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as error:
        raise BootstrapError(f"cannot run {command[0]}: {error}") from None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(process, lines), daemon=True).start()
    last_output = started
    while True:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            now = time.monotonic()
            if now - last_output >= HEARTBEAT_SECONDS:
                print(f"    ... still {activity} ({now - started:.0f} s)", flush=True)
                last_output = now
            continue
        if line is None:
            break
        if keep is not None and not keep(line):
            continue
        print(f"    {line}", flush=True)
        last_output = time.monotonic()
    returncode = process.wait()
    if process.stdout is not None:
        process.stdout.close()
    if returncode != 0:
        raise BootstrapError(f"{Path(command[0]).name} failed (exit {returncode})")


def _pump(process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line.rstrip())
    lines.put(None)


def _say(message: str) -> None:
    print(f"==> {message}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
