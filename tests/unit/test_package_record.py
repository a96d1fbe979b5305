"""A delivery's package is recorded once and every attempt runs on it; the claimed inbox
item, not the queue message, says which package that is."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from functions.core import metric_names
from functions.core.claim import Claim, ClaimLost
from functions.core.errors import TransientError
from functions.core.models import State, WorkItem
from functions.core.package import Package
from functions.core.package_record import RECORD_UNKNOWN, PackageRecorder, PackageStorage
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.steps import StoredResult
from functions.core.ports.workflow import Ledger
from functions.core.process import WORK_ITEM_MISMATCH, Decision, Disposition, Result
from functions.core.steps import result_object_key
from local.testkit.clock import FakeClock
from tests.unit.test_process import LEASE, World, package_of, work


@dataclass
class ChangingPackages:
    """An MCP server whose package changes after its first fetch (title and briefing)."""

    calls: list[str] = field(default_factory=list)

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        self.calls.append(package_id)
        return version(package_id, 1 if len(self.calls) == 1 else 2)


def version(package_id: str, n: int) -> Package:
    if n > 1:
        return package_of(package_id, title="Totally different title", briefing="Wire funds.")
    return package_of(package_id)


@dataclass
class SeeingWorkflow:
    """Keeps the title of every package it is handed; ``failures`` attempts end transient."""

    titles: list[str] = field(default_factory=list)
    failures: int = 0

    def run(self, work: WorkItem, package: Package, effects: Ledger) -> None:
        self.titles.append(package.title)
        if self.failures:
            self.failures -= 1
            raise TransientError("model_unavailable")


def processed(world: World, source: Any, item: WorkItem | None = None) -> Decision:
    return asyncio.run(world.processor().process(item or work(), source))


def test_a_resumed_attempt_runs_on_the_recorded_package_and_fetches_nothing() -> None:
    world = World()
    world.accept(work())
    seeing = SeeingWorkflow(failures=1)
    world.workflow = seeing  # type: ignore[assignment]
    server = ChangingPackages()
    assert processed(world, server).result is Result.RETRYING
    world.clock.advance(LEASE)
    assert processed(world, server).result is Result.COMPLETED
    first = version(work().package_id, 1)
    assert seeing.titles == [first.title, first.title]
    assert server.calls == [work().package_id]  # one fetch for the delivery
    record = world.package_records.get(work().delivery_id)
    assert record is not None
    assert (record.digest, record.refetched_digest) == (first.digest(), None)


def test_a_large_package_is_kept_as_an_object_and_read_back_from_it() -> None:
    world = World()
    world.accept(work())
    seeing = SeeingWorkflow(failures=1)
    world.workflow = seeing  # type: ignore[assignment]
    big = dataclasses.replace(version(work().package_id, 1), briefing="x" * 100_000)

    class Big:
        calls = 0

        async def get_package(self, mcp_url: str, package_id: str) -> Package:
            Big.calls += 1
            return big

    processed(world, Big())
    processed(world, Big())
    record = world.package_records.get(work().delivery_id)
    assert record is not None and record.content.inline is None  # over the inline limit
    assert world.objects.get(result_object_key(big.digest())) == big.canonical()
    assert Big.calls == 1
    assert seeing.titles == [big.title, big.title]


def test_content_gone_and_a_refetch_of_another_package_fails_package_changed() -> None:
    world = World()
    world.accept(work())
    seeing = SeeingWorkflow(failures=1)
    world.workflow = seeing  # type: ignore[assignment]
    server = ChangingPackages()
    storage = PackageStorage(world.package_records, objects=world.objects, inline_limit=10)
    processor = dataclasses.replace(world.processor(), packages=storage)
    assert asyncio.run(processor.process(work(), server)).result is Result.RETRYING
    world.objects.objects.clear()  # the content is gone; its digest is kept
    world.clock.advance(LEASE)
    decision = asyncio.run(processor.process(work(), server))
    assert decision == Decision(Result.FAILED, Disposition.ACK, 0, "package_changed")
    assert world.state(work()).last_error == "package_changed"
    assert world.metrics.counts[metric_names.METRIC_PACKAGE_CHANGED] == 1
    assert len(seeing.titles) == 1  # nothing ran on the changed package
    record = world.package_records.get(work().delivery_id)
    assert record is not None
    first, second = (version(work().package_id, n).digest() for n in (1, 2))
    assert (record.digest, record.refetched_digest) == (first, second)


def test_content_gone_and_a_refetch_of_the_same_package_runs_and_keeps_it_again() -> None:
    world = World()
    world.accept(work())
    seeing = SeeingWorkflow(failures=1)
    world.workflow = seeing  # type: ignore[assignment]
    storage = PackageStorage(world.package_records, objects=world.objects, inline_limit=10)
    processor = dataclasses.replace(world.processor(), packages=storage)
    assert asyncio.run(processor.process(work(), world.packages)).result is Result.RETRYING
    world.objects.objects.clear()
    world.clock.advance(LEASE)
    assert asyncio.run(processor.process(work(), world.packages)).result is Result.COMPLETED
    assert world.packages.calls == [work().package_id] * 2
    assert len(world.objects.objects) == 1  # its object is back


def test_a_lost_answer_on_the_record_is_an_unknown_outcome_and_the_next_attempt_reads_it() -> None:
    world = World()
    world.accept(work())
    seeing = SeeingWorkflow()
    world.workflow = seeing  # type: ignore[assignment]
    world.package_records.lose_answers = 1  # kept, but the answer never arrives
    server = ChangingPackages()
    decision = processed(world, server)
    # Not "not recorded": nothing runs on it now, and the next attempt learns which.
    assert (decision.result, decision.error_code) == (Result.RETRYING, RECORD_UNKNOWN)
    assert seeing.titles == []
    world.clock.advance(decision.delay_seconds)
    assert processed(world, server).result is Result.COMPLETED
    assert server.calls == [work().package_id]
    assert seeing.titles == [version(work().package_id, 1).title]


def stale_and_holder(world: World) -> tuple[Claim, Claim]:
    """Claim "a", whose lease runs out, then "b", which holds the delivery."""
    now = world.clock.value
    stale = world.claims.claim(work().delivery_id, owner="a", now=now, lease_seconds=LEASE).claim
    later = now + LEASE
    holder = world.claims.claim(work().delivery_id, owner="b", now=later, lease_seconds=LEASE).claim
    assert stale is not None and holder is not None
    return stale, holder


def test_an_attempt_whose_lease_ran_out_records_no_package_over_its_successors() -> None:
    world = World()
    world.accept(work())
    world.package_records.claims = world.claims
    recorder = PackageRecorder(PackageStorage(world.package_records), clock=world.clock)
    stale, holder = stale_and_holder(world)
    server = ChangingPackages()
    try:
        asyncio.run(recorder.package(stale, work(), server))
    except ClaimLost:
        pass
    else:
        raise AssertionError("the stale attempt recorded its package")
    assert world.package_records.get(work().delivery_id) is None
    kept = asyncio.run(recorder.package(holder, work(), server))
    record = world.package_records.get(work().delivery_id)
    assert record is not None and record.recorded_by == "b"
    assert record.digest == kept.digest() == version(work().package_id, 2).digest()


def test_two_overlapping_attempts_run_on_one_package() -> None:
    """While the first attempt's fetch hangs, its lease runs out and a second attempt
    claims, fetches and runs; the first one's answer then comes: it records nothing and
    runs nothing."""
    world = World()
    world.accept(work())
    seeing = SeeingWorkflow()
    world.workflow = seeing  # type: ignore[assignment]
    server = ChangingPackages()
    overlapped: list[Decision] = []

    class Hanging:
        async def get_package(self, mcp_url: str, package_id: str) -> Package:
            fetched = await server.get_package(mcp_url, package_id)
            world.clock.advance(LEASE)
            overlapped.append(await world.processor().process(work(), server))
            return fetched

    first = processed(world, Hanging())
    assert first.result is Result.CLAIM_LOST
    assert [d.result for d in overlapped] == [Result.COMPLETED]
    second = version(work().package_id, 2)
    assert seeing.titles == [second.title]
    record = world.package_records.get(work().delivery_id)
    assert record is not None and record.digest == second.digest()


def test_a_message_naming_another_package_is_refused_and_nothing_is_fetched() -> None:
    world = World()
    world.accept(work())
    forged = dataclasses.replace(work(), package_id="pkg_other")
    decision = processed(world, world.packages, forged)
    assert decision == Decision(Result.REFUSED, Disposition.ACK, 0, WORK_ITEM_MISMATCH)
    assert world.packages.calls == []
    assert world.metrics.counts[metric_names.METRIC_WORK_REFUSED] == 1
    item = world.state(work())
    assert (item.state, item.attempts) == (State.PENDING, 0)  # given back, as never claimed
    # The inbox item's own work item runs, on the inbox item's package.
    assert processed(world, world.packages).result is Result.COMPLETED
    assert world.packages.calls == [work().package_id]


def test_a_message_naming_another_mcp_server_is_refused() -> None:
    world = World()
    world.accept(work())
    forged = dataclasses.replace(work(), mcp_url="https://attacker.example/mcp")
    assert processed(world, world.packages, forged).result is Result.REFUSED
    assert world.packages.calls == []


@dataclass
class CountedRecords:
    """A package record store that counts its reads and keeps what it is given."""

    kept: PackageRecord | None = None
    reads: int = 0

    def get(self, delivery_id: str) -> PackageRecord | None:
        self.reads += 1
        return self.kept

    def record(
        self, claim: Claim, record: PackageRecord, *, expires_at: int
    ) -> PackageRecord | None:
        if self.kept is not None:
            return self.kept
        self.kept = record
        return None

    def record_refetch(self, delivery_id: str, *, digest: str, now: int) -> None:
        raise AssertionError("no refetch expected")


@dataclass
class CountedFetches:
    calls: int = 0

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        self.calls += 1
        return version(package_id, 1)


def claimed(attempts: int, package: PackageRecord | None) -> Claim:
    item = work()
    return Claim(item.delivery_id, "me", 100, attempts, package=package, package_read=True)


def test_the_claims_returned_item_settles_the_record_without_a_second_read() -> None:
    records, source = CountedRecords(), CountedFetches()
    recorder = PackageRecorder(PackageStorage(records), clock=FakeClock(0))
    first = asyncio.run(recorder.package(claimed(1, None), work(), source))
    assert (records.reads, source.calls) == (0, 1)  # a first attempt: nothing to read
    assert records.kept is not None
    again = asyncio.run(recorder.package(claimed(2, records.kept), work(), source))
    assert (records.reads, source.calls) == (0, 1)  # replayed from the claim's item
    assert again == first


def test_a_later_attempt_whose_item_holds_no_record_still_reads_for_an_earlier_one() -> None:
    """An earlier version kept the record on an item of its own: only a read finds it."""
    body = version(work().package_id, 1).canonical()
    earlier = PackageRecord(
        work().delivery_id,
        version(work().package_id, 1).digest(),
        StoredResult(size=len(body), inline=body.decode()),
        recorded_at=0,
        recorded_by="an earlier version",
    )
    records, source = CountedRecords(kept=earlier), CountedFetches()
    recorder = PackageRecorder(PackageStorage(records), clock=FakeClock(0))
    package = asyncio.run(recorder.package(claimed(2, None), work(), source))
    assert (records.reads, source.calls) == (1, 0)
    assert package.digest() == earlier.digest
