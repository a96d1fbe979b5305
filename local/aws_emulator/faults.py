"""Fault injection: DynamoDB requests refused at a settable rate before moto sees them
(the caller learns of a failure that wrote nothing, as DynamoDB promises)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FAULT_ANSWERS = {
    "throttling": (
        "400 Bad Request",
        "com.amazonaws.dynamodb.v20120810#ThrottlingException",
        "Rate of requests exceeds the allowed throughput.",
    ),
    "internal_error": (
        "500 Internal Server Error",
        "com.amazonaws.dynamodb.v20120810#InternalServerError",
        "Internal server error",
    ),
}


@dataclass(frozen=True, slots=True)
class Hold:
    """A DynamoDB write held until its caller dies (then dropped) or ``seconds`` pass
    (then let through): the moment a kill point SIGKILLs the worker at."""

    operation: str
    containing: tuple[str, ...]  # every one of these is in the request's JSON body
    seconds: float

    def matches(self, operation: str, body: bytes) -> bool:
        return operation == self.operation and all(c.encode() in body for c in self.containing)


class FaultInjector:
    """Decides, with a seeded generator, which DynamoDB requests fail, and counts them."""

    def __init__(self, *, rate: float = 0.0, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._random = random.Random(seed)  # noqa: S311 (reproducible faults, not secrets)
        self._rate = rate
        self._counts: Counter[str] = Counter()
        self._delays: dict[str, list[tuple[float, str | None]]] = {}
        self._losses: dict[str, list[str | None]] = {}
        self._holds: list[Hold] = []

    def delay_next(
        self, operation: str, seconds: float, *, count: int = 1, containing: str | None = None
    ) -> None:
        """Hold the next ``count`` DynamoDB ``operation`` requests ``seconds`` before moto
        sees them (a slow write: the caller may give up while the write still happens);
        with ``containing``, only requests whose JSON body contains that text (a key)."""
        with self._lock:
            self._delays.setdefault(operation, []).extend([(seconds, containing)] * count)

    def lose_next(self, operation: str, *, containing: str | None = None) -> None:
        """Apply the next DynamoDB ``operation`` request (whose JSON body contains
        ``containing``, if given) and answer it ``InternalServerError``: the write
        happened, its answer was lost."""
        with self._lock:
            self._losses.setdefault(operation, []).append(containing)

    def hold_next(self, operation: str, containing: Sequence[str], seconds: float) -> None:
        """Hold the next ``operation`` request whose body has every text of
        ``containing`` until its caller hangs up (it is then dropped, never applied) or
        ``seconds`` pass; ``counts()["held"]`` says how many were taken."""
        with self._lock:
            self._holds.append(Hold(operation, tuple(containing), seconds))

    def clear_holds(self) -> None:
        """Forget the holds no request has taken yet."""
        with self._lock:
            self._holds.clear()

    def hold_for(self, operation: str, body: bytes) -> float:
        """The seconds this request is held (0: none), taking the hold it matches."""
        with self._lock:
            for index, hold in enumerate(self._holds):
                if hold.matches(operation, body):
                    del self._holds[index]
                    self._counts["held"] += 1
                    return hold.seconds
            return 0.0

    def delays_pending(self, operation: str) -> bool:
        with self._lock:
            held = any(hold.operation == operation for hold in self._holds)
            return bool(self._delays.get(operation) or self._losses.get(operation) or held)

    def loses(self, operation: str, body: bytes) -> bool:
        """Whether this request's answer is to be lost (taking it from the pending ones)."""
        with self._lock:
            pending = self._losses.get(operation, [])
            for index, containing in enumerate(pending):
                if containing is None or containing.encode() in body:
                    del pending[index]
                    self._counts["lost_answer"] += 1
                    return True
            return False

    def delay_for(self, operation: str, body: bytes = b"") -> float:
        """The hold for this request (0: none), taking it from the pending ones."""
        with self._lock:
            pending = self._delays.get(operation, [])
            for index, (seconds, containing) in enumerate(pending):
                if containing is None or containing.encode() in body:
                    del pending[index]
                    return seconds
            return 0.0

    def set_rate(self, rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError("fault rate must be between 0 and 1")
        with self._lock:
            self._rate = rate

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def control(self, command: dict[str, Any]) -> None:
        """Apply one command sent to :data:`CONTROL_PATH` (see :class:`EmulatorControls`)."""
        if "rate" in command:
            self.set_rate(float(command["rate"]))
        if "delay" in command:
            delay = command["delay"]
            self.delay_next(
                str(delay["operation"]),
                float(delay["seconds"]),
                count=int(delay.get("count", 1)),
                containing=delay.get("containing"),
            )
        if "hold" in command:
            hold = command["hold"]
            containing = hold["containing"]
            if not isinstance(containing, list):
                raise TypeError("hold.containing must be a list of texts")
            texts = [str(c) for c in containing]
            self.hold_next(str(hold["operation"]), texts, float(hold["seconds"]))
        if command.get("clear_holds"):
            self.clear_holds()
        if "lose" in command:
            lose = command["lose"]
            self.lose_next(str(lose["operation"]), containing=lose.get("containing"))

    def pick(self) -> str | None:
        """The fault for the next DynamoDB request, or None to let it through."""
        with self._lock:
            if self._rate <= 0.0 or self._random.random() >= self._rate:
                return None
            kind = self._random.choice(sorted(FAULT_ANSWERS))
            self._counts[kind] += 1
            return kind
