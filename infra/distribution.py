"""The installed layout: one ``relaylink_receiver`` package holding the five packages.

The repository keeps ``functions``, ``infra``, ``local`` and ``ops`` at its top level,
and every Lambda asset holds ``functions/`` at its root. A wheel that installed them
as they are would claim those generic names in site-packages, so this module is also
the project's build backend (``pyproject.toml``): setuptools builds the wheel, then
:func:`build_wheel` moves the five packages under ``relaylink_receiver/``, rewrites
their absolute imports (and the console script) to match and ships
``constraints.txt`` beside them. An editable install keeps the repository's layout.

Module paths kept as strings (handler names, workflow aliases, the bundler's package
lists) name the Lambda asset's layout and are never rewritten; code that imports a
module by name at run time prefixes it itself (:data:`PREFIX`). The bundler reads
``functions`` from :func:`source_root`, which writes the installed copy back in the
repository's form. Only the standard library here: the build imports this module.
"""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import io
import os
import re
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PACKAGE = "relaylink_receiver"
TOP_LEVEL = ("functions", "infra", "cli", "local", "ops")
# "" in the repository, "relaylink_receiver." when installed from the wheel.
PREFIX = (__package__ or "infra").removesuffix("infra")
INSTALLED = bool(PREFIX)
_HERE = Path(__file__).resolve().parent.parent  # the repository, or relaylink_receiver/
CONSTRAINTS_NAME = "constraints.txt"
# Where an installed copy keeps the pip cache and its repository-form sources.
BUILD_DIR_VARIABLE = "RELAYLINK_RECEIVER_BUILD_DIR"


class LayoutError(ValueError):
    """A source file cannot be moved between the two layouts (an ``import x.y``)."""


def rewrite_imports(source: str, *, old: str, new: str, filename: str = "<source>") -> str:
    """``source`` with each absolute ``from <old>X import`` made ``from <new>X import``.

    ``old``/``new`` are prefixes: ``""`` and ``"relaylink_receiver."`` (into the wheel)
    or the reverse (back to the repository's form). Only the five packages' imports
    move; strings, comments and other imports stay byte for byte.

    Raises:
        LayoutError: a plain ``import functions.x`` (binding ``functions``) cannot move.
    """
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source, filename=filename)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _moves(alias.name, old):
                    raise LayoutError(
                        f"{filename}:{node.lineno}: write 'from ... import ...' instead of "
                        f"'import {alias.name}', so the installed layout can rename it"
                    )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _moves(node.module, old):
            edits.append((node.lineno - 1, node.col_offset, node.module or ""))
    for line_index, column, module in sorted(edits, reverse=True):
        raw = lines[line_index].encode()
        head, tail = raw[:column], raw[column:].decode()
        match = re.match(rf"from(\s+){re.escape(module)}\b", tail)
        if match is None:
            raise LayoutError(f"{filename}:{line_index + 1}: cannot find 'from {module}'")
        renamed = new + module.removeprefix(old)
        tail = f"from{match.group(1)}{renamed}" + tail[match.end() :]
        lines[line_index] = head.decode() + tail
    return "".join(lines)


def _moves(module: str | None, old: str) -> bool:
    if module is None or not module.startswith(old):
        return False
    return module.removeprefix(old).split(".")[0] in TOP_LEVEL


def source_root() -> Path:
    """The folder holding ``functions/`` in the repository's form, for the bundler.

    In the repository it is the repository. Installed, it is a copy of the installed
    ``functions`` with the imports written back, made once per content under
    :func:`build_dir` (a concurrent synth finds a complete copy or makes its own).
    """
    if not INSTALLED:
        return _HERE
    files = sorted(path for path in (_HERE / "functions").rglob("*") if _shipped(path))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(_HERE).as_posix().encode() + b"\0" + path.read_bytes())
    target = build_dir() / "source" / digest.hexdigest()[:16]
    if target.is_dir():
        return target
    staging = target.with_name(f"{target.name}.{os.getpid()}.partial")
    for path in files:
        copy = staging / path.relative_to(_HERE)
        copy.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            text = rewrite_imports(
                path.read_text(encoding="utf-8"), old=PREFIX, new="", filename=str(path)
            )
            copy.write_text(text, encoding="utf-8")
        else:
            shutil.copyfile(path, copy)
    try:
        staging.rename(target)
    except OSError:  # another synth made it first: the same content
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _shipped(path: Path) -> bool:
    return path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"


