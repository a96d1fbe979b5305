"""How long a receipt rides out DynamoDB throttling before the receiver answers 503.

botocore retries a throttled single request itself (three attempts, from 50 ms), but
not a transaction cancelled for throttling, and its attempts end within a few hundred
milliseconds: a burst that outlasts them would get 503s that RelayLink retries later,
each one a receipt the inbox exists to take now. The receipt's transaction is retried
with full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter") while the
receiver's time budget lasts: RelayLink waits 10 s for an answer (docs/contract.md,
Retries and timing), the receiver's Lambda 8 s, and a retry is started only if it could
still be answered well inside both.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

# The first retry waits up to this, each later one up to twice as long, capped.
BASE_SECONDS: Final = 0.025
CAP_SECONDS: Final = 0.4
# No retry starts later than this after the first attempt: its own bounded attempts
# (botocore's, see the receiver's client config) still end before the Lambda's timeout.
BUDGET_SECONDS: Final = 3.0


@dataclass(frozen=True, slots=True)
class StorageRetry:
    """Jittered, exponentially growing waits between attempts, within a time budget.

    Attributes:
        budget_seconds: No wait ends later than this after :meth:`waits` started.
        on_retry: Called before each retry (the receiver counts them as a metric).
        sleep, monotonic, jitter: The clock and randomness (tests pass their own).
    """

    budget_seconds: float = BUDGET_SECONDS
    base_seconds: float = BASE_SECONDS
    cap_seconds: float = CAP_SECONDS
    on_retry: Callable[[], None] = lambda: None
    sleep: Callable[[float], None] = field(default=time.sleep)
    monotonic: Callable[[], float] = field(default=time.monotonic)
    jitter: Callable[[float, float], float] = field(default=random.uniform)

    def waits(self) -> Iterator[None]:
        """Each step waits before one more attempt; the steps end with the budget."""
        ends_at = self.monotonic() + self.budget_seconds
        for retry in range(64):
            delay = self.jitter(0.0, min(self.cap_seconds, self.base_seconds * 2**retry))
            if self.monotonic() + delay > ends_at:
                return
            self.on_retry()
            self.sleep(delay)
            yield
