"""Each function's memory size (MiB; CPU scales with it), apart from the CDK so the cost
model reads the deployed figures. The worker's is a setting (``worker_memory_mb``)."""

from __future__ import annotations

from typing import Final

DEFAULT_MEMORY_MB: Final = 256
RECEIVER_MEMORY_MB: Final = 512
RELAY_MEMORY_MB: Final = DEFAULT_MEMORY_MB
RECONCILER_MEMORY_MB: Final = DEFAULT_MEMORY_MB
