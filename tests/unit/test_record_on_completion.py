"""A workflow without effects has its package recorded by its completion's own write:
one write fewer per delivery, and every guarantee of the record kept."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from functions.core.claim import Claim, ClaimLost
from functions.core.models import State, WorkItem
from functions.core.package import Package
from functions.core.package_record import PackageRecorder, PackageStorage
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.workflow import Ledger, has_effects
from functions.core.process import Result
from functions.workflows.archive import ArchiveWorkflow
from tests.fakes import FakePackageRecords
from tests.unit.test_package_record import (
    ChangingPackages,
    processed,
    stale_and_holder,
    version,
)
from tests.unit.test_process import LEASE, World, work


class Killed(BaseException):
    """The worker dies (a Lambda timeout): nothing after it runs, nothing is caught."""


@dataclass
class Quiet:
    """A workflow without effects that sees every package, and may act on a run."""

    has_effects = False
    titles: list[str] = field(default_factory=list)
    on_run: list[object] = field(default_factory=list)

    def run(self, work: WorkItem, package: Package, effects: Ledger) -> None:
        self.titles.append(package.title)
        if self.on_run:
            action = self.on_run.pop(0)
            assert callable(action)
            action()


class CountingRecords(FakePackageRecords):
    """Counts the package record's own writes (the path with effects makes one)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def record(
        self, claim: Claim, record: PackageRecord, *, expires_at: int
    ) -> PackageRecord | None:
        self.writes += 1
        return super().record(claim, record, expires_at=expires_at)


def counted(world: World) -> CountingRecords:
    world.package_records = CountingRecords()
    return world.package_records


def test_archive_declares_no_effects_and_a_workflow_has_them_unless_it_says_so() -> None:
    assert not has_effects(ArchiveWorkflow())
    assert has_effects(World().workflow)


def test_the_completion_writes_the_record_and_no_write_comes_before_the_run() -> None:
    world = World()
    world.accept(work())
    quiet = Quiet()
    world.workflow = quiet  # type: ignore[assignment]
    records = counted(world)
    assert processed(world, ChangingPackages()).result is Result.COMPLETED
    assert records.writes == 0
    record = world.package_records.get(work().delivery_id)
    first = version(work().package_id, 1)
    assert record is not None and record.digest == first.digest()
    assert world.state(work()).state is State.COMPLETED
    assert quiet.titles == [first.title]


def test_a_workflow_with_effects_still_records_before_it_runs() -> None:
    world = World()
    world.accept(work())
    records = counted(world)
    assert processed(world, world.packages).result is Result.COMPLETED
    assert records.writes == 1


def test_a_lost_answer_on_the_combined_completion_leaves_it_done_with_its_record() -> None:
    world = World()
    world.accept(work())
    # The next write to commit is the completion: it commits, its answer is lost.
    quiet = Quiet(on_run=[world.claims.table.client.lose_next])
    world.workflow = quiet  # type: ignore[assignment]
    records = counted(world)
    server = ChangingPackages()
    first = processed(world, server)
    assert records.writes == 0  # the lost answer was the completion's, record and all
    # The release that follows the unknown outcome finds the item completed.
    assert first.result is Result.CLAIM_LOST
    assert processed(world, server).result is Result.ALREADY_DONE
    assert server.calls == [work().package_id]
    assert quiet.titles == [version(work().package_id, 1).title]
    record = world.package_records.get(work().delivery_id)
    assert record is not None and record.digest == version(work().package_id, 1).digest()


def test_a_crash_after_the_fetch_leaves_no_record_and_the_next_attempt_fetches_again() -> None:
    world = World()
    world.accept(work())

    def die() -> None:
        raise Killed()

    quiet = Quiet(on_run=[die])
    world.workflow = quiet  # type: ignore[assignment]
    server = ChangingPackages()
    try:
        processed(world, server)
    except Killed:
        pass
    else:
        raise AssertionError("the attempt was not killed")
    assert world.package_records.get(work().delivery_id) is None
    world.clock.advance(LEASE)  # its lease runs out
    assert processed(world, server).result is Result.COMPLETED
    assert server.calls == [work().package_id] * 2
    second = version(work().package_id, 2)
    record = world.package_records.get(work().delivery_id)
    # One record: the package the completing attempt ran on.
    assert record is not None and record.digest == second.digest()
    assert quiet.titles[-1] == second.title


def test_an_attempt_whose_lease_ran_out_neither_completes_nor_records() -> None:
    world = World()
    world.accept(work())
    recorder = PackageRecorder(PackageStorage(world.package_records), clock=world.clock)
    stale, _ = stale_and_holder(world)
    _, record = asyncio.run(recorder.unrecorded(stale, work(), ChangingPackages()))
    assert record is not None
    try:
        world.claims.complete(stale, now=world.clock.value + LEASE, package=record)
    except ClaimLost:
        pass
    else:
        raise AssertionError("the stale attempt completed")
    assert world.package_records.get(work().delivery_id) is None
    assert world.state(work()).state is State.PROCESSING
    assert world.claims.owners[work().delivery_id] == "b"
