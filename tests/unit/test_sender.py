"""The RelayLink simulator's logic, on httpx's in-memory transport (no sockets)."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Callable, Coroutine

import httpx
import pytest

from functions.core.signature import SigningSecret, read_headers, verify
from local.sender import (
    CONNECTION_ERROR,
    TIMEOUT,
    Delivery,
    DeliveryResult,
    Sender,
    SenderConfig,
    contract_schedule,
    deliveries_of_package,
    forged_secret,
    signed_headers,
)
from local.testkit.builders import OTHER_SECRET, SECRET

URL = "http://receiver.test/relaylink"
MCP = "http://127.0.0.1:9/mcp"
CANONICAL_UUID = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
)

Handler = Callable[[httpx.Request], Coroutine[None, None, httpx.Response]]


def config(**overrides: object) -> SenderConfig:
    values: dict[str, object] = {
        "url": URL,
        "secrets": (SECRET,),
        "timeout_seconds": 5.0,
        "schedule": (30.0, 120.0),
        "time_scale": 1.0,
    }
    values.update(overrides)
    return SenderConfig(**values)  # type: ignore[arg-type]


class Recorder:
    """Answers from a script (status codes, or an exception to raise) and keeps the requests."""

    def __init__(self, *answers: int | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if self.answers else 202
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer)


class Sleeps:
    """Records back-off waits instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def run_delivery(
    handler: Handler,
    delivery: Delivery,
    *,
    sleeps: Sleeps | None = None,
    clock: Callable[[], float] | None = None,
    **overrides: object,
) -> DeliveryResult:
    async def go() -> DeliveryResult:
        kwargs: dict[str, object] = {"transport": httpx.MockTransport(handler)}
        kwargs["sleep"] = sleeps or Sleeps()
        if clock is not None:
            kwargs["clock"] = clock
        async with Sender(config(**overrides), **kwargs) as sender:  # type: ignore[arg-type]
            return await sender.deliver(delivery)

    return asyncio.run(go())


def test_contract_schedule_is_the_contracts_back_off_within_three_days() -> None:
    schedule = contract_schedule()
    assert schedule[:5] == (30.0, 120.0, 600.0, 3600.0, 21600.0)
    assert set(schedule[5:]) == {43200.0}
    assert sum(schedule) <= 3 * 24 * 3600 < sum(schedule) + 43200
    assert len(schedule) + 1 == 11  # attempts


def test_new_delivery_body_has_the_contract_fields_and_a_canonical_id() -> None:
    delivery = Delivery.new(mcp_url=MCP, receiver_id="rcv_x", rng=random.Random(1))
    body = json.loads(delivery.body)
    assert CANONICAL_UUID.match(delivery.delivery_id)
    assert body["delivery_id"] == delivery.delivery_id
    assert body["event"] == "package.received"
    assert re.fullmatch(r"pkg_[0-9A-HJKMNP-TV-Z]{20}", body["package_id"])
    assert body["package_id"] == delivery.package_id
    assert body["mcp_url"] == MCP
    assert body["receiver_id"] == "rcv_x"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["created_at"])
    assert b" " not in delivery.body  # compact, as serialized once


def test_ping_body_has_only_the_common_fields() -> None:
    delivery = Delivery.new(event="ping")
    assert set(json.loads(delivery.body)) == {"delivery_id", "event", "created_at"}
    assert delivery.package_id is None


def test_package_prefix_and_seed_make_package_ids_repeatable() -> None:
    first = Delivery.new(rng=random.Random(7), package_prefix="pkg_missing_")
    second = Delivery.new(rng=random.Random(7), package_prefix="pkg_missing_")
    assert first.package_id == second.package_id
    assert first.package_id is not None and first.package_id.startswith("pkg_missing_")
    assert first.delivery_id != second.delivery_id  # ids stay fresh


def test_conflicting_delivery_keeps_the_id_and_changes_the_bytes() -> None:
    delivery = Delivery.new()
    other = delivery.conflicting()
    assert other.delivery_id == delivery.delivery_id
    assert other.body != delivery.body
    changed = delivery.conflicting(package_id="pkg_other")
    assert changed.package_id == "pkg_other"
    assert json.loads(changed.body)["delivery_id"] == delivery.delivery_id


