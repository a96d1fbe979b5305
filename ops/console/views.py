"""The console's pages as HTML: pure functions from typed values to text.

Every value is escaped; nothing here reads a store. Links carry the console's own
token (:class:`Links`); forms marked ``data-action`` are posted by ``console.js``
with the token in a header. What is never rendered: a body (the table has none),
a secret, the MCP token, the receiver URL, a step's result (only its size), the
package server's URL, and a lease owner beyond its first characters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Final
from urllib.parse import quote, urlencode

from functions.core.models import InboxItem, QuarantineRecord, State
from functions.core.ports.approvals import ApprovalRecord
from ops.approvals import Waiting, proposal_parts, proposal_text
from ops.budget import BudgetStatus
from ops.console.dead_letters import DeadLetters
from ops.console.reads import (
    STATES,
    Delivery,
    DeliveryFilter,
    DeliveryPage,
    Home,
    Listed,
)
from ops.effects import EffectInDoubt
from ops.shown_text import visible
from ops.trace import trace_id_of, trace_view

HOME_REFRESH_SECONDS: Final = 5
NAVIGATION: Final = (
    ("/", "Home"),
    ("/deliveries", "Deliveries"),
    ("/quarantine", "Quarantine"),
    ("/dead-letters", "Dead letters"),
    ("/effects", "Effects in doubt"),
    ("/approvals", "Approvals"),
    ("/bulk", "Bulk requeue"),
    ("/budget", "Budget"),
)


@dataclass(frozen=True, slots=True)
class Links:
    """URLs of the console's pages, each with the console's token."""

    token: str

    def to(self, path: str, **params: str | int | None) -> str:
        query = {k: str(v) for k, v in params.items() if v is not None and v != ""}
        query["token"] = self.token
        return f"{path}?{urlencode(query)}"

    def delivery(self, delivery_id: str) -> str:
        return self.to(f"/delivery/{quote(delivery_id, safe='')}")


@dataclass(frozen=True, slots=True)
class Chrome:
    """What every page shares: links, where it acts, whether changes are allowed, a note."""

    links: Links
    target: str  # "local stack" or "stack NAME"
    read_only: bool
    now: int
    note: str | None = None


def iso(epoch: int | None) -> str:
    if epoch is None:
        return "—"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def age(epoch: int | None, now: int) -> str:
    """How long ago, in the largest whole unit: ``42s``, ``5m``, ``3h``, ``2d``."""
    if epoch is None:
        return "—"
    seconds = max(0, now - epoch)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def outcome_code(item: InboxItem) -> str:
    """``ok`` once completed, else the last attempt's error code (if any)."""
    if item.state is State.COMPLETED:
        return "ok"
    return item.last_error or "—"


def _state(state: State | str) -> str:
    value = state.value if isinstance(state, State) else state
    return f'<span class="state state-{escape(value)}">{escape(value)}</span>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, empty: str) -> str:
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _action(
    chrome: Chrome,
    path: str,
    label: str,
    fields: dict[str, str],
    *,
    kind: str = "",
    extra: str = "",
) -> str:
    """A button that POSTs ``fields`` and the inputs in ``extra`` (console.js adds the
    token header); none if read-only."""
    if chrome.read_only:
        return ""
    hidden = "".join(
        f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in fields.items()
    )
    return (
        f'<form class="inline" method="post" action="{escape(path)}" data-action>{hidden}'
        f'{extra}<button type="submit" class="{escape(kind)}">{escape(label)}</button></form>'
    )


def _delivery_link(chrome: Chrome, delivery_id: str) -> str:
    return f'<a href="{escape(chrome.links.delivery(delivery_id))}">{escape(delivery_id)}</a>'


def _field(
    form: dict[str, str], name: str, label: str, *, default: str = "", placeholder: str = ""
) -> str:
    value = escape(form.get(name, default))
    hint = f' placeholder="{escape(placeholder)}"' if placeholder else ""
    return f'<label>{escape(label)} <input name="{escape(name)}" value="{value}"{hint}></label>'


def page(chrome: Chrome, title: str, content: str, *, refresh: int | None = None) -> str:
    links = chrome.links
    nav = "".join(
        f'<a href="{escape(links.to(path))}">{escape(name)}</a>' for path, name in NAVIGATION
    )
    meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    mode = '<span class="badge">read-only</span>' if chrome.read_only else ""
    note = f'<p class="note" role="status">{escape(chrome.note)}</p>' if chrome.note else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"{meta}<title>{escape(title)} · relaylink-receiver console</title>"
        f'<link rel="stylesheet" href="{escape(links.to("/console.css"))}">'
        f'<script src="{escape(links.to("/console.js"))}" defer></script>'
        '<meta name="referrer" content="no-referrer"></head><body>'
        f"<header><strong>relaylink-receiver</strong> console · {escape(chrome.target)} {mode}"
        f"<nav>{nav}</nav></header><main><h1>{escape(title)}</h1>{note}{content}</main>"
        f"<footer>{escape(iso(chrome.now))}</footer></body></html>"
    )


def _delivery_rows(items: Iterable[InboxItem], chrome: Chrome) -> Iterator[list[str]]:
    for item in items:
        yield [
            _delivery_link(chrome, item.delivery_id),
            _state(item.state),
            escape(outcome_code(item)),
            str(item.attempts),
            escape(age(item.state_changed_at, chrome.now)),
            escape(age(item.received_at, chrome.now)),
        ]


_DELIVERY_HEADERS: Final = ("delivery", "state", "outcome", "attempts", "changed", "received")


def _recent_rows(entries: Iterable[Listed], chrome: Chrome) -> Iterator[list[str]]:
    for entry in entries:
        item = entry.item
        if item is None:  # a quarantine record: the same id came again with other bytes
            shown = [_state("quarantined"), "other body", "—", "—"]
        else:
            shown = [
                _state(item.state),
                escape(outcome_code(item)),
                str(item.attempts),
                escape(age(item.received_at, chrome.now)),
            ]
        yield [
            _delivery_link(chrome, entry.delivery_id),
            *shown[:3],
            escape(age(entry.listed_at, chrome.now)),
            shown[3],
        ]


_RECENT_HEADERS: Final = ("delivery", "state", "outcome", "attempts", "listed", "received")


def find_form(chrome: Chrome) -> str:
    """Any delivery, completed ones too, by its id (the Delivery page reads it by key)."""
    return (
        '<form class="filter find" method="get" action="/delivery">'
        f'<input type="hidden" name="token" value="{escape(chrome.links.token)}">'
        '<label>delivery id <input name="id" required></label>'
        '<button type="submit">Find a delivery by id</button></form>'
    )


def _count(href: str, label: str, value: int) -> str:
    return f'<div class="count"><a href="{escape(href)}">{label}</a><b>{value}</b></div>'


def _throughput(home: Home) -> str:
    per_minute = home.completed_last_hour / 60
    return (
        f'<p class="throughput">Last hour: <b>{home.completed_last_hour}</b> completed'
        f" ({per_minute:.1f} per minute), <b>{home.failed_last_hour}</b> failed,"
        f" <b>{home.ignored_last_hour}</b> ignored.</p>"
    )


def home_page(chrome: Chrome, home: Home) -> str:
    links = chrome.links
    counts = (
        _count(links.to("/deliveries"), "open (pending, processing)", home.open_work)
        + _count(
            links.to("/deliveries", state=State.FAILED.value), _state(State.FAILED), home.failed
        )
        + _count(links.to("/quarantine"), "quarantined", home.quarantined)
        + _count(links.to("/effects"), "effects in doubt", home.effects_in_doubt)
        + _count(links.to("/approvals"), "awaiting approval", home.awaiting_approval)
        + _count(
            links.to("/deliveries", state=State.COMPLETED.value),
            "completed in the last hour",
            home.completed_last_hour,
        )
    )
    alarms = home.alarms
    if alarms.source is None:
        alarm_text = "<p>The local stack has no CloudWatch alarms.</p>"
    elif alarms.error is not None:
        alarm_text = f'<p class="error">{escape(alarms.error)}</p>'
    elif not alarms.firing:
        alarm_text = f"<p>No alarm of {escape(alarms.source)} is in ALARM.</p>"
    else:
        alarm_text = _table(
            ("alarm", "since", "reason"),
            (
                [escape(a.name), escape(age(a.since, home.now)), escape(a.reason)]
                for a in alarms.firing
            ),
            empty="",
        )
    content = (
        f'<section class="counts">{counts}</section>'
        + _throughput(home)
        + find_form(chrome)
        + f"<h2>Alarms in ALARM</h2>{alarm_text}"
        "<h2>Recent deliveries</h2>"
        "<p>Every state, newest first by when each entered its state (open = pending or"
        " processing).</p>"
        + _table(
            _RECENT_HEADERS,
            _recent_rows(home.recent, chrome),
            empty="No delivery yet.",
        )
    )
    return page(chrome, "Home", content, refresh=HOME_REFRESH_SECONDS)


def deliveries_page(
    chrome: Chrome, chosen: DeliveryFilter, found: DeliveryPage, form: dict[str, str]
) -> str:
    options = "".join(
        f'<option value="{s.value}"{" selected" if chosen.state is s else ""}>{s.value}</option>'
        for s in STATES
    )
    filter_form = (
        '<form class="filter" method="get" action="/deliveries">'
        f'<input type="hidden" name="token" value="{escape(chrome.links.token)}">'
        f'<label>state <select name="state"><option value="">any</option>{options}</select></label>'
        + _field(form, "reason", "outcome code")
        + _field(form, "since", "since", placeholder="2h or ISO")
        + _field(form, "until", "until", placeholder="ISO")
        + '<button type="submit">Filter</button></form>'
        "<p>Newest first; the window is on when each entered its state (a completed"
        " delivery: its completion).</p>" + find_form(chrome)
    )
    pager = []
    kept = {k: v for k, v in form.items() if k in ("state", "reason", "since", "until")}
    if chosen.page > 1:
        pager.append(
            f'<a href="{escape(chrome.links.to("/deliveries", **kept, page=chosen.page - 1))}">'
            "← newer</a>"
        )
    pager.append(f"page {chosen.page}")
    if found.has_next:
        pager.append(
            f'<a href="{escape(chrome.links.to("/deliveries", **kept, page=chosen.page + 1))}">'
            "older →</a>"
        )
    content = (
        filter_form
        + _table(
            _DELIVERY_HEADERS, _delivery_rows(found.items, chrome), empty="No delivery matches."
        )
        + f'<p class="pager">{" · ".join(pager)}</p>'
    )
    return page(chrome, "Deliveries", content)


def _attempts_line(delivery: Delivery) -> str:
    """How many attempts, the running one's lease, and the last error code kept."""
    item = delivery.item
    since = "since the last requeue" if item.reset_at is not None else "since receipt"
    line = f"{item.attempts} attempt(s) {since}"
    if item.state is State.PROCESSING and delivery.lease_owner:
        line += (
            f"; running: lease owner <code>{escape(delivery.lease_owner)}…</code>"
            f" until {escape(iso(item.lease_until))}"
        )
    if item.last_error:
        which = "an earlier attempt's" if item.state is State.COMPLETED else "last"
        line += f"; {which} outcome code <b>{escape(item.last_error)}</b>"
    return line


def _timeline(chrome: Chrome, delivery: Delivery) -> list[tuple[int, int, str, str]]:
    """(time, order at equal times, what, detail HTML), from receipt to completion."""
    item = delivery.item
    package = f", package <code>{escape(item.package_id)}</code>" if item.package_id else ""
    events = [
        (
            item.received_at,
            0,
            "received",
            f"event {escape(item.event)}, body sha256 <code>{escape(item.body_sha256)}</code>"
            + package,
        )
    ]
    events += [
        (
            r.quarantined_at,
            1,
            "quarantined",
            f"same id, other body: sha256 <code>{escape(r.received_sha256)}</code>",
        )
        for r in delivery.quarantine
    ]
    if item.reset_at is not None:
        events.append((item.reset_at, 1, "requeued", "reset to pending by an operator"))
    if item.attempts or item.state is not State.PENDING:
        events.append((item.state_changed_at, 2, "attempts", _attempts_line(delivery)))
    recorded = delivery.progress.package
    if recorded is not None:  # the input every attempt runs on; the default archive
        detail = f"sha256 <code>{escape(recorded.digest)}</code>, {recorded.content.size} bytes"
        if recorded.refetched_digest is not None:
            detail += f", refetched another: <code>{escape(recorded.refetched_digest)}</code>"
        events.append((recorded.recorded_at, 3, "package recorded", detail))
    for step in delivery.progress.steps:
        size = "" if step.result is None else f", result {step.result.size} bytes"
        name = escape(step.name) + (f" ({escape(step.label)})" if step.label else "")
        failure = f" <b>{escape(step.error)}</b>" if step.error else ""
        detail = f"{name}: {_state(step.status.value)}{failure}, runs {step.runs}{size}"
        events.append((step.started_at, 3, "step", detail))
    for effect in delivery.progress.effects:
        detail = f"{escape(effect.name)}: {_state(effect.status.value)}"
        if effect.done_at is not None:
            detail += f", done {escape(iso(effect.done_at))}"
        if effect.flagged_at is not None:
            detail += f", flagged {escape(iso(effect.flagged_at))}"
        if effect.status.value == "intent":
            fields = {"delivery_id": item.delivery_id, "effect": effect.name}
            detail += _action(chrome, "/actions/resolve", "applied", {**fields, "applied": "yes"})
            detail += _action(
                chrome, "/actions/resolve", "not applied", {**fields, "applied": "no"}
            )
        events.append((effect.intent_at, 4, "effect", detail))
    events += _approval_events(chrome, delivery)
    for name in delivery.progress.repeatable_done:
        detail = f"{escape(name)}: {_state('done')} (repeatable: marked by the completion)"
        events.append(
            (delivery.progress.repeatable_done_at or item.state_changed_at, 4, "effect", detail)
        )
    if item.completed_at is not None:
        events.append((item.completed_at, 5, "completed", _state(State.COMPLETED)))
    elif item.state is State.FAILED:
        failed = f"{_state(State.FAILED)} {escape(item.last_error or '')}"
        events.append((item.state_changed_at, 5, "failed", failed))
    return sorted(events, key=lambda e: (e[0], e[1]))


def _approval_events(chrome: Chrome, delivery: Delivery) -> list[tuple[int, int, str, str]]:
    """Each approval asked for, and its decision (who or what, when, why)."""
    events = []
    for record in delivery.approvals:
        detail = (
            f"{escape(record.name)}: deadline {escape(iso(record.deadline))}"
            f"{_proposal_block(record)}"
        )
        decided = record.decided
        if decided is None and delivery.item.approval == record.name:
            fields = _decision_fields(record)
            detail += _action(chrome, "/actions/approve", "approve", fields, kind="primary")
            detail += _action(chrome, "/actions/deny", "deny", fields)
        events.append((record.requested_at, 5, "approval asked", detail))
        if decided is not None:
            said = f"{escape(decided.decision.value)} by {escape(visible(decided.decided_by))}"
            if decided.note:
                said += f": {escape(visible(decided.note))}"
            events.append((decided.decided_at, 6, "approval decided", said))
    return events


