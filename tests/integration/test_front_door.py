"""The local front door: requests beyond its concurrent invocations wait for one."""

from __future__ import annotations

import http.client
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from local import front_door
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
