"""The archive workflow: keep every package, nothing else.

The default for a bare deployment: it needs nothing outside the stack. Every delivery's
package is recorded (:mod:`functions.core.package_record`), for this workflow by the
delivery's completion (it declares no effects):
its canonical form and digest on the delivery's inbox item, kept as long as the item
(``inbox_retention_days``), a large one in the archive bucket under its digest. That
record is the archive, so this workflow has no effect of its own and costs no request:
an S3 object per delivery would cost a PUT ($5 per million) for a copy of what the
table already keeps. ``inbox show`` prints it.

The other shipped workflows also put a document per delivery in S3 first
(:func:`archive_package`): a repeatable put of ``packages/<delivery_id>.json``; what
an answer proves is :mod:`functions.core.adapters.archive_s3`'s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final, Protocol

from functions.core.effects import EffectMode

if TYPE_CHECKING:
    from functions.core.models import WorkItem
    from functions.core.package import Package
    from functions.core.ports.workflow import Ledger

ARCHIVE_EFFECT: Final = "archive"


class Archive(Protocol):
    def put(self, key: str, body: bytes, *, content_type: str = "application/json") -> None: ...


def archive_key(delivery_id: str) -> str:
    """One object per delivery, never per package (one package, several deliveries)."""
    return f"packages/{delivery_id}.json"


def package_document(work: WorkItem, package: Package) -> bytes:
    """The archived JSON: the delivery's identity and the whole package."""
    document = {
        "delivery_id": work.delivery_id,
        "event": work.event,
        "mcp_url": work.mcp_url,
        "package": package.to_mapping(),
    }
    return json.dumps(document, sort_keys=True).encode()


def archive_package(archive: Archive, work: WorkItem, package: Package, effects: Ledger) -> str:
    """Put the package document through the ledger; returns its key."""
    key = archive_key(work.delivery_id)
    document = package_document(work, package)
    effects.run(ARCHIVE_EFFECT, lambda _key: archive.put(key, document), mode=EffectMode.REPEATABLE)
    return key


class ArchiveWorkflow:
    """Nothing to do: the package record, written by the completion, is the archive."""

    # Nothing outside the stack: the completion writes the package record too
    # (functions.core.ports.workflow.has_effects).
    has_effects: Final = False

    def run(self, work: WorkItem, package: Package, effects: Ledger) -> None:
        """Complete the delivery: its package is kept on its record already."""
