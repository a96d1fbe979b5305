"""The notify workflow: archive the package, then notify once.

A receiver that only needs "keep every package and tell a system about it" can use
this as it is (``WORKFLOW=notify``). It shows the two kinds of effect a workflow has:

* ``archive``: a put of ``packages/<delivery_id>.json`` to S3. Repeating it writes
  the same bytes to the same key, so it is declared repeatable
  (:mod:`functions.workflows.archive`).
* ``notify``: one HTTP POST to ``NOTIFY_URL`` with ``Idempotency-Key:
  <delivery_id>:notify`` (the URL, a signing secret or both may instead be kept in the
  Secrets Manager secret the setting ``notify_secret_arn`` names; with a signing secret
  the POST is signed as the agent's alert is). It is not repeatable. By default it is
  ``checked``: a retry asks ``GET <NOTIFY_URL>/<key>`` when an earlier attempt's
  outcome is unknown. With the setting ``notify_url_deduplicates=true`` (the endpoint
  drops a second POST with the same key) it is ``keyed``: the retry simply posts again
  with the same key. What each answer proves is listed in
  :mod:`functions.core.adapters.notifier_http`; a definite refusal (a 4xx) fails the
  delivery as ``notify_rejected``, never in doubt.

The workflow takes its archive and notifier as ports; :mod:`functions.workflows.wiring`
builds it on S3 and HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from functions.core.effects import EffectMode
from functions.core.env_parsers import flag, optional
from functions.workflows.archive import Archive, archive_package

if TYPE_CHECKING:
    from functions.core.models import WorkItem
    from functions.core.package import Package
    from functions.core.ports.workflow import Ledger

NOTIFY_EFFECT: Final = "notify"
# The workflow setting: "true" when NOTIFY_URL drops a repeated Idempotency-Key.
SETTING_NOTIFY_URL_DEDUPLICATES: Final = "notify_url_deduplicates"
# The workflow setting: the Secrets Manager secret holding the endpoint's URL, its
# signing secret, or both (docs/workflows.md, "The notify endpoint in a secret").
SETTING_NOTIFY_SECRET_ARN: Final = "notify_secret_arn"  # noqa: S105 (a setting's name)


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """The notify workflow's own settings (``WORKFLOW_SETTINGS``).

    Attributes:
        notify_url_deduplicates: the endpoint drops a repeated ``Idempotency-Key``.
        notify_secret_arn: the secret holding the endpoint's ``url``, its
            ``signing_secret`` (``whsec_...``), or both, or None.
    """

    notify_url_deduplicates: bool = False
    notify_secret_arn: str | None = None

    @property
    def bedrock_model_ids(self) -> tuple[str, ...]:
        return ()

    @property
    def bedrock_guardrail_ids(self) -> tuple[str, ...]:
        return ()

    @property
    def secret_arns(self) -> tuple[str, ...]:
        # The notify secret has a grant of its own, with its key (infra: notify_secret).
        return ()

    @classmethod
    def from_mapping(cls, settings: Mapping[str, str]) -> NotifySettings:
        """Read the settings this workflow knows; others are left to their readers.

        Raises:
            SettingsError: ``notify_url_deduplicates`` is not ``true`` or ``false``.
        """
        return cls(
            notify_url_deduplicates=flag(settings, SETTING_NOTIFY_URL_DEDUPLICATES),
            notify_secret_arn=optional(settings, SETTING_NOTIFY_SECRET_ARN),
        )


class Notifier(Protocol):
    def notify(self, payload: Mapping[str, object], *, idempotency_key: str) -> None: ...

    def was_applied(self, idempotency_key: str) -> bool: ...


class NotifyWorkflow:
    """Archive, then notify: both through the effect ledger.

    ``deduplicates``: the notifier's endpoint drops a repeated key, so the notification
    is ``keyed`` (retried with its key) instead of ``checked`` (looked up first).
    """

    def __init__(self, *, archive: Archive, notifier: Notifier, deduplicates: bool = False) -> None:
        self._archive = archive
        self._notifier = notifier
        self.notify_mode = EffectMode.KEYED if deduplicates else EffectMode.CHECKED

    def run(self, work: WorkItem, package: Package, effects: Ledger) -> None:
        key = archive_package(self._archive, work, package, effects)
        payload = {
            "delivery_id": work.delivery_id,
            "event": work.event,
            "package_id": work.package_id,
            "title": package.title,
            "archive_key": key,
        }
        checked = self.notify_mode is EffectMode.CHECKED
        effects.run(
            NOTIFY_EFFECT,
            lambda idempotency_key: self._notifier.notify(payload, idempotency_key=idempotency_key),
            mode=self.notify_mode,
            reconcile=self._notifier.was_applied if checked else None,
        )
