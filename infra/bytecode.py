"""The asset's bytecode, compiled for the Lambda runtime's Python at bundling.

A Lambda's code directory is read-only: an asset without ``__pycache__`` compiles every
module it imports on every cold start, and bytecode of another Python is ignored. So
the bundler compiles the asset with an interpreter of the runtime's version and checks
every module's ``.pyc`` carries that version's magic number. Unchecked hashes: the
asset never changes after the build, and file times do not survive the zip.

The interpreter: ``LAMBDA_PYTHON`` (as ``make LAMBDA_PYTHON=...`` passes it), else
``python<version>`` on PATH or among pyenv's versions (as bootstrap.py finds it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

RUNTIME_PYTHON_ENV: Final = "LAMBDA_PYTHON"


class BytecodeError(RuntimeError):
    """No interpreter of the runtime's version, or bytecode that does not match it."""


def runtime_python(version: str) -> str:
    """An interpreter of Python ``version`` that runs.

    Raises:
        BytecodeError: none is configured or on PATH, or it is another version.
    """
    name = f"python{version}"
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = [
        os.environ.get(RUNTIME_PYTHON_ENV),
        shutil.which(name),
        *map(str, sorted((pyenv / "versions").glob(f"{version}.*/bin/{name}"), reverse=True)),
    ]
    for python in filter(None, candidates):
        try:
            done = subprocess.run(  # noqa: S603 (an interpreter path, no shell)
                [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError:
            continue  # not there, or not an executable
        if done.returncode == 0 and done.stdout.strip() == version:
            return python
    raise BytecodeError(
        f"precompiling the Lambda asset needs Python {version}: put {name} on PATH or "
        f"among pyenv's versions, or name it: make {RUNTIME_PYTHON_ENV}=/path/to/{name}"
    )


def magic_number(python: str) -> bytes:
    """The bytecode magic number of ``python`` (the first 4 bytes of its ``.pyc``)."""
    return subprocess.run(  # noqa: S603 (an interpreter path, no shell)
        [
            python,
            "-c",
            "import importlib.util,sys; sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER)",
        ],
        capture_output=True,
        check=True,
    ).stdout


def compiled_path(source: Path, version: str) -> Path:
    """Where ``version``'s interpreter reads the bytecode of ``source``."""
    tag = "cpython-" + version.replace(".", "")
    return source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"


def precompile(directory: Path, version: str) -> None:
    """Compile every module under ``directory`` for Python ``version``, then check it.

    Raises:
        BytecodeError: no interpreter of that version, or a module left without
            matching bytecode.
    """
    python = runtime_python(version)
    subprocess.run(  # noqa: S603 (an interpreter path, no shell)
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(directory),
        ],
        check=False,  # a module of a dependency that does not compile is checked below
    )
    check(directory, version, magic_number(python))


def check(directory: Path, version: str, magic: bytes) -> None:
    """Every module under ``directory`` has bytecode for ``version`` starting ``magic``.

    Raises:
        BytecodeError: naming the first few modules that do not.
    """
    wrong = []
    for source in sorted(directory.rglob("*.py")):
        compiled = compiled_path(source, version)
        if not compiled.is_file() or compiled.read_bytes()[:4] != magic:
            wrong.append(str(source.relative_to(directory)))
    if wrong:
        raise BytecodeError(
            f"{len(wrong)} module(s) without Python {version} bytecode: {', '.join(wrong[:5])}"
        )
