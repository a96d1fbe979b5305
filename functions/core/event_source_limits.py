"""The event-source mappings' limits (the CDK stack's; the local runtime emulates the same).

Standard library only.
"""

from __future__ import annotations

from typing import Final

RELAY_BATCH_SIZE: Final = 10
# Bounded: a record that still fails after this goes to the failure queue (metadata
# only) and the reconciler re-enqueues its pending inbox item from the table.
RELAY_RETRY_ATTEMPTS: Final = 10
RELAY_MAX_RECORD_AGE_SECONDS: Final = 6 * 3600
WORKER_BATCH_SIZE: Final = 10
# AWS: a queue's visibility timeout should be at least six times the function's timeout
# (plus the event-source mapping's batching window, which infra/worker.py adds)
# (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
VISIBILITY_TIMEOUT_FACTOR: Final = 6
