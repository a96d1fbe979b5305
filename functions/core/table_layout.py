"""The table's layout (single-table design; see docs/architecture.md).

Key schema, record kinds, the state index and TTLs: one definition shared by the
adapters that write the items, the CDK table, the local emulator and the tests.
Standard library only.
"""

from __future__ import annotations

from typing import Final

TABLE_PARTITION_KEY: Final = "pk"  # the delivery id (or a received-log shard, see below)
TABLE_SORT_KEY: Final = "sk"  # which record of the delivery, see SK_*
TTL_ATTRIBUTE: Final = "expires_at"  # epoch seconds; DynamoDB TTL
KIND_ATTRIBUTE: Final = "kind"  # the stream filter reads this

SK_INBOX: Final = "inbox"
SK_QUARANTINE_PREFIX: Final = "quarantine#"  # + digest of the conflicting body
SK_EFFECT_PREFIX: Final = "effect#"  # + effect name
SK_APPROVAL_PREFIX: Final = "approval#"  # + the name of what waits for a person
SK_PACKAGE: Final = "package"  # the package the delivery runs on, recorded once

KIND_INBOX: Final = "inbox"
KIND_OUTBOX: Final = "outbox"
KIND_QUARANTINE: Final = "quarantine"
KIND_EFFECT: Final = "effect"
KIND_APPROVAL: Final = "approval"
KIND_PACKAGE: Final = "package"
# The attributes of an approval record that make a decision: the worker's role may
# write none of them (infra/table_access.py denies it), so code running in the worker
# cannot decide its own parked call.
APPROVAL_DECISION_ATTRIBUTES: Final = (
    "decision",
    "decided_by",
    "decided_at",
    "decision_token",
    "decided_proposal",
)
# What a decision is about: put once with the record and never updated, so the
# worker's role may not update them (an approved record's proposal cannot be swapped).
APPROVAL_PROPOSAL_ATTRIBUTES: Final = ("proposal", "proposal_digest", "proposal_package")

# A sparse, keys-only global secondary index of "what an operator or the reconciler
# lists", each record under a label: inbox items by where they are in their life (open =
# pending or processing, failed, completed, ignored), quarantine records and intents of
# effects that cannot be repeated blindly. Each label is its own set of shards, so the
# reconciler reads only open work and a bulk requeue only failed work, while the console
# and ``inbox list`` can still list (and count) completed deliveries without a Scan.
# The happy path writes one index entry, ``completed``, at the completion: a new open
# item is not listed at its receipt (the received log below stands in for it), and the
# reconciler lists it ``open`` only once it is older than it should still be open, so
# only work that needs attention pays for an ``open`` entry (docs/cost.md). Keys only:
# a listing reads the items themselves (consistently) by key, and no update of a non-key
# attribute (claim, touch, release) rewrites an entry.
# The partition key is sharded so that no single GSI partition takes every write.
STATE_INDEX: Final = "listing"
STATE_INDEX_PARTITION_KEY: Final = "state_shard"  # f"{label}#{shard:02d}"
STATE_INDEX_SORT_KEY: Final = "listed_at"  # epoch seconds (number): when it entered the label
STATE_INDEX_SHARDS: Final = 8
STATE_INDEX_PROJECTION: Final = "KEYS_ONLY"
STATE_LABEL_OPEN: Final = "open"  # inbox items pending or processing, once listed
STATE_LABEL_FAILED: Final = "failed"  # inbox items failed
STATE_LABEL_COMPLETED: Final = "completed"  # inbox items completed, since their completion
# Inbox items acknowledged without processing (ping, unknown event): their own label, so
# the completed label counts only work done (the console's throughput line).
STATE_LABEL_IGNORED: Final = "ignored"
# Inbox items parked for a person's decision: what ``approvals list`` and the reconciler's
# approval timeout read.
STATE_LABEL_AWAITING_APPROVAL: Final = "awaiting_approval"
STATE_LABEL_EFFECT_INTENT: Final = "effect_intent"  # index label of an effect in doubt

# The received log: the outbox record (the receipt's work item, which the stream carries
# to the relay) is keyed by when it was received, so that a Query reads the receipts of
# a time window in order: pk = f"received#{shard:02d}" (crc32 of the delivery id, as the
# index shards), sk = f"{received_at:010d}#{delivery_id}". The reconciler reads it from
# its watermark (one item, below) to list the receipts still open after their age;
# operators read the part after the watermark to see fresh open work. Nothing looks an
# outbox record up by its delivery id.
# How many shards the receiver writes is a deploy setting (``received_log_shards``), only
# ever raised in effect: the reconciler records the count it reads next to its watermark
# (``WATERMARK_SHARDS_*``) and always reads at least as many shards as any run recorded,
# so receipts written under a larger count are still read after a lowered deploy.
RECEIVED_LOG_PREFIX: Final = "received#"
DEFAULT_RECEIVED_LOG_SHARDS: Final = 8
MAX_RECEIVED_LOG_SHARDS: Final = 64  # two digits in the key; a Query each per window
# The reconciler's watermark: every receipt before it that is still open is listed.
WATERMARK_PARTITION: Final = "reconciler"
WATERMARK_SORT_KEY: Final = "received_watermark"
# + the shard's two digits: a shard's own watermark, when a run reads shards side by side
SHARD_WATERMARK_SEPARATOR: Final = "#"
KIND_WATERMARK: Final = "watermark"
WATERMARK_SHARDS_ATTRIBUTE: Final = "received_log_shards"  # read up to the watermark
WATERMARK_SHARDS_SEEN_ATTRIBUTE: Final = "received_log_shards_seen"  # largest deployed
# Where each of the reconciler's passes over a label of the state index resumes (one item
# each beside the watermark): the open items, the uncertain effect intents, the parked
# deliveries.
OPEN_CURSOR_SORT_KEY: Final = "open_cursor"
INTENT_CURSOR_SORT_KEY: Final = "intent_cursor"
WAITING_CURSOR_SORT_KEY: Final = "waiting_cursor"
KIND_CURSOR: Final = "cursor"

# The labels whose keys follow the received log's shard count (listing_keys).
SCALED_LABELS: Final = frozenset({STATE_LABEL_COMPLETED})


def listing_keys(label: str, log_shards: int) -> int:
    """Keys of one label of the state index. The completed label takes an entry for
    every delivery processed, and a key takes ~1,000 writes a second: it has as many keys
    as the received log has shards (``log_shards``: as the worker is deployed when it
    writes, the largest count ever deployed when it is read), never fewer than
    :data:`STATE_INDEX_SHARDS`, so an entry written under any count is under a key every
    reader reads. The other labels take few entries: :data:`STATE_INDEX_SHARDS` keys."""
    if label in SCALED_LABELS:
        return max(STATE_INDEX_SHARDS, log_shards)
    return STATE_INDEX_SHARDS


# Readers of the log look again this far before the watermark: a receipt stamped a little
# earlier than it was written (a clock behind, a slow transaction) is still seen. Read
# twice, it is never listed twice (the listing is conditional).
RECEIVED_LOG_OVERLAP_SECONDS: Final = 30

# Outbox records live as long as their inbox item, not just as long as the stream that
# carries them (24 h): the reconciler reads them as the received log, so a receipt is
# found however long the reconciler was down while its item exists. TTL deletes are free.
