"""The notify workflow: archive the package, then notify once.

A receiver that only needs "keep every package and tell a system about it" can use
this as it is (``WORKFLOW=notify``). It shows the two kinds of effect a workflow has:

* ``archive``: a put of ``packages/<delivery_id>.json`` to S3. Repeating it writes
  the same bytes to the same key, so it is declared repeatable
  (:mod:`functions.workflows.archive`).
* ``notify``: one HTTP POST to ``NOTIFY_URL`` with ``Idempotency-Key:
  <delivery_id>:notify``. It is not repeatable, so it has a reconcile check
  (``GET <NOTIFY_URL>/<key>``) that a retry asks when an earlier attempt's outcome
  is unknown.

The workflow takes its archive and notifier as ports; :mod:`functions.workflows.wiring`
builds it on S3 and HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Protocol

from functions.workflows.archive import Archive, archive_package

if TYPE_CHECKING:
    from functions.core.effects import EffectLedger
    from functions.core.models import WorkItem
    from functions.core.package import Package

NOTIFY_EFFECT: Final = "notify"


class Notifier(Protocol):
    def notify(self, payload: Mapping[str, object], *, idempotency_key: str) -> None: ...

    def was_applied(self, idempotency_key: str) -> bool: ...


class DefaultWorkflow:
    """Archive, then notify: both through the effect ledger."""

    def __init__(self, *, archive: Archive, notifier: Notifier) -> None:
        self._archive = archive
        self._notifier = notifier

    def run(self, work: WorkItem, package: Package, effects: EffectLedger) -> None:
        key = archive_package(self._archive, work, package, effects)
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
