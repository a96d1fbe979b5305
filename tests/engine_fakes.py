"""In-memory fakes of the agent workflow's ports: step records, objects, token budget.

Each keeps the state its DynamoDB/S3 adapter keeps (``tests/integration`` checks the
adapters against the same behaviours).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from functions.core.budget import BudgetDay
from functions.core.steps import StepRecord, StepStatus, StoredResult


@dataclass
class FakeSteps:
    records: dict[tuple[str, str], StepRecord] = field(default_factory=dict)

    def get(self, delivery_id: str, name: str) -> StepRecord | None:
        return self.records.get((delivery_id, name))

    def start(self, delivery_id: str, name: str, *, now: int, expires_at: int) -> StepRecord | None:
        before = self.records.get((delivery_id, name))
        if before is not None and before.status is StepStatus.RECORDED:
            return before
        runs = 0 if before is None else before.runs
        self.records[(delivery_id, name)] = StepRecord(
            delivery_id, name, StepStatus.STARTED, runs + 1, now
        )
        return before

    def record_failed(self, delivery_id: str, name: str, *, run: int, now: int) -> bool:
        current = self.records.get((delivery_id, name))
        if current is None or current.status is not StepStatus.STARTED or current.runs != run:
            return False
        self.records[(delivery_id, name)] = dataclasses.replace(current, status=StepStatus.FAILED)
        return True

    def record_result(
        self, delivery_id: str, name: str, *, result: StoredResult, now: int
    ) -> StepRecord | None:
        current = self.records[(delivery_id, name)]
        if current.status is StepStatus.RECORDED:
            return current
        self.records[(delivery_id, name)] = dataclasses.replace(
            current, status=StepStatus.RECORDED, recorded_at=now, result=result
        )
        return None


@dataclass
class FakeObjects:
    objects: dict[str, bytes] = field(default_factory=dict)

    def put(self, key: str, body: bytes) -> None:
        self.objects[key] = body

    def get(self, key: str) -> bytes | None:
        return self.objects.get(key)


@dataclass
class FakeBudget:
    default_limit: int
    configured: int | None = None
    days: dict[str, BudgetDay] = field(default_factory=dict)

    def reserve(self, day: str, tokens: int) -> bool:
        current = self.get(day)
        if current.reserved + tokens > current.limit:
            return False
        self.days[day] = dataclasses.replace(current, reserved=current.reserved + tokens)
        return True

    def settle(self, day: str, *, reserved: int, used: int) -> None:
        current = self.days.get(day)
        if current is not None:
            self.days[day] = dataclasses.replace(
                current, reserved=current.reserved - reserved + used, used=current.used + used
            )

    def set_limit(self, day: str, tokens: int) -> None:
        self.configured = tokens
        self.days[day] = dataclasses.replace(self.get(day), limit=tokens)

    def get(self, day: str) -> BudgetDay:
        limit = self.default_limit if self.configured is None else self.configured
        return self.days.get(day) or BudgetDay(day=day, limit=limit, reserved=0, used=0)