def build_dir() -> Path:
    """The bundler's cache: ``build/`` in the repository; installed, the folder named by
    ``RELAYLINK_RECEIVER_BUILD_DIR`` or the user's cache (never site-packages)."""
    if not INSTALLED:
        return _HERE / "build"
    named = os.environ.get(BUILD_DIR_VARIABLE)
    if named:
        return Path(named).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "relaylink-receiver"


def constraints_file() -> Path:
    """The pins the Lambda assets are installed under (shipped in the wheel too)."""
    return _HERE / CONSTRAINTS_NAME


# The build backend (PEP 517): setuptools' hooks, the wheel's layout changed after.


def _setuptools() -> Any:
    from setuptools import build_meta  # noqa: PLC0415 (only a build needs setuptools)

    return build_meta


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> Any:
    return _setuptools().get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings: Mapping[str, Any] | None = None) -> Any:
    return _setuptools().get_requires_for_build_sdist(config_settings)


def get_requires_for_build_editable(config_settings: Mapping[str, Any] | None = None) -> Any:
    return _setuptools().get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: Mapping[str, Any] | None = None
) -> Any:
    return _setuptools().prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> Any:
    return _setuptools().build_sdist(sdist_directory, config_settings)


def build_editable(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> Any:
    """The repository's layout as it is: editable installs serve development."""
    return _setuptools().build_editable(wheel_directory, config_settings, metadata_directory)


def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """setuptools' wheel, then the five packages moved under ``relaylink_receiver/``."""
    name: str = _setuptools().build_wheel(wheel_directory, config_settings, metadata_directory)
    relayout_wheel(Path(wheel_directory) / name, constraints=_HERE / CONSTRAINTS_NAME)
    return name


def relayout_wheel(wheel: Path, *, constraints: Path) -> None:
    """Rewrite ``wheel`` in place into the installed layout."""
    with zipfile.ZipFile(wheel) as source:
        entries = {info.filename: source.read(info) for info in source.infolist()}
    dist_info = next(name.split("/")[0] for name in entries if ".dist-info/" in name)
    moved: dict[str, bytes] = {}
    for name, body in entries.items():
        top = name.split("/")[0]
        if top in TOP_LEVEL:
            moved[f"{PACKAGE}/{name}"] = (
                rewrite_imports(body.decode(), old="", new=f"{PACKAGE}.", filename=name).encode()
                if name.endswith(".py")
                else body
            )
        elif name == f"{dist_info}/entry_points.txt":
            moved[name] = re.sub(
                rf"=\s*({'|'.join(TOP_LEVEL)})\.", rf"= {PACKAGE}.\1.", body.decode()
            ).encode()
        elif name == f"{dist_info}/top_level.txt":
            moved[name] = f"{PACKAGE}\n".encode()
        elif name != f"{dist_info}/RECORD":
            moved[name] = body
    moved[f"{PACKAGE}/__init__.py"] = (
        b'"""The RelayLink receiver: functions, infra (RelayLinkReceiver), local, ops."""\n'
    )
    moved[f"{PACKAGE}/{CONSTRAINTS_NAME}"] = constraints.read_bytes()
    record = f"{dist_info}/RECORD"
    rows = [(name, _record_hash(body), str(len(body))) for name, body in sorted(moved.items())]
    listing = io.StringIO()
    csv.writer(listing, lineterminator="\n").writerows([*rows, (record, "", "")])
    moved[record] = listing.getvalue().encode()
    # dist-info last, as the wheel format recommends.
    order = sorted(moved, key=lambda entry: (entry.startswith(dist_info), entry))
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for name in order:
            target.writestr(name, moved[name])


def _record_hash(body: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"
