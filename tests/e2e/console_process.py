"""``relaylink-receiver console`` as the operator starts it: a subprocess and its first line."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.polling import poll

FIRST_LINE = re.compile(r"^console (http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]+)$")
DEADLINE_SECONDS = 30.0


@contextmanager
def console(state_file: Path, output: Path, *extra: str) -> Iterator[str]:
    """Start the console on a local stack; yields the URL of its first line; stops it."""
    with output.open("wb") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "console", "--local", str(state_file), *extra],
            stdout=stdout,
            stderr=subprocess.STDOUT,
        )
    try:
        text = poll(
            lambda: output.read_text(encoding="utf-8"),
            lambda text: "\n" in text or process.poll() is not None,
            deadline_seconds=DEADLINE_SECONDS,
        )
        first = text.splitlines()[0] if text else ""
        matched = FIRST_LINE.match(first)
        assert matched, f"the console's first line is not its URL: {first!r}"
        yield matched.group(1)
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE_SECONDS)
