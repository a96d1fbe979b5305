"""Variables that more than one function reads, declared once so each reads them alike."""

from __future__ import annotations

from typing import Final

from functions.core import env_keys, setting_defaults, table_layout
from functions.core.settings_env import BoundedInteger

# The worker holds a claim this long; the reconciler must wait longer before it treats
# an effect in doubt as abandoned, so both read the one value.
LEASE_SECONDS: Final = BoundedInteger(
    env_keys.ENV_LEASE_SECONDS,
    default=setting_defaults.DEFAULT_LEASE_SECONDS,
    low=2,
    high=12 * 3600,
)
# The received log's partitions: the receiver writes that many, the reconciler reads at
# least that many (table_layout).
RECEIVED_LOG_SHARDS: Final = BoundedInteger(
    env_keys.ENV_RECEIVED_LOG_SHARDS,
    default=table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
    low=1,
    high=table_layout.MAX_RECEIVED_LOG_SHARDS,
)
# RelayLink retries for up to 3 days (docs/contract.md, Retries and timing): an inbox
# item that expired earlier would let a late retry be accepted a second time.
MIN_RETENTION_DAYS: Final = 4
# How long an inbox item and its receipt live (their TTL): the receiver stamps it, the
# reconciler reads no receipt older than it.
INBOX_RETENTION_DAYS: Final = BoundedInteger(
    env_keys.ENV_INBOX_RETENTION_DAYS,
    default=setting_defaults.DEFAULT_INBOX_RETENTION_DAYS,
    low=MIN_RETENTION_DAYS,
    high=3650,
)
# How long a cached secret (signing secrets, MCP token) is used before it is read again.
SECRETS_MAX_AGE_SECONDS: Final = BoundedInteger(
    env_keys.ENV_SECRETS_MAX_AGE_SECONDS,
    default=setting_defaults.DEFAULT_SECRETS_MAX_AGE_SECONDS,
    low=1,
    high=3600,
)
