"""What the local stack's child processes share: readiness files and quiet signals."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from types import FrameType
from typing import NoReturn


class Stop(Exception):
    """Raised in the main thread by SIGTERM/SIGINT: leave cleanly, no traceback."""


def install_stop_signals() -> None:
    def stop(signum: int, frame: FrameType | None) -> None:
        raise Stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def exit_with_parent(interval: float = 0.5) -> None:
    """Leave when the supervisor is gone (killed, or stopped without stopping us):
    an orphaned front door would hold its port, an orphaned worker its queue."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        quiet_exit()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def announce_ready(path: str | None) -> None:
    """Write this process's pid to ``path`` (atomically): the supervisor polls for it."""
    if not path:
        return
    target = Path(path)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(str(os.getpid()))
    temporary.replace(target)


# The last line a child writes to its log when it refuses to start; the supervisor
# reports it as the stack's reason.
REFUSAL_PREFIX = "refused to start: "
REFUSED_EXIT_STATUS = 3


def refuse_start(reason: str) -> NoReturn:
    """Say why this child cannot serve (one line, for the supervisor) and exit."""
    print(REFUSAL_PREFIX + " ".join(reason.split()), file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(REFUSED_EXIT_STATUS)


def refusal_in(log_file: Path) -> str | None:
    """The reason a child gave for refusing to start, from the end of its log."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    last = lines[-1] if lines else ""
    return last.removeprefix(REFUSAL_PREFIX) if last.startswith(REFUSAL_PREFIX) else None


def quiet_exit() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


_FUNCTION_ARN_PREFIX = "arn:aws:lambda:us-east-1:123456789012:function:"


class LambdaContext:
    """The part of Lambda's context object the handlers and Powertools read."""

    def __init__(
        self, function_name: str, *, memory_mb: int = 512, remaining_ms: int = 60_000
    ) -> None:
        self.function_name = function_name
        self._remaining_ms = remaining_ms
        self.memory_limit_in_mb = memory_mb
        self.invoked_function_arn = _FUNCTION_ARN_PREFIX + function_name
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms
