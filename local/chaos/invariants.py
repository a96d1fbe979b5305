"""The invariants a run must keep, checked from what it left behind.

The table, the queues, the notification target's effect counter and the answers the
load heard: every genuine delivery acknowledged, stored with its own body, finished
as its package says and its effect applied exactly once; every conflicting body
quarantined and never processed; nothing forged or replayed stored; no work left;
every kill survived. ``docs/reliability.md`` explains each check.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from functions.core import table_layout
from functions.core.adapters.dynamodb_steps import SK_STEP_PREFIX
from functions.core.errors import PermanentError, UncertainEffect
from functions.workflows.agent import MODEL_STEP, Alert, ModelSummary
from local.agent_tools import TICKET_TOOL
from local.chaos.config import RESTART_DEADLINE_SECONDS, ChaosConfig
from local.chaos.load import LoadRecord
from local.chaos.plan import LoadPlan
from local.chaos.report import KillCount
from local.stack import ROLES, LocalStack


@dataclass(frozen=True, slots=True)
class Findings:
    """The violations, and what was counted while looking for them."""

    violations: list[str]
    kills: dict[str, KillCount]  # by role
    outcomes: dict[str, int]  # inbox states of the genuine deliveries
    items_by_worker_attempts: dict[str, int]
    effects_applied: int
    lost: int
    duplicated: int
    quarantined: int
    stored_forged_or_replayed: int
    queues: dict[str, int]
    effects: dict[str, dict[str, int]]  # by effect name: applied, lost, duplicated


def check(stack: LocalStack, config: ChaosConfig, plan: LoadPlan, load: LoadRecord) -> Findings:
    """Every invariant, from the table, the queues, the effect counter and the answers."""
    checks = _Checks(stack, plan, load)
    checks.genuine()
    checks.shared_packages()
    checks.conflicts()
    checks.rejected()
    checks.queues()
    kills = checks.kills(config.kills)
    return checks.findings(kills)


TOOL_KEY_MARK = ":tool:"


def _final_replies(items: list[dict[str, Any]]) -> dict[str, str]:
    """Per delivery, the recorded reply its alert is built from: the last model turn
    recorded (``model``, or ``model.<n>`` with tools)."""
    turns: dict[str, tuple[int, str]] = {}
    for i in items:
        sk = i["sk"]["S"]
        name = sk.removeprefix(SK_STEP_PREFIX)
        if not sk.startswith(SK_STEP_PREFIX) or "result" not in i:
            continue
        if name == MODEL_STEP:
            turn = 0
        elif name.startswith(MODEL_STEP + ".") and name[len(MODEL_STEP) + 1 :].isdigit():
            turn = int(name[len(MODEL_STEP) + 1 :])
        else:
            continue
        delivery_id = i["pk"]["S"]
        if turn >= turns.get(delivery_id, (-1, ""))[0]:
            turns[delivery_id] = (turn, i["result"]["S"])
    return {delivery_id: result for delivery_id, (_, result) in turns.items()}


def sha256_hex(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _scan(stack: LocalStack) -> list[dict[str, Any]]:
    dynamodb = stack.client("dynamodb")
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(
        TableName=stack.state.resources.table_name, ConsistentRead=True
    ):
        items.extend(page["Items"])
    return items


class _Checks:
    """What the run left behind, read once, and the invariants checked against it."""

    def __init__(self, stack: LocalStack, plan: LoadPlan, load: LoadRecord) -> None:
        assert stack.mcp is not None and stack.sink is not None
        self.stack, self.plan, self.load = stack, plan, load
        self.violations: list[str] = []
        items = _scan(stack)
        self.inbox = {i["pk"]["S"]: i for i in items if i["sk"]["S"] == table_layout.SK_INBOX}
        self.stored_ids = {i["pk"]["S"] for i in items}
        self.quarantine = {
            (i["pk"]["S"], i["received_sha256"]["S"]): i
            for i in items
            if i["sk"]["S"].startswith(table_layout.SK_QUARANTINE_PREFIX)
        }
        self.effect = "alert" if stack.options.agent else "notify"
        self.effects = stack.effects()
        self.effect_counts: Counter[str] = Counter(applied=0, lost=0, duplicated=0, in_doubt=0)
        if stack.options.agent:
            self.effect_counts["text_not_recorded"] = 0
        self.model_results = _final_replies(items)
        # Per acting tool use (effect tool.<digest>): its records, for the in-doubt count.
        self.tool_intents = sum(
            1
            for i in items
            if i["sk"]["S"].startswith(table_layout.SK_EFFECT_PREFIX + "tool.")
            and i.get("status", {}).get("S") == "intent"
        )
        self.notified = stack.sink.sink.body
        self.requested = stack.mcp.controls.packages_requested()
        self.depths = stack.queue_depths()
        self.states: Counter[str] = Counter()
        self.claims: Counter[int] = Counter()  # items by the worker attempts they took
        self.lost = 0
        self.quarantined = 0
        self.stored_rejected = 0

    def _applied(self, delivery_id: str) -> int:
        return self.effects.get(f"{delivery_id}:{self.effect}", 0)

    def genuine(self) -> None:
        """Acknowledged, stored with its own body, finished as its package says, and its
        effect applied exactly once (never for a package that does not exist)."""
        for result in self.load.genuine:
            delivery_id = result.delivery_id
            item = self.inbox.get(delivery_id)
            if not result.acknowledged:
                self.violations.append(f"{delivery_id}: never acknowledged ({result.final_answer})")
            if item is None:
                if result.acknowledged:
                    self.lost += 1
                    self.violations.append(f"{delivery_id}: acknowledged, no inbox item (lost)")
                continue
            state = item["state"]["S"]
            self.states[state] += 1
            self.claims[int(item["attempts"]["N"])] += 1
            expected = "failed" if delivery_id in self.plan.missing_ids else "completed"
            error = item.get("last_error", {}).get("S", "")
            applied = self._applied(delivery_id)
            if (
                applied
                and self.effect == "alert"
                and not self._alert_shows_recorded_result(delivery_id)
            ):
                self.effect_counts["text_not_recorded"] += 1
                self.violations.append(f"{delivery_id}: alert text is not the recorded result")
            if self._in_doubt(state, error, expected):
                # An alert publish the worker died in: at most once, so the operator
                # decides (docs/operations.md, effects in doubt); its subscriber saw one.
                self.effect_counts["in_doubt"] += 1
                if applied > 1:
                    self.effect_counts["duplicated"] += 1
                    self.violations.append(f"{delivery_id}: alert in doubt, sent {applied} times")
                continue
            if state != expected:
                self.violations.append(f"{delivery_id}: {state}, expected {expected} ({error})")
            self._count_effect(applied, completed=state == "completed")
            if applied != (1 if expected == "completed" else 0):
                self.violations.append(f"{delivery_id}: effect applied {applied} times ({state})")
            if item["body_sha256"]["S"] != sha256_hex(result.delivery.body):
                self.violations.append(f"{delivery_id}: stored body digest is not the delivery's")
        self._effect_keys()

    def _effect_keys(self) -> None:
        """Every key the far sides saw is a genuine delivery's; a tool acts once per use."""
        genuine_ids = {r.delivery_id for r in self.load.genuine}
        for key in self.effects:
            delivery_id, tool_use = key.split(TOOL_KEY_MARK)[0], TOOL_KEY_MARK in key
            if delivery_id.removesuffix(f":{self.effect}") not in genuine_ids:
                self.violations.append(f"an effect for an unknown delivery: {key}")
            elif tool_use and self.effects[key] > 1:
                self.violations.append(f"{delivery_id}: a tool acted {self.effects[key]} times")

    def _alert_shows_recorded_result(self, delivery_id: str) -> bool:
        """The alert the subscriber got ends with the model step's recorded result, as
        every attempt's alert is built from it."""
        assert self.stack.alerts is not None
        text = self.stack.alerts.text(f"{delivery_id}:{self.effect}")
        recorded = self.model_results.get(delivery_id)
        if text is None or recorded is None:
            return False
        try:
            summary = ModelSummary.from_record(json.loads(recorded))
        except (ValueError, PermanentError):
            return False
        # The body depends on the summary only: the other fields do not matter here.
        alert = Alert(
            delivery_id, event="", package_id="", title="", summary=summary, archive_key=""
        )
        return text.endswith("\n\n" + alert.body)

    def _waits_in_doubt(self, delivery_id: str) -> bool:
        item = self.inbox.get(delivery_id)
        if item is None:
            return False
        error = item.get("last_error", {}).get("S", "")
        return self._in_doubt(item["state"]["S"], error, "completed")

    def _in_doubt(self, state: str, error: str, expected: str) -> bool:
        return (
            self.effect == "alert"
            and expected == "completed"
            and state == "failed"
            and error == UncertainEffect.code
        )

    def _count_effect(self, applied: int, *, completed: bool) -> None:
        counts = self.effect_counts
        if applied == 1:
            counts["applied"] += 1
        elif applied > 1:
            counts["duplicated"] += 1
        elif completed:
            counts["lost"] += 1

    def shared_packages(self) -> None:
        """Several deliveries of one package: each processed on its own (or, stopped by
        an effect in doubt before its alert, such as a tool's, waiting for an operator)."""
        for package_id, ids in self.plan.shared_packages.items():
            done = sum(self._applied(i) == 1 or self._waits_in_doubt(i) for i in ids)
            if done != len(ids):
                self.violations.append(f"{package_id}: {done} of {len(ids)} deliveries processed")

    def conflicts(self) -> None:
        """409, a quarantine record naming both digests, the original processed with its
        own package, and the conflicting body's package never fetched."""
        sent = dict(self.load.conflicting)
        for original, other in self.plan.conflicts:
            delivery_id = original.delivery_id
            answer = sent.get(delivery_id)
            if answer is None:
                self.violations.append(f"{delivery_id}: conflicting body never sent")
            elif answer.answer != "409":
                self.violations.append(f"{delivery_id}: conflicting body answered {answer.answer}")
            record = self.quarantine.get((delivery_id, sha256_hex(other.body)))
            if record is None:
                self.violations.append(f"{delivery_id}: conflicting body not quarantined")
            else:
                self.quarantined += 1
                if record["stored_sha256"]["S"] != sha256_hex(original.body):
                    self.violations.append(f"{delivery_id}: quarantine names another original")
            if self.requested.get(str(other.package_id), 0):
                self.violations.append(f"{delivery_id}: the conflicting body's package fetched")
            if self.effect != "notify":
                continue  # only the notification carries the package id to check
            notified = self.notified(f"{delivery_id}:notify") or {}
            if notified.get("package_id") != original.package_id:
                self.violations.append(f"{delivery_id}: notified without the original package")

    def rejected(self) -> None:
        """Forged and stale-replayed requests: 401, and nothing stored under their ids."""
        for kind, deliveries, answers in (
            ("forged", self.plan.forged, self.load.forged),
            ("replayed", self.plan.replayed, self.load.replayed),
        ):
            for answer in answers:
                if answer.answer != "401":
                    self.violations.append(f"a {kind} request answered {answer.answer}")
            for delivery in deliveries:
                if delivery.delivery_id in self.stored_ids:
                    self.stored_rejected += 1
                    self.violations.append(f"{delivery.delivery_id}: {kind} request stored")

    def queues(self) -> None:
        """No work left. The relay failure queue holds metadata of stream batches given
        up on; their items must have been recovered by the reconciler, which
        :meth:`genuine` establishes (every item completed or failed as expected)."""
        for queue in ("work", "dead_letter"):
            if self.depths[queue]:
                self.violations.append(f"{self.depths[queue]} messages left in the {queue} queue")

    def kills(self, planned: int) -> dict[str, KillCount]:
        """Every kill survived: the supervisor restarted the process and it serves."""
        restarts = self.stack.restarts
        sent = self.load.kills
        for role in ROLES:
            if sent[role] != planned:
                self.violations.append(f"{role}: {sent[role]} of {planned} kills sent")
            if restarts[role] < sent[role]:
                self.violations.append(f"{role}: {restarts[role]} restarts, {sent[role]} kills")
        try:
            self.stack.wait_ready(RESTART_DEADLINE_SECONDS)
        except (TimeoutError, RuntimeError) as exc:
            self.violations.append(f"the stack does not serve at the end: {exc}")
        return {role: KillCount(sent[role], min(sent[role], restarts[role])) for role in ROLES}

    def findings(self, kills: dict[str, KillCount]) -> Findings:
        return Findings(
            violations=self.violations,
            kills=kills,
            outcomes=dict(sorted(self.states.items())),
            items_by_worker_attempts={str(k): v for k, v in sorted(self.claims.items())},
            effects_applied=sum(self.effects.values()),
            lost=self.lost,
            duplicated=sum(count - 1 for count in self.effects.values() if count > 1),
            quarantined=self.quarantined,
            stored_forged_or_replayed=self.stored_rejected,
            queues=self.depths,
            effects={self.effect: dict(self.effect_counts), **self._tool_counts()},
        )

    def _tool_counts(self) -> dict[str, dict[str, int]]:
        """The acting tool's uses as the notification target saw them (keyed
        ``<delivery_id>:tool:<tool-use id>``): applied once, more than once, in doubt."""
        uses = [n for key, n in self.effects.items() if TOOL_KEY_MARK in key]
        if not uses and not self.tool_intents:
            return {}
        return {
            f"tool {TICKET_TOOL}": {
                "applied": sum(1 for n in uses if n == 1),
                "duplicated": sum(1 for n in uses if n > 1),
                "in_doubt": self.tool_intents,
            }
        }
