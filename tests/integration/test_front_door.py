"""The local front door: requests beyond its concurrent invocations wait for one; its
containers serve side by side and never outlive it."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from local import front_door
from local.aws_emulator.process import free_port
from tests.polling import poll


def test_a_burst_runs_no_more_invocations_at_once_than_the_door_has() -> None:
    running = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()

    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(timeout=30)
        with lock:
            running -= 1
        return {"statusCode": 202, "body": "{}"}

    server = front_door._BurstServer(("127.0.0.1", 0), front_door.door_for(invoke))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    def post(_: int) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            connection.request(
                "POST", "/relaylink", body=b"{}", headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    burst = 3 * front_door.CONCURRENT_INVOCATIONS
    try:
        with ThreadPoolExecutor(burst) as pool:
            answers = pool.map(post, range(burst))
            seen = poll(
                lambda: running,
                lambda n: n == front_door.CONCURRENT_INVOCATIONS,
                deadline_seconds=10,
            )
            assert seen == front_door.CONCURRENT_INVOCATIONS
            release.set()
            assert list(answers) == [202] * burst
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    assert most == front_door.CONCURRENT_INVOCATIONS


# A front door whose invocation answers with the pid of the process that ran it.
_PID_DOOR = """
import os, sys
from local.front_door import serve
serve(lambda event, context: {"statusCode": 200, "body": str(os.getpid())},
      port=int(sys.argv[1]), ready_file=sys.argv[2], containers=2)
"""


def _answering_pid(port: int) -> str | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("POST", "/relaylink", body=b"{}")
        return connection.getresponse().read().decode()
    except OSError:
        return None
    finally:
        connection.close()


def test_containers_share_the_port_and_die_with_the_door(tmp_path: Path) -> None:
    port = free_port()
    ready = tmp_path / "ready"
    door = subprocess.Popen(
        [sys.executable, "-c", _PID_DOOR, str(port), str(ready)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert poll(ready.exists, bool, deadline_seconds=30)
        seen: set[str] = set()

        def answer_once_more() -> set[str]:
            if (pid := _answering_pid(port)) is not None:
                seen.add(pid)
            return seen

        poll(answer_once_more, lambda pids: len(pids) >= 2, deadline_seconds=20, pause_seconds=0)
        assert len(seen) == 2, seen  # the door and one forked container
        assert str(door.pid) in seen
        door.send_signal(signal.SIGKILL)  # as chaos kills it: no chance to clean up
        door.wait(timeout=10)
        # The kernel takes the container down with it: nothing answers on the port.
        assert (
            poll(lambda: _answering_pid(port), lambda pid: pid is None, deadline_seconds=10) is None
        )
    finally:
        door.kill()
        door.wait(timeout=10)
