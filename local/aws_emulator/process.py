"""The emulator in its own process: started, reached over its control path, stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from local.aws_emulator.gate import ACCESS_KEY_ENV, CONTROL_PATH, EmulatorCredentials

READY_SECONDS = 60.0
START_ATTEMPTS = 3
STOP_SECONDS = 5.0
# "" in the repository, "relaylink_receiver." when installed from the wheel: what stands
# before this module's own three names.
_PREFIX = "".join(f"{part}." for part in __name__.split(".")[:-3])


class EmulatorControls:
    """An emulator in another process, over :data:`CONTROL_PATH`: its fault injector's
    ``set_rate``/``delay_next``/``counts`` (as :class:`FaultInjector`'s), and ``calls``."""

    def __init__(self, endpoint_url: str, access_key_id: str | None = None) -> None:
        self._url = endpoint_url + CONTROL_PATH
        self._headers = (
            {"Authorization": f"AWS4-HMAC-SHA256 Credential={access_key_id}/control"}
            if access_key_id
            else {}
        )

    def set_rate(self, rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError("fault rate must be between 0 and 1")
        self._send({"rate": rate})

    def delay_next(
        self, operation: str, seconds: float, *, count: int = 1, containing: str | None = None
    ) -> None:
        delay = {"operation": operation, "seconds": seconds, "count": count}
        self._send({"delay": {**delay, "containing": containing}})

    def lose_next(self, operation: str, *, containing: str | None = None) -> None:
        self._send({"lose": {"operation": operation, "containing": containing}})

    def hold_next(self, operation: str, containing: Sequence[str], seconds: float) -> None:
        hold = {"operation": operation, "containing": list(containing), "seconds": seconds}
        self._send({"hold": hold})

    def clear_holds(self) -> None:
        self._send({"clear_holds": True})

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = self._send(None)["counts"]
        return counts

    def calls(self) -> dict[str, int]:
        """Requests moto has served, per operation (``Query``, ``SendMessage``, ...)."""
        calls: dict[str, int] = self._send(None)["calls"]
        return calls

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds spent answering requests, per operation (see :meth:`calls`): from
        the WSGI call to its answer, so HTTP parsing and writing are left out."""
        cpu: dict[str, float] = self._send(None)["cpu_seconds"]
        return cpu

    def lock_seconds(self) -> dict[str, dict[str, float]]:
        """Seconds requests have ``waited`` for the one-at-a-time lock and ``held`` it,
        each per operation (see :meth:`calls`)."""
        lock: dict[str, dict[str, float]] = self._send(None)["lock_seconds"]
        return lock

    def _send(self, command: dict[str, Any] | None) -> dict[str, Any]:
        data = None if command is None else json.dumps(command).encode()
        request = urllib.request.Request(  # noqa: S310 (loopback only)
            self._url, data=data, headers=self._headers
        )
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            answered: dict[str, Any] = json.load(answer)
        return answered


class AwsEmulatorProcess:
    """The emulator in a child process of its own; stops with its parent.

    ``start()`` returns once it serves; ``faults`` controls it; ``pid`` and
    ``cpu_seconds()`` are for the benchmarks' accounting.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        log_file: Path | None = None,
        credentials: EmulatorCredentials | None = None,
    ) -> None:
        """``credentials``: what its callers sign with (None: a fresh pair); it admits
        no other key id."""
        self.credentials = credentials or EmulatorCredentials.generate()
        self._seed = seed
        self._log_file = log_file
        self._process: subprocess.Popen[bytes] | None = None
        self._port = 0
        self.faults = EmulatorControls("http://127.0.0.1:0")

    @property
    def endpoint_url(self) -> str:
        if self._process is None:
            raise RuntimeError("the emulator is not running")
        return f"http://127.0.0.1:{self._port}"

    @property
    def pid(self) -> int:
        return self._process.pid if self._process is not None else 0

    def start(self) -> None:
        # A port probed free can be taken before the emulator binds it (another stack
        # starting at the same moment): an emulator that exits before it is ready is
        # started again on another port.
        for _ in range(START_ATTEMPTS):
            if self._spawn():
                break
        else:
            raise RuntimeError("the AWS emulator did not start")
        self.faults = EmulatorControls(self.endpoint_url, self.credentials.access_key_id)

    def _spawn(self) -> bool:
        """One emulator process on a probed port; False if it exited before it was ready."""
        self._port = free_port()
        ready = Path(tempfile.mkdtemp(prefix="relaylink-aws-")) / "ready"
        log = self._log_file.open("ab") if self._log_file else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    f"{_PREFIX}local.aws_emulator",
                    "--port",
                    str(self._port),
                    "--seed",
                    str(self._seed),
                    "--ready-file",
                    str(ready),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, ACCESS_KEY_ENV: self.credentials.access_key_id},
                start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor only
            )
        finally:
            if not isinstance(log, int):
                log.close()
        deadline = time.monotonic() + READY_SECONDS
        while not ready.exists():
            if self._process.poll() is not None:
                self._process = None
                shutil.rmtree(ready.parent, ignore_errors=True)
                return False
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the AWS emulator did not start")
            time.sleep(0.02)
        ready.unlink()
        ready.parent.rmdir()
        return True

    def calls(self) -> dict[str, int]:
        """Requests moto has served, per operation."""
        return self.faults.calls()

    def cpu_seconds(self) -> float:
        """User + system CPU time the emulator process has used so far."""
        return process_cpu_seconds(self.pid)

    def cpu_seconds_by_operation(self) -> dict[str, float]:
        """CPU time spent answering requests so far, per operation (the rest of
        :meth:`cpu_seconds` is its HTTP server's)."""
        return self.faults.cpu_seconds()

    def lock_seconds_by_operation(self) -> dict[str, dict[str, float]]:
        """Seconds requests have waited for the emulator's lock and held it so far, per
        operation (see :meth:`EmulatorControls.lock_seconds`)."""
        return self.faults.lock_seconds()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    """A loopback port free at this moment (nothing holds it for the caller)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux ``/proc``; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # After the command: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