def _spend_line(delivery: Delivery) -> str:
    """What the delivery's model calls cost: every call that may have run is counted."""
    spend = delivery.progress.spend
    if not spend.model_calls:
        return ""
    unknown = (
        f", {spend.unknown_outcomes} of unknown outcome (killed or answer lost)"
        if spend.unknown_outcomes
        else ""
    )
    return (
        f'<p class="spend">Model calls <b>{spend.model_calls}</b>'
        f" ({spend.answered} answered{unknown})"
        f" · tokens <b>{spend.input_tokens}</b> in / <b>{spend.output_tokens}</b> out</p>"
    )


def delivery_page(chrome: Chrome, delivery: Delivery) -> str:
    item = delivery.item
    events = [
        [escape(iso(t)), what, detail] for t, _order, what, detail in _timeline(chrome, delivery)
    ]
    actions = ""
    if item.state in (State.FAILED, State.PENDING):
        actions = _action(
            chrome, "/actions/requeue", "Requeue", {"delivery_id": item.delivery_id}, kind="primary"
        )
        actions += _action(
            chrome, "/actions/redrive", "Redrive its dead letter", {"delivery_id": item.delivery_id}
        )
    content = (
        f'<p class="summary"><code>{escape(item.delivery_id)}</code> {_state(item.state)}'
        f" · outcome <b>{escape(outcome_code(item))}</b>"
        f" · changed {escape(age(item.state_changed_at, chrome.now))} ago</p>"
        + _spend_line(delivery)
        + f'<div class="actions">{actions}</div>'
        "<h2>Timeline</h2>"
        + _table(("time", "what", "detail"), events, empty="")
        + _waterfall(delivery)
    )
    return page(chrome, f"Delivery {item.delivery_id}", content)


# The waterfall's horizontal scale: a bar's position and length in 1000ths of the trace.
_WATERFALL_WIDTH: Final = 1000


