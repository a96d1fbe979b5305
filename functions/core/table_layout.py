"""The table's layout (single-table design; see docs/architecture.md).

Key schema, record kinds, the state index and TTLs: one definition shared by the
adapters that write the items, the CDK table, the local emulator and the tests.
Standard library only.
"""

from __future__ import annotations

from typing import Final

TABLE_PARTITION_KEY: Final = "pk"  # the delivery id
TABLE_SORT_KEY: Final = "sk"  # which record of the delivery, see SK_*
TTL_ATTRIBUTE: Final = "expires_at"  # epoch seconds; DynamoDB TTL
KIND_ATTRIBUTE: Final = "kind"  # the stream filter reads this

SK_INBOX: Final = "inbox"
SK_OUTBOX: Final = "outbox"
SK_QUARANTINE_PREFIX: Final = "quarantine#"  # + digest of the conflicting body
SK_EFFECT_PREFIX: Final = "effect#"  # + effect name

KIND_INBOX: Final = "inbox"
KIND_OUTBOX: Final = "outbox"
KIND_QUARANTINE: Final = "quarantine"
KIND_EFFECT: Final = "effect"

# A sparse, keys-only global secondary index of "what an operator or the reconciler
# lists", each record under a label: inbox items by where they are in their life (open =
# pending or processing, failed, completed, ignored), quarantine records and intents of
# effects that cannot be repeated blindly. Each label is its own set of shards, so the
# reconciler reads only open work and a bulk requeue only failed work, while the console
# and ``inbox list`` can still list (and count) completed deliveries without a Scan.
# The happy path writes one index entry at the receipt and moves it once, to
# ``completed``, at the completion; no write in between touches an index key
# (docs/cost.md). Keys only: a listing reads the items themselves (consistently) by
# key, and no update of a non-key attribute (claim, touch, release) rewrites an entry.
# The partition key is sharded so that no single GSI partition takes every write.
STATE_INDEX: Final = "listing"
STATE_INDEX_PARTITION_KEY: Final = "state_shard"  # f"{label}#{shard:02d}"
STATE_INDEX_SORT_KEY: Final = "listed_at"  # epoch seconds (number): when it entered the label
STATE_INDEX_SHARDS: Final = 8
STATE_INDEX_PROJECTION: Final = "KEYS_ONLY"
STATE_LABEL_OPEN: Final = "open"  # inbox items pending or processing
STATE_LABEL_FAILED: Final = "failed"  # inbox items failed
STATE_LABEL_COMPLETED: Final = "completed"  # inbox items completed, since their completion
# Inbox items acknowledged without processing (ping, unknown event): their own label, so
# the completed label counts only work done (the console's throughput line).
STATE_LABEL_IGNORED: Final = "ignored"
STATE_LABEL_EFFECT_INTENT: Final = "effect_intent"  # index label of an effect in doubt

# Outbox records only need to live as long as the stream that carries them (24 h).
OUTBOX_TTL_SECONDS: Final = 24 * 3600
