"""The archive workflow: keep every package in S3, nothing else.

The default for a bare deployment: it needs nothing outside the stack. Its one effect,
``archive``, is a put of ``packages/<delivery_id>.json``; repeating it writes the same
bytes to the same key, so its outcome mode is ``repeatable``: whatever the answer, a
retry puts again, and the effect is never in doubt. What an answer proves
(:mod:`functions.core.adapters.archive_s3`): stored -> applied; throttled, 5xx,
timeout, connection lost -> ``TransientError`` (``archive_unavailable``), put again
later; access denied, no such bucket -> ``Rejected`` (``archive_rejected``), the
delivery fails visibly. The other shipped workflows archive the same way first
(:func:`archive_package`).
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
    """Archive the package; the delivery completes once it is stored."""

    def __init__(self, *, archive: Archive) -> None:
        self._archive = archive

    def run(self, work: WorkItem, package: Package, effects: Ledger) -> None:
        archive_package(self._archive, work, package, effects)