def _waterfall(delivery: Delivery) -> str:
    """The trace as a waterfall: one row per span in time order, indented under its
    parent, its bar placed on the trace's time line (SVG attributes, not inline
    styles: the console's CSP allows no style attribute)."""
    if not delivery.spans:
        return ""
    view = trace_view(trace_id_of(delivery.item.traceparent) or "", delivery.spans)
    spans = view["spans"]
    start = min(s["start_unix_nano"] for s in spans)
    end = max(s["end_unix_nano"] or s["start_unix_nano"] for s in spans)
    whole = max(end - start, 1)
    rows = []
    for span in spans:
        span_end = span["end_unix_nano"] or end  # an unfinished span runs to the end
        x = (span["start_unix_nano"] - start) * _WATERFALL_WIDTH // whole
        width = max((span_end - span["start_unix_nano"]) * _WATERFALL_WIDTH // whole, 2)
        kind = (
            "span-error"
            if span["error"]
            else "span-unfinished"
            if span["unfinished"]
            else "span-wait"
            if span["name"] == "approval.wait"
            else "span"
        )
        took = "unfinished" if span["duration_ms"] is None else f"{span['duration_ms']:.1f} ms"
        rows.append(
            f'<tr class="{kind}"><td>{"&nbsp;&nbsp;" * span["depth"]}{escape(span["name"])}</td>'
            f"<td>+{span['offset_ms']:.1f} ms</td><td>{escape(took)}</td>"
            f'<td class="bar"><svg viewBox="0 0 {_WATERFALL_WIDTH} 10"'
            f' preserveAspectRatio="none" role="img" aria-label="{escape(span["name"])}">'
            f'<rect class="{kind}" x="{x}" y="0" width="{width}" height="10"/></svg></td>'
            f"<td>{escape(_span_detail(span['attributes']))}</td></tr>"
        )
    return (
        f"<h2>Trace <code>{escape(view['trace_id'])}</code></h2>"
        '<table class="waterfall"><tr><th>span</th><th>start</th><th>duration</th>'
        "<th>time line</th><th>detail</th></tr>" + "".join(rows) + "</table>"
    )


# What a waterfall row says of its span, in this order, when the span has it.
_SPAN_DETAIL: Final = (
    "effect",
    "tool",
    "step",
    "outcome",
    "result",
    "status",
    "input_tokens",
    "output_tokens",
    "decision",
    "ended_by",
    "error.type",
)


def _span_detail(attributes: dict[str, object]) -> str:
    return " · ".join(
        f"{key} {attributes[key]}" for key in _SPAN_DETAIL if attributes.get(key) is not None
    )


def not_found_page(chrome: Chrome, what: str) -> str:
    return page(chrome, "Not found", f'<p class="error">{escape(what)}</p>')


def quarantine_page(chrome: Chrome, records: Sequence[QuarantineRecord]) -> str:
    rows = (
        [
            _delivery_link(chrome, r.delivery_id),
            f"<code>{escape(r.stored_sha256)}</code>",
            f"<code>{escape(r.received_sha256)}</code>",
            escape(iso(r.quarantined_at)),
        ]
        for r in records
    )
    content = (
        "<p>A delivery id seen again with other bytes: the stored body's digest and the"
        " conflicting one (no body is kept).</p>"
        + _table(
            ("delivery", "stored sha256", "received sha256", "quarantined"),
            rows,
            empty="Nothing is quarantined.",
        )
    )
    return page(chrome, "Quarantine", content)


def dead_letters_page(chrome: Chrome, letters: DeadLetters) -> str:
    rows = (
        [
            _delivery_link(chrome, i),
            _action(chrome, "/actions/redrive", "Redrive", {"delivery_id": i}),
        ]
        for i in letters.delivery_ids
    )
    content = (
        f"<p>About <b>{letters.depth}</b> dead letter(s) on the work dead-letter queue.</p>"
        + _action(
            chrome,
            "/actions/redrive-all",
            f"Redrive all ({letters.depth})",
            {"shown": str(letters.depth)},
            kind="primary",
        )
        + _table(("delivery (a sample)", ""), rows, empty="No dead letters.")
    )
    return page(chrome, "Dead letters", content)


def effects_page(chrome: Chrome, effects: Sequence[EffectInDoubt]) -> str:
    rows = []
    for effect in effects:
        record = effect.record
        fields = {"delivery_id": record.delivery_id, "effect": record.name}
        rows.append(
            [
                _delivery_link(chrome, record.delivery_id),
                escape(record.name),
                escape(effect.doubt.value),
                escape(iso(record.intent_at)),
                _action(chrome, "/actions/resolve", "applied", {**fields, "applied": "yes"})
                + _action(chrome, "/actions/resolve", "not applied", {**fields, "applied": "no"}),
            ]
        )
    content = (
        "<p>An intent without done: check the downstream system, then record what you found.</p>"
        + _table(
            ("delivery", "effect", "doubt", "intent", "resolve"),
            rows,
            empty="No effect is in doubt.",
        )
    )
    return page(chrome, "Effects in doubt", content)


def _decision_fields(record: ApprovalRecord) -> dict[str, str]:
    """What a decision posts: the approval and the digest of the proposal shown."""
    return {
        "delivery_id": record.delivery_id,
        "name": record.name,
        "proposal": record.proposal_digest(),
    }


def _proposal_block(record: ApprovalRecord) -> str:
    """The whole proposal (canonical JSON, hidden characters visible), its digest and
    its package's."""
    return (
        f"<br>proposal <code>{escape(record.short_digest())}</code>, package"
        f" <code>{escape(record.package_digest or 'not recorded')}</code>"
        f"<pre>{escape(proposal_text(record))}</pre>"
    )


def approvals_page(chrome: Chrome, waiting: Sequence[Waiting]) -> str:
    """Deliveries waiting for a person: what each proposes, approve and deny."""
    rows = []
    for entry in waiting:
        item = entry.item
        record = entry.record
        headline, detail = proposal_parts({} if record is None else record.proposal)
        note = '<input name="note" placeholder="note (optional)" maxlength="500">'
        # Without its record there is nothing to name: no decision from this page.
        decide = (
            ""
            if record is None
            else (
                _action(
                    chrome,
                    "/actions/approve",
                    "approve",
                    _decision_fields(record),
                    kind="primary",
                    extra=note,
                )
                + _action(chrome, "/actions/deny", "deny", _decision_fields(record), extra=note)
            )
        )
        rows.append(
            [
                _delivery_link(chrome, item.delivery_id),
                escape(item.approval or "-"),
                # The model wrote it: shown as text (escaped, every hidden character
                # made visible), whole, never followed.
                f"<b>{escape(headline)}</b><br><pre>{escape(detail)}</pre>"
                + ("" if record is None else _proposal_block(record)),
                escape(age(item.state_changed_at, chrome.now)),
                escape(iso(item.approval_deadline)),
                decide,
            ]
        )
    content = (
        "<p>Each waits for a person: approve and it does what it proposes, once; deny and"
        " it ends failed (approval_denied). Undecided at its deadline, it is denied.</p>"
        + _table(
            ("delivery", "approval", "proposal", "waiting", "deadline", "decide"),
            rows,
            empty="No delivery waits for an approval.",
        )
    )
    return page(chrome, "Approvals", content)


def bulk_page(chrome: Chrome, form: dict[str, str]) -> str:
    """The filter, its dry run's count (``count``, ``matched``), then the confirmation."""
    if chrome.read_only:
        return page(chrome, "Bulk requeue", "<p>Read-only console: bulk requeue is disabled.</p>")
    fields = (
        _field(form, "reason", "outcome code")
        + _field(form, "since", "since", default="1h", placeholder="2h or ISO")
        + _field(form, "until", "until", placeholder="ISO")
    )
    content = (
        "<p>Requeue every <b>failed</b> delivery that matches (it failed in the"
        " window). A dry run counts them first; the confirmation touches no more than"
        " that count.</p>"
        f'<form method="post" action="/actions/bulk-requeue" data-action class="filter">{fields}'
        '<input type="hidden" name="dry_run" value="yes">'
        '<button type="submit">Dry run: count</button></form>'
    )
    said, matched = form.get("count"), form.get("matched", "0")
    if said is not None:
        content += f'<p class="dry-run">{escape(said)}</p>'
    if said is not None and matched.isdigit() and int(matched) > 0:
        kept = {k: v for k, v in form.items() if k in ("reason", "since", "until")}
        hidden = "".join(
            f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
            for k, v in {**kept, "dry_run": "no", "matched": matched}.items()
        )
        content += (
            f'<form method="post" action="/actions/bulk-requeue" data-action>{hidden}'
            f'<button type="submit" class="primary">Confirm: requeue {escape(matched)}</button>'
            "</form>"
        )
    return page(chrome, "Bulk requeue", content)


def budget_page(chrome: Chrome, budget: BudgetStatus) -> str:
    if budget.limit is None and budget.reserved == 0 and budget.used == 0:
        text = (
            f"<p>No token budget recorded for {escape(budget.day)}: the agent workflow is not"
            " configured, or has not run today (its own daily setting then applies).</p>"
        )
    else:
        limit = (
            "not set (the workflow's setting applies)"
            if budget.limit is None
            else str(budget.limit)
        )
        text = _table(
            ("day", "used", "reserved", "limit", "remaining"),
            [
                [
                    escape(budget.day),
                    str(budget.used),
                    str(budget.reserved),
                    escape(limit),
                    "—" if budget.remaining is None else str(budget.remaining),
                ]
            ],
            empty="",
        )
    return page(chrome, "Budget", text)