def test_deliveries_of_one_package_have_their_own_ids() -> None:
    deliveries = deliveries_of_package("pkg_same", 3)
    assert {d.package_id for d in deliveries} == {"pkg_same"}
    assert len({d.delivery_id for d in deliveries}) == 3


def test_signed_headers_carry_one_v1_entry_per_secret_each_verifying() -> None:
    delivery = Delivery.new()
    headers = signed_headers(
        delivery, secrets=[SECRET, OTHER_SECRET], timestamp=1_700_000_000, attempt=3
    )
    entries = headers["X-RelayLink-Signature"].split(" ")
    assert len(entries) == 2 and all(e.startswith("v1,") for e in entries)
    assert headers["X-RelayLink-Attempt"] == "3"
    assert headers["User-Agent"] == "RelayLink/1.0"
    assert headers["Content-Type"] == "application/json"
    for secret, entry in zip((SECRET, OTHER_SECRET), entries, strict=True):
        signed = read_headers(
            delivery_id=headers["X-RelayLink-Delivery"],
            timestamp=headers["X-RelayLink-Timestamp"],
            signature=entry,
            now=1_700_000_000,
        )
        verify(signed, delivery.body, [SigningSecret.parse(secret)])


def test_retries_after_failures_with_scaled_delays_then_stops_at_2xx() -> None:
    recorder = Recorder(503, 429, 200)
    sleeps = Sleeps()
    result = run_delivery(recorder, Delivery.new(), sleeps=sleeps, time_scale=10.0)
    assert [a.answer for a in result.attempts] == ["503", "429", "200"]
    assert sleeps.delays == [3.0, 12.0]
    assert result.acknowledged and not result.gave_up
    assert result.final_answer == "200"
    assert [r.headers["x-relaylink-attempt"] for r in recorder.requests] == ["1", "2", "3"]


def test_each_attempt_gets_the_clocks_time_and_its_own_signature() -> None:
    recorder = Recorder(500, 500, 202)
    ticks = iter([1_700_000_000.0, 1_700_000_030.0, 1_700_000_150.0])
    delivery = Delivery.new()
    result = run_delivery(recorder, delivery, clock=lambda: next(ticks))
    assert result.acknowledged
    stamps = [r.headers["x-relaylink-timestamp"] for r in recorder.requests]
    assert stamps == ["1700000000", "1700000030", "1700000150"]
    assert len({r.headers["x-relaylink-signature"] for r in recorder.requests}) == 3
    assert {r.content for r in recorder.requests} == {delivery.body}


def test_gives_up_when_the_schedule_runs_out() -> None:
    recorder = Recorder(503, 503, 503, 503)
    result = run_delivery(recorder, Delivery.new(), schedule=(1.0, 1.0))
    assert len(result.attempts) == 3
    assert result.gave_up and not result.acknowledged
    assert result.final_answer == "503"


def test_connection_error_and_timeout_are_answers_that_retry() -> None:
    never = asyncio.Event()

    class Stalling(Recorder):
        async def __call__(self, request: httpx.Request) -> httpx.Response:
            if not self.requests:
                self.requests.append(request)
                await never.wait()  # cancelled by the sender's answer deadline
            return await super().__call__(request)

    recorder = Stalling(httpx.ConnectError("refused"), 202)
    result = run_delivery(recorder, Delivery.new(), timeout_seconds=0.05)
    assert [a.answer for a in result.attempts] == [TIMEOUT, CONNECTION_ERROR, "202"]
    assert result.attempts[0].status is None


def test_overlapping_duplicate_starts_before_the_first_attempt_is_answered() -> None:
    both_in_flight = asyncio.Event()
    seen: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["x-relaylink-attempt"])
        if len(seen) == 2:
            both_in_flight.set()
        await asyncio.wait_for(both_in_flight.wait(), timeout=5)
        return httpx.Response(202)

    async def go() -> DeliveryResult:
        async with Sender(config(), transport=httpx.MockTransport(handler)) as sender:
            return await sender.deliver(Delivery.new(), duplicate=True, overlap=True)

    result = asyncio.run(go())
    assert sorted(seen) == ["1", "2"]
    assert [a.extra for a in result.attempts] == [False, True]
    assert result.acknowledged


