"""A lean load generator: signed requests written as bytes before the clock starts, sent
on raw asyncio connections.

The RelayLink simulator (``local.sender``, httpx) costs about 3.5 ms of CPU a request:
on 2 cores shared with the stack it measures, that is a third of the CPU a receipt
takes, and its queueing shows in the receiver's latency. This client costs a few tenths
of a millisecond, the same for every side it loads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from local.sender import Delivery, signed_headers


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no answer within the timeout, or no connection
    seconds: float


def request_bytes(
    url: str, delivery: Delivery, secrets: Sequence[str], now: int, *, keep_alive: bool = False
) -> bytes:
    """Attempt 1 of ``delivery`` as RelayLink writes it: signed headers, the exact body."""
    parts = urlsplit(url)
    headers = {
        "Host": parts.netloc,
        "Content-Length": str(len(delivery.body)),
        "Connection": "keep-alive" if keep_alive else "close",
        **signed_headers(delivery, secrets=secrets, timestamp=now, attempt=1),
    }
    head = f"POST {parts.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (head + "\r\n").encode() + delivery.body


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


async def _attempt(host: str, port: int, request: bytes, timeout: float) -> Answer:
    started = time.monotonic()
    status: int | None = None
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            await reader.read()  # the rest of the answer, until the server closes
    except (TimeoutError, OSError, ValueError, IndexError):
        pass  # a timeout, a refused or reset connection, or no status line
    finally:
        if writer is not None:
            writer.close()
    return Answer(status, time.monotonic() - started)


def all_at_once(url: str, requests: list[bytes], timeout: float) -> list[Answer]:
    """Every request at once, each on its own connection (``Connection: close``)."""
    host, port = _address(url)

    async def run() -> list[Answer]:
        return list(await asyncio.gather(*(_attempt(host, port, r, timeout) for r in requests)))

    return asyncio.run(run())


async def _read_answer(reader: asyncio.StreamReader) -> int:
    """One answer off a kept-alive connection: its status (the body read by its length)."""
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


def in_flight(url: str, requests: list[bytes], concurrency: int, timeout: float) -> list[Answer]:
    """The requests in order, ``concurrency`` at a time, each slot on one kept-alive
    connection (requests written with ``keep_alive``); a slot whose connection fails
    records the request unanswered and opens a new one."""
    host, port = _address(url)
    answers: list[Answer | None] = [None] * len(requests)
    next_index = 0

    async def slot() -> None:
        nonlocal next_index
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while next_index < len(requests):
            index, next_index = next_index, next_index + 1
            started = time.monotonic()
            status: int | None = None
            try:
                async with asyncio.timeout(timeout):
                    if connection is None:
                        connection = await asyncio.open_connection(host, port)
                    reader, writer = connection
                    writer.write(requests[index])
                    await writer.drain()
                    status = await _read_answer(reader)
            except (TimeoutError, OSError, ValueError, IndexError, asyncio.IncompleteReadError):
                if connection is not None:
                    connection[1].close()
                connection = None
            answers[index] = Answer(status, time.monotonic() - started)
        if connection is not None:
            connection[1].close()

    async def run() -> None:
        await asyncio.gather(*(slot() for _ in range(concurrency)))

    asyncio.run(run())
    return [a for a in answers if a is not None]
