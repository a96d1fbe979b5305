"""Fault injection: DynamoDB requests refused at a settable rate before moto sees them
(the caller learns of a failure that wrote nothing, as DynamoDB promises)."""

from __future__ import annotations

import random
import threading
from collections import Counter
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


class FaultInjector:
    """Decides, with a seeded generator, which DynamoDB requests fail, and counts them."""

    def __init__(self, *, rate: float = 0.0, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._random = random.Random(seed)  # noqa: S311 (reproducible faults, not secrets)
        self._rate = rate
        self._counts: Counter[str] = Counter()
        self._delays: dict[str, list[tuple[float, str | None]]] = {}
        self._losses: dict[str, list[str | None]] = {}

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

    def delays_pending(self, operation: str) -> bool:
        with self._lock:
            return bool(self._delays.get(operation) or self._losses.get(operation))

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
