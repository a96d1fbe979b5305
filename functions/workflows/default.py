"""The shipped workflow: archive the package, then notify once.

A receiver that only needs "keep every package and tell a system about it" can keep
this as it is (``WORKFLOW`` unset). It shows the two kinds of effect a workflow has:

* ``archive``: a put of ``packages/<delivery_id>.json`` to S3. Repeating it writes
  the same bytes to the same key, so it is declared repeatable.
* ``notify``: one HTTP POST to ``NOTIFY_URL`` with ``Idempotency-Key:
  <delivery_id>:notify``. It is not repeatable, so it has a reconcile check
  (``GET <NOTIFY_URL>/<key>``) that a retry asks when an earlier attempt's outcome
  is unknown.

The workflow takes its archive and notifier as ports; :mod:`functions.workflows.wiring`
builds it on S3 and HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from functions.core.effects import EffectLedger
    from functions.core.models import WorkItem
    from functions.core.package import Package

ARCHIVE_EFFECT = "archive"
NOTIFY_EFFECT = "notify"


class Archive(Protocol):
    def put(self, key: str, body: bytes, *, content_type: str = "application/json") -> None: ...


class Notifier(Protocol):
    def notify(self, payload: Mapping[str, object], *, idempotency_key: str) -> None: ...

    def was_applied(self, idempotency_key: str) -> bool: ...


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


class DefaultWorkflow:
    """Archive, then notify: both through the effect ledger."""

    def __init__(self, *, archive: Archive, notifier: Notifier) -> None:
        self._archive = archive
        self._notifier = notifier

    def run(self, work: WorkItem, package: Package, effects: EffectLedger) -> None:
        key = archive_key(work.delivery_id)
        document = package_document(work, package)
        effects.run(
            ARCHIVE_EFFECT,
            lambda _key: self._archive.put(key, document),
            repeatable=True,
        )
        payload = {
            "delivery_id": work.delivery_id,
            "event": work.event,
            "package_id": work.package_id,
            "title": package.title,
            "archive_key": key,
        }
        effects.run(
            NOTIFY_EFFECT,
            lambda idempotency_key: self._notifier.notify(payload, idempotency_key=idempotency_key),
            reconcile=self._notifier.was_applied,
        )
