"""The RelayLink simulator as a library: deliveries, signed attempts, retries, duplicates.

It behaves as RelayLink does (docs/contract.md, Deliveries and attempts): a body is
serialized once; every attempt sends those exact bytes with its own timestamp and
signature (one ``v1,`` entry per secret, for rotation); any non-2xx answer, a
connection error or no answer within the answer timeout (10 s) is retried on the
contract's back-off schedule, compressed by ``time_scale``. An abandoned attempt is
not waited for, so the receiver may still be working on it while the retry arrives.

``relaylink-receiver send`` (``local/commands/send.py``), the demo, chaos and the
benchmarks drive it. The core is asyncio on one pooled ``httpx.AsyncClient``;
:func:`send_all` and :func:`send_one` are blocking wrappers.

Hooks for adversarial scenarios: :meth:`Delivery.conflicting` (same id, other bytes),
:meth:`Sender.attempt` with ``secrets=`` (a forged signature, see
:func:`forged_secret`) or ``timestamp=`` (a stale one), :meth:`Sender.resend` (a
byte-for-byte replay of an earlier attempt) and :func:`deliveries_of_package`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import random
import secrets as secrets_module
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

import httpx

from functions.core.models import EVENT_PACKAGE_RECEIVED, EVENT_PING
from functions.core.signature import SigningSecret, sign

USER_AGENT: Final = "RelayLink/1.0"
DEFAULT_TIMEOUT_SECONDS: Final = 10.0  # docs/contract.md, Retries and timing
DEFAULT_MCP_URL: Final = "https://mcp.relaylink.example/mcp"
DEFAULT_RECEIVER_ID: Final = "rcv_local"
DEFAULT_PACKAGE_PREFIX: Final = "pkg_"
HORIZON_SECONDS: Final = 3 * 24 * 3600
# docs/contract.md, Retries and timing: about 30 s, 2 min, 10 min, 1 h, 6 h, then every 12 h.
_FIRST_DELAYS: Final = (30.0, 120.0, 600.0, 3600.0, 6 * 3600.0)
_LATER_DELAY: Final = 12 * 3600.0
# Crockford base32, as in the contract's example package id (a ULID-like suffix).
_ID_ALPHABET: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Labels of answers that are not an HTTP status.
TIMEOUT: Final = "timeout"
CONNECTION_ERROR: Final = "connection_error"


def contract_schedule(horizon_seconds: float = HORIZON_SECONDS) -> tuple[float, ...]:
    """The delays (seconds) before each retry, while the retry stays within the horizon.

    With the contract's 3 days: 30 s, 2 min, 10 min, 1 h, 6 h, then 12 h five times,
    i.e. at most 11 attempts, the last about 67 h after the first.
    """
    delays: list[float] = []
    elapsed = 0.0
    for delay in itertools.chain(_FIRST_DELAYS, itertools.repeat(_LATER_DELAY)):
        if elapsed + delay > horizon_seconds:
            break
        delays.append(delay)
        elapsed += delay
    return tuple(delays)


def new_package_id(rng: random.Random, prefix: str = DEFAULT_PACKAGE_PREFIX) -> str:
    """``prefix`` + 20 random Crockford base32 characters."""
    return prefix + "".join(rng.choice(_ID_ALPHABET) for _ in range(20))


def forged_secret() -> str:
    """A well-formed ``whsec_`` secret that the receiver does not know (a forger's)."""
    return "whsec_" + base64.b64encode(secrets_module.token_bytes(32)).decode()


def _utc_now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def serialize_body(fields: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON: how RelayLink serializes a body, once per delivery."""
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery: an id and the body bytes every attempt sends unchanged."""

    delivery_id: str
    body: bytes = field(repr=False)
    event: str = EVENT_PACKAGE_RECEIVED
    package_id: str | None = None

    @classmethod
    def new(
        cls,
        *,
        mcp_url: str = DEFAULT_MCP_URL,
        receiver_id: str = DEFAULT_RECEIVER_ID,
        package_id: str | None = None,
        event: str = EVENT_PACKAGE_RECEIVED,
        rng: random.Random | None = None,
        package_prefix: str = DEFAULT_PACKAGE_PREFIX,
        delivery_id: str | None = None,
        created_at: str | None = None,
        **extra: Any,
    ) -> Delivery:
        """A fresh delivery (uuid4 id) with its body serialized now.

        ``package.received`` gets a package id (``package_prefix`` + random unless
        given), ``mcp_url`` and ``receiver_id``; ``ping`` only the three common
        fields. ``extra`` fields are added to the body (unknown fields are allowed).
        """
        delivery_id = delivery_id or str(uuid.uuid4())
        fields: dict[str, Any] = {
            "delivery_id": delivery_id,
            "event": event,
            "created_at": created_at or _utc_now_text(),
        }
        if event != EVENT_PING:
            package_id = package_id or new_package_id(rng or random.Random(), package_prefix)  # noqa: S311 (test data)
            fields.update(package_id=package_id, mcp_url=mcp_url, receiver_id=receiver_id)
        else:
            package_id = None
        fields.update(extra)
        return cls(delivery_id, serialize_body(fields), event, package_id)

    def conflicting(self, **changes: Any) -> Delivery:
        """Same delivery id, other body bytes (a contract violation or a forgery).

        ``changes`` replace or add body fields; by default a ``conflict`` marker is added.
        """
        fields = json.loads(self.body)
        fields.update(changes or {"conflict": uuid.uuid4().hex})
        package_id = fields.get("package_id")
        return replace(
            self,
            body=serialize_body(fields),
            package_id=package_id if isinstance(package_id, str) else None,
        )


def deliveries_of_package(
    package_id: str, count: int, *, mcp_url: str = DEFAULT_MCP_URL, **kwargs: Any
) -> list[Delivery]:
    """``count`` distinct deliveries (own ids) of one package.

    Each is accepted on its own (docs/contract.md, Deliveries and attempts).
    """
    return [Delivery.new(package_id=package_id, mcp_url=mcp_url, **kwargs) for _ in range(count)]


def signed_headers(
    delivery: Delivery, *, secrets: Sequence[str], timestamp: int, attempt: int
) -> dict[str, str]:
    """The request headers of one attempt (docs/contract.md, Headers)."""
    stamp = str(timestamp)
    keys = [SigningSecret.parse(s) for s in secrets]
    signature = " ".join(
        sign(key, delivery_id=delivery.delivery_id, timestamp=stamp, body=delivery.body)
        for key in keys
    )
    return {
        "Content-Type": "application/json",
        "X-RelayLink-Delivery": delivery.delivery_id,
        "X-RelayLink-Event": delivery.event,
        "X-RelayLink-Timestamp": stamp,
        "X-RelayLink-Signature": signature,
        "X-RelayLink-Attempt": str(attempt),
        "User-Agent": USER_AGENT,
    }


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """One HTTP attempt and what came back.

    ``answer`` is the status code as text (``"202"``), ``"timeout"`` or
    ``"connection_error"``. ``headers`` are those sent (they hold signatures, never
    a secret) so that a test can replay the attempt with :meth:`Sender.resend`.
    """

    number: int
    answer: str
    status: int | None
    started_at: float  # time.monotonic()
    elapsed_seconds: float
    extra: bool = False  # a RelayLink-side duplicate sent on top of the schedule
    headers: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def acknowledged(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(slots=True)
class DeliveryResult:
    """Every attempt of one delivery and how it ended."""

    delivery: Delivery
    attempts: list[AttemptResult] = field(default_factory=list)
    gave_up: bool = False

    @property
    def delivery_id(self) -> str:
        return self.delivery.delivery_id

    @property
    def package_id(self) -> str | None:
        return self.delivery.package_id

    @property
    def acknowledged(self) -> bool:
        return any(a.acknowledged for a in self.attempts)

    @property
    def final_answer(self) -> str | None:
        """The acknowledging answer if any, else the last one."""
        for a in self.attempts:
            if a.acknowledged:
                return a.answer
        return self.attempts[-1].answer if self.attempts else None

    @property
    def answers(self) -> Counter[str]:
        return Counter(a.answer for a in self.attempts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivery_id": self.delivery_id,
            "package_id": self.package_id,
            "attempts": len(self.attempts),
            "answers": dict(sorted(self.answers.items())),
            "final_answer": self.final_answer,
            "acknowledged": self.acknowledged,
            "gave_up": self.gave_up,
            "extra_attempts": sum(1 for a in self.attempts if a.extra),
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """Totals over a run, plus every delivery's result."""

    results: tuple[DeliveryResult, ...]
    elapsed_seconds: float

    @property
    def deliveries(self) -> int:
        return len(self.results)

    @property
    def attempts(self) -> int:
        return sum(len(r.attempts) for r in self.results)

    @property
    def answers(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.answers)
        return total

    @property
    def acknowledged(self) -> int:
        return sum(1 for r in self.results if r.acknowledged)

    @property
    def gave_up(self) -> int:
        return sum(1 for r in self.results if r.gave_up)

    @property
    def extra_attempts(self) -> int:
        return sum(1 for r in self.results for a in r.attempts if a.extra)

    @property
    def all_acknowledged(self) -> bool:
        return self.acknowledged == self.deliveries

    def to_dict(self, *, with_results: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "deliveries": self.deliveries,
            "attempts": self.attempts,
            "answers": dict(sorted(self.answers.items())),
            "acknowledged": self.acknowledged,
            "gave_up": self.gave_up,
            "extra_attempts": self.extra_attempts,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
        }
        if with_results:
            data["results"] = [r.to_dict() for r in self.results]
        return data


@dataclass(frozen=True, slots=True)
class SenderConfig:
    """How the simulated RelayLink behaves.

    Attributes:
        url: the receiver URL (may hold a secret path token: never logged or printed).
        secrets: the active ``whsec_`` secrets; one ``v1`` entry each.
        timeout_seconds: how long an attempt waits for an answer (real time).
        time_scale: divides every back-off delay (1000: 30 s becomes 30 ms).
        schedule: delays before each retry, in contract seconds (before scaling).
        concurrency: deliveries in flight at once.
        duplicate_rate: fraction of deliveries that get one extra attempt, half of
            them alongside the first attempt (overlapping), half after the first 2xx.
        seed: makes duplicate selection and package ids repeatable (delivery ids
            stay fresh uuid4s: a rerun must not collide with an earlier run's ids).
    """

    url: str
    secrets: tuple[str, ...]
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    time_scale: float = 1.0
    schedule: tuple[float, ...] = field(default_factory=contract_schedule)
    concurrency: int = 10
    duplicate_rate: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ValueError("at least one signing secret is needed")
        for text in self.secrets:
            SigningSecret.parse(text)  # raises ValueError without echoing the secret
        if self.time_scale <= 0:
            raise ValueError("time_scale must be positive")
        if self.timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not 0.0 <= self.duplicate_rate <= 1.0:
            raise ValueError("duplicate_rate must be between 0 and 1")


ProgressCallback = Callable[[DeliveryResult], None]


def _raise_if_cancelling() -> None:
    """A cancellation (Ctrl-C under ``asyncio.run``) that arrived inside the request
    may come out of the transport as a connection error; it still ends the sender,
    never an attempt to retry."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Sender:
    """Sends deliveries as RelayLink does. Use as ``async with Sender(config) as s:``."""

    def __init__(
        self,
        config: SenderConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_attempt: Callable[[AttemptResult], None] | None = None,
    ) -> None:
        """Args:
        config: the behaviour.
        transport: an httpx transport (tests pass ``httpx.MockTransport``).
        clock: wall-clock seconds for the attempt timestamps.
        sleep: how back-off waits (tests may record delays instead of waiting).
        on_attempt: called with every attempt's result as it ends (``send`` says
            at the first failure that nothing answers).
        """
        self.config = config
        self._on_attempt = on_attempt
        self._clock = clock
        self._sleep = sleep
        self._rng = random.Random(config.seed)  # noqa: S311 (seeded simulation, not crypto)
        # Overlapping attempts may need two connections per delivery in flight.
        limits = httpx.Limits(
            max_connections=2 * config.concurrency + 2,
            max_keepalive_connections=2 * config.concurrency + 2,
        )
        self._client = httpx.AsyncClient(
            transport=transport,
            limits=limits,
            # The whole-answer deadline is enforced around each request below; the
            # pool wait must not count against it.
            timeout=httpx.Timeout(config.timeout_seconds, pool=None),
        )

    async def __aenter__(self) -> Sender:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    def new_delivery(self, **kwargs: Any) -> Delivery:
        """:meth:`Delivery.new` with this sender's random source (``seed``)."""
        kwargs.setdefault("rng", self._rng)
        return Delivery.new(**kwargs)

    # --- single attempts (the hooks) ---------------------------------------------

    async def attempt(
        self,
        delivery: Delivery,
        *,
        number: int = 1,
        timestamp: int | None = None,
        secrets: Sequence[str] | None = None,
        extra: bool = False,
    ) -> AttemptResult:
        """One signed POST. ``timestamp`` (default now) and ``secrets`` (default the
        configured ones) can be overridden for stale or forged attempts."""
        headers = signed_headers(
            delivery,
            secrets=self.config.secrets if secrets is None else secrets,
            timestamp=int(self._clock()) if timestamp is None else timestamp,
            attempt=number,
        )
        return await self.post(headers, delivery.body, number=number, extra=extra)

    async def resend(self, earlier: AttemptResult, delivery: Delivery) -> AttemptResult:
        """Replay an earlier attempt byte for byte (same headers, same signature)."""
        return await self.post(dict(earlier.headers), delivery.body, number=earlier.number)

    async def post(
        self, headers: dict[str, str], body: bytes, *, number: int = 1, extra: bool = False
    ) -> AttemptResult:
        """POST exactly these headers and bytes; no answer in time is ``"timeout"``."""
        started = time.monotonic()
        status: int | None = None
        try:
            async with asyncio.timeout(self.config.timeout_seconds):
                response = await self._client.post(self.config.url, content=body, headers=headers)
            status = response.status_code
            answer = str(status)
        except (TimeoutError, httpx.TimeoutException):
            _raise_if_cancelling()
            # Cancelling the request closes its connection: nothing waits for the old
            # attempt any more, while the receiver may still be running it.
            answer = TIMEOUT
        except httpx.TransportError:
            _raise_if_cancelling()
            answer = CONNECTION_ERROR
        result = AttemptResult(
            number=number,
            answer=answer,
            status=status,
            started_at=started,
            elapsed_seconds=time.monotonic() - started,
            extra=extra,
            headers=headers,
        )
        if self._on_attempt is not None:
            self._on_attempt(result)
        return result

    # --- whole deliveries ---------------------------------------------------------

    async def deliver(
        self, delivery: Delivery, *, duplicate: bool = False, overlap: bool = False
    ) -> DeliveryResult:
        """Attempt until a 2xx or the schedule runs out.

        Args:
            duplicate: add one extra attempt (a RelayLink-side duplicate): after the
                first 2xx, or, with ``overlap``, at the same time as the first attempt.
        """
        result = DeliveryResult(delivery)
        numbers = iter(range(1, 1_000_000))
        side: asyncio.Task[AttemptResult] | None = None
        first = next(numbers)
        if duplicate and overlap:
            side = asyncio.create_task(self.attempt(delivery, number=next(numbers), extra=True))
        delays = iter(self.config.schedule)
        number = first
        try:
            while True:
                attempt = await self.attempt(delivery, number=number)
                result.attempts.append(attempt)
                if attempt.acknowledged:
                    break
                if side is not None and side.done() and side.result().acknowledged:
                    break  # the overlapping duplicate was acknowledged: delivered
                delay = next(delays, None)
                if delay is None:
                    result.gave_up = True
                    break
                await self._sleep(delay / self.config.time_scale)
                number = next(numbers)
            if side is not None:
                result.attempts.append(await side)
                side = None
                if result.gave_up and result.acknowledged:
                    result.gave_up = False
            elif duplicate and result.acknowledged:
                result.attempts.append(
                    await self.attempt(delivery, number=next(numbers), extra=True)
                )
        finally:
            if side is not None:
                side.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await side
        result.attempts.sort(key=lambda a: a.number)
        return result

    async def deliver_many(
        self, deliveries: Iterable[Delivery], *, progress: ProgressCallback | None = None
    ) -> Summary:
        """Deliver each, ``concurrency`` at a time; ``duplicate_rate`` picks the
        duplicated ones (exactly that fraction, rounded) with the seeded random source."""
        items = list(deliveries)
        chosen = set(
            self._rng.sample(range(len(items)), round(self.config.duplicate_rate * len(items)))
        )
        overlapping = {i for i in chosen if self._rng.random() < 0.5}
        gate = asyncio.Semaphore(self.config.concurrency)
        started = time.monotonic()

        async def one(index: int, delivery: Delivery) -> DeliveryResult:
            async with gate:
                result = await self.deliver(
                    delivery, duplicate=index in chosen, overlap=index in overlapping
                )
            if progress is not None:
                progress(result)
            return result

        results = await asyncio.gather(*(one(i, d) for i, d in enumerate(items)))
        return Summary(tuple(results), time.monotonic() - started)

    async def send_new(
        self,
        count: int,
        *,
        mcp_url: str = DEFAULT_MCP_URL,
        receiver_id: str = DEFAULT_RECEIVER_ID,
        package_prefix: str = DEFAULT_PACKAGE_PREFIX,
        progress: ProgressCallback | None = None,
    ) -> Summary:
        """``count`` fresh ``package.received`` deliveries (what ``send`` does)."""
        deliveries = [
            self.new_delivery(
                mcp_url=mcp_url, receiver_id=receiver_id, package_prefix=package_prefix
            )
            for _ in range(count)
        ]
        return await self.deliver_many(deliveries, progress=progress)


def send_all(
    config: SenderConfig,
    deliveries: Iterable[Delivery],
    *,
    progress: ProgressCallback | None = None,
) -> Summary:
    """Blocking: deliver every delivery with a fresh :class:`Sender`."""

    async def run() -> Summary:
        async with Sender(config) as sender:
            return await sender.deliver_many(deliveries, progress=progress)

    return asyncio.run(run())


def send_one(
    config: SenderConfig, delivery: Delivery, *, duplicate: bool = False, overlap: bool = False
) -> DeliveryResult:
    """Blocking: one delivery through its whole schedule."""

    async def run() -> DeliveryResult:
        async with Sender(config) as sender:
            return await sender.deliver(delivery, duplicate=duplicate, overlap=overlap)

    return asyncio.run(run())
