"""One seed's fault schedule: drawn from ``random.Random(seed)``, or replayed from a list.

Live, every call boundary draws once from the schedule's own generator, with the rates of
its kind of boundary (:data:`PORT_WRITE`, :data:`FAR_SIDE`, ...) scaled by the seed's
weather, and keeps what it injected. Replayed (the shrinker's runs), exactly the given
faults are injected, each at its site and call number, and nothing else. The world's
other randomness (latencies, TTL lags, the load) comes from a generator of its own, so
a replay of the full list is the same run as the live one, byte for byte.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Final

from local.simulate.faults import Fault, Kind

Rates = tuple[tuple[Kind, float], ...]

# A DynamoDB write behind a port (the adapters use botocore's standard retries).
PORT_WRITE: Final[Rates] = (
    (Kind.ERROR, 0.01),
    (Kind.LOST_ANSWER, 0.006),
    (Kind.SDK_RETRY, 0.006),
    (Kind.KILL_BEFORE, 0.003),
    (Kind.KILL_AFTER, 0.003),
)
PORT_READ: Final[Rates] = ((Kind.ERROR, 0.01), (Kind.KILL_BEFORE, 0.002))
# An SQS send: lost answers resent by the caller, and SQS's own duplicates.
QUEUE_SEND: Final[Rates] = (
    (Kind.ERROR, 0.01),
    (Kind.LOST_ANSWER, 0.005),
    (Kind.DUPLICATE, 0.03),
    (Kind.KILL_AFTER, 0.003),
)
# A request to the far side of an effect, the model, or the MCP server.
FAR_SIDE: Final[Rates] = (
    (Kind.REFUSED, 0.02),
    (Kind.REJECTED, 0.02),
    (Kind.UNAVAILABLE, 0.03),
    (Kind.ACTED_THEN_FAILED, 0.03),
    (Kind.ACTED_ANSWER_LOST, 0.03),
    (Kind.SLOW, 0.01),
    (Kind.KILL_BEFORE, 0.003),
)
MCP_FETCH: Final[Rates] = (
    (Kind.UNAVAILABLE, 0.03),
    (Kind.REFUSED, 0.01),
    (Kind.SLOW, 0.01),
)
# RelayLink sends a delivery again after it was acknowledged (the contract allows it).
SENDER: Final[Rates] = ((Kind.DUPLICATE, 0.05),)
# After an acknowledged delivery: other bytes under its id (a sender bug, a forger with
# the secret). Drawn from the schedule's second generator (below).
OTHER_BYTES: Final[Rates] = ((Kind.OTHER_BYTES, 0.03),)
# At a worker's read of an effect or step record: it stalls past its lease there and
# the other container runs the delivery meanwhile (the second generator too).
OVERLAP: Final[Rates] = ((Kind.OVERLAP, 0.01),)
# Of those: the other container dies right after its claim, and its lease too runs out
# before the stalled one goes on (a stale attempt then outlives a dead holder).
OVERLAP_HOLDER_DIES: Final[Rates] = ((Kind.KILL_AFTER, 0.5),)
# Per seed: calm, normal or stormy.
WEATHER: Final = (0.3, 1.0, 1.0, 3.0)


class Schedule:
    """The faults of one seed."""

    def __init__(self, seed: int, replay: Sequence[Fault] | None = None) -> None:
        self.seed = seed
        self._rng = random.Random(f"faults:{seed}")  # noqa: S311 (a reproducible simulation)
        # The faults added later draw from a generator of their own, so that adding
        # them moved no other fault of any seed (a seed's findings stay where they were).
        self._later = random.Random(f"faults+:{seed}")  # noqa: S311
        self._replay = None if replay is None else {(f.site, f.call): f for f in replay}
        self._calls: Counter[str] = Counter()
        self.injected: list[Fault] = []
        self.weather = self._rng.choice(WEATHER)
        self._bounds: dict[int, tuple[Rates, tuple[tuple[float, Kind], ...]]] = {}

    @property
    def replaying(self) -> bool:
        return self._replay is not None

    def draw(self, site: str, rates: Rates, *, later: bool = False) -> Fault | None:
        """The fault at the next call of ``site``, if any (one draw per call); ``later``:
        from the second generator."""
        self._calls[site] += 1
        call = self._calls[site]
        if self._replay is not None:
            fault = self._replay.get((site, call))
        else:
            fault = None
            roll = (self._later if later else self._rng).random()
            for total, kind in self._thresholds(rates):
                if roll < total:
                    fault = Fault(site, call, kind)
                    break
        if fault is not None:
            self.injected.append(fault)
        return fault

    def _thresholds(self, rates: Rates) -> tuple[tuple[float, Kind], ...]:
        """Each kind's upper bound for a roll under this weather: the running sums, as a
        draw once added them, kept per rates table (a run draws some 200 times a seed)."""
        kept = self._bounds.get(id(rates))
        if kept is None or kept[0] is not rates:
            total, bounds = 0.0, []
            for kind, rate in rates:
                total += rate * self.weather
                bounds.append((total, kind))
            kept = (rates, tuple(bounds))
            self._bounds[id(rates)] = kept
        return kept[1]

    def choose(
        self, site: str, kind: Kind, probability: float, values: range, *, later: bool = False
    ) -> int:
        """A configuration fault: with ``probability``, one of ``values``; else 0.
        ``later``: drawn from a generator of the site's own, so that a choice added
        later moves no other draw of any seed."""
        self._calls[site] += 1
        rng = self._rng
        if later:
            rng = random.Random(f"config+:{self.seed}:{site}#{self._calls[site]}")  # noqa: S311
        if self._replay is not None:
            fault = self._replay.get((site, self._calls[site]))
        elif rng.random() < probability:
            value = values[rng.randrange(len(values))]
            fault = Fault(site, self._calls[site], kind, value)
        else:
            fault = None
        if fault is None:
            return 0
        self.injected.append(fault)
        return fault.value