def test_duplicate_after_acknowledgement_is_one_extra_attempt() -> None:
    recorder = Recorder(503, 202, 202)

    async def go() -> DeliveryResult:
        sender = Sender(config(), transport=httpx.MockTransport(recorder), sleep=Sleeps())
        async with sender:
            return await sender.deliver(Delivery.new(), duplicate=True)

    result = asyncio.run(go())
    assert [(a.answer, a.extra) for a in result.attempts] == [
        ("503", False),
        ("202", False),
        ("202", True),
    ]


def test_duplicate_rate_picks_exactly_that_fraction() -> None:
    recorder = Recorder()

    async def go() -> object:
        cfg = config(duplicate_rate=0.3, seed=4, concurrency=5)
        async with Sender(cfg, transport=httpx.MockTransport(recorder)) as sender:
            return await sender.send_new(40, mcp_url=MCP)

    summary = asyncio.run(go())
    assert summary.deliveries == 40  # type: ignore[attr-defined]
    assert summary.extra_attempts == 12  # type: ignore[attr-defined]
    assert len(recorder.requests) == 52
    data = summary.to_dict()  # type: ignore[attr-defined]
    assert data["answers"] == {"202": 52}
    assert data["acknowledged"] == 40 and data["gave_up"] == 0
    assert sum(r["extra_attempts"] for r in data["results"]) == 12


def test_forged_secret_and_stale_timestamp_hooks_change_only_what_they_say() -> None:
    recorder = Recorder(401, 401)
    delivery = Delivery.new()

    async def go() -> None:
        async with Sender(config(), transport=httpx.MockTransport(recorder)) as sender:
            forged = await sender.attempt(delivery, secrets=[forged_secret()])
            assert forged.answer == "401"
            stale = await sender.attempt(delivery, timestamp=1_000)
            replay = await sender.resend(stale, delivery)
            assert replay.headers == stale.headers

    asyncio.run(go())
    forged_request, stale_request, replayed = recorder.requests
    legit = signed_headers(
        delivery,
        secrets=[SECRET],
        timestamp=int(forged_request.headers["x-relaylink-timestamp"]),
        attempt=1,
    )
    assert forged_request.headers["x-relaylink-signature"] != legit["X-RelayLink-Signature"]
    assert stale_request.headers["x-relaylink-timestamp"] == "1000"
    assert (
        replayed.headers["x-relaylink-signature"] == stale_request.headers["x-relaylink-signature"]
    )
    assert replayed.content == stale_request.content == delivery.body


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"secrets": ()}, "at least one signing secret"),
        ({"secrets": ("nope",)}, "whsec_ prefix"),
        ({"time_scale": 0.0}, "time_scale"),
        ({"duplicate_rate": 1.5}, "duplicate_rate"),
        ({"concurrency": 0}, "concurrency"),
    ],
)
def test_config_refuses_bad_values(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config(**overrides)


@pytest.mark.parametrize(
    "swallowed_as", [httpx.ConnectError("cancelled"), httpx.ReadTimeout("cancelled")]
)
def test_a_cancellation_the_transport_turns_into_an_error_still_stops_the_sender(
    swallowed_as: Exception,
) -> None:
    # Ctrl-C under asyncio.run cancels the sending task; a transport that catches the
    # cancellation inside its connect and raises its own error must not make the
    # sender go on retrying (a ``send`` that ignored Ctrl-C until it gave up).
    entered = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise swallowed_as from None
        raise AssertionError("never answered")

    async def go() -> DeliveryResult:
        sender = Sender(config(), transport=httpx.MockTransport(handler), sleep=Sleeps())
        async with sender:
            task = asyncio.create_task(sender.deliver(Delivery.new()))
            await entered.wait()
            task.cancel()
            return await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
