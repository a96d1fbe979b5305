"""The bench's lean client writes what RelayLink writes: the production receiver, behind
the local front door, accepts each of its requests, and refuses one signed with another
secret; at once on a connection each, or a few in flight on kept-alive connections."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench import lean_client
from functions.receiver import handler
from local import front_door
from local.sender import Delivery
from local.stack import generate_signing_secret
from tests.receiver_harness import Receiver


class _CountingServer(front_door._BurstServer):
    connections = 0

    def get_request(self) -> Any:
        type(self).connections += 1
        return super().get_request()


@pytest.fixture
def door_url() -> Iterator[str]:
    door = front_door.door_for(handler.lambda_handler)
    # One invocation at a time: moto in this process is not safe for concurrent writes.
    door.invocations = threading.BoundedSemaphore(1)
    _CountingServer.connections = 0
    server = _CountingServer(("127.0.0.1", 0), door)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/relaylink"
    finally:
        server.shutdown()
        server.server_close()


def test_every_lean_first_attempt_is_accepted_and_a_forged_one_refused(
    receiver_factory: Any, door_url: str
) -> None:
    secret = generate_signing_secret()
    now = int(time.time())
    receiver: Receiver = receiver_factory([secret], now=now)
    rng = random.Random(7)
    deliveries = [Delivery.new(rng=rng) for _ in range(30)]
    requests = [lean_client.request_bytes(door_url, d, (secret,), now) for d in deliveries]
    forged = lean_client.request_bytes(
        door_url, Delivery.new(rng=rng), (generate_signing_secret(),), now
    )

    answers = lean_client.all_at_once(door_url, [*requests, forged], timeout=10.0)

    assert [a.status for a in answers] == [202] * len(deliveries) + [401]
    assert receiver.work_items() == len(deliveries)
    assert all(0 < a.seconds < 10.0 for a in answers)


def test_requests_in_flight_share_kept_alive_connections_and_a_forged_one_is_refused(
    receiver_factory: Any, door_url: str
) -> None:
    secret = generate_signing_secret()
    now = int(time.time())
    receiver: Receiver = receiver_factory([secret], now=now)
    rng = random.Random(8)
    deliveries = [Delivery.new(rng=rng) for _ in range(30)]
    requests = [
        lean_client.request_bytes(door_url, d, (secret,), now, keep_alive=True) for d in deliveries
    ]
    forged = lean_client.request_bytes(
        door_url, Delivery.new(rng=rng), (generate_signing_secret(),), now, keep_alive=True
    )

    answers = lean_client.in_flight(door_url, [*requests[:15], forged, *requests[15:]], 3, 10.0)

    assert [a.status for a in answers] == [202] * 15 + [401] + [202] * 15
    assert receiver.work_items() == len(deliveries)
    assert _CountingServer.connections == 3  # one per slot, kept alive throughout
    assert all(0 < a.seconds < 10.0 for a in answers)
