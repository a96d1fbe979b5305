"""The console's requests: who may ask (the token), what may change (POST + header), the pages.

:meth:`Console.handle` takes a parsed :class:`Request` and returns a :class:`Response`;
the HTTP server is only its adapter, so every guard and page is testable without one.

* Every request carries the console's token: ``?token=`` on a page, the
  ``X-Console-Token`` header on a POST (only the header counts there: a form on
  another page can send the query string, never a header). Missing: 401; wrong: 403.
* The Host header must name this console on loopback (no DNS rebinding).
* State changes are POSTs under ``/actions/``; ``read_only`` refuses them all (403).
* Bad input is a 400 with a short error code, never a traceback.
"""

from __future__ import annotations

import hmac
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, unquote, urlencode

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import settings_table
from functions.core.approval import MAX_NOTE_CHARS, DecideOutcome
from functions.core.errors import StorageUnavailable
from functions.core.models import State
from functions.core.ports.approvals import ApprovalDecision
from ops import approvals, budget, bulk, effects, quarantine, requeue
from ops.console import assets, dead_letters, reads, views
from ops.target import OperatorError, Target, describe_aws_error
from ops.time_window import parse_moment

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.client import CloudWatchClient

_LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost")
# The Deliveries page's last page: 200 pages of 50 are 10,000 deliveries; further back,
# narrow the window (since/until) instead.
MAX_PAGE: Final = 200
_PAGE: Final = re.compile(r"[0-9]{1,6}")


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lower-case
    form: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: str
    content_type: str = "text/html; charset=utf-8"

    @classmethod
    def json(cls, status: int, document: dict[str, Any]) -> Response:
        return cls(status, json.dumps(document), "application/json")


class BadInput(Exception):
    """A parameter the console cannot use: answered 400 with ``code``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Conflict(BadInput):
    """The request meets a state that refuses it: answered 409 with ``code``."""


def _moment(text: str, *, now: int) -> int:
    try:
        return parse_moment(text, now=now)
    except ValueError as exc:
        raise BadInput("bad_time", str(exc)) from None


@dataclass
class Console:
    """The console's pages and actions over one target."""

    target: Target
    token: str
    target_label: str
    read_only: bool = False
    port: int = 0  # the Host header must name it (0: any port, for tests without a server)
    cloudwatch: CloudWatchClient | None = None
    stack_name: str | None = None
    clock: Callable[[], int] = field(default=lambda: int(datetime.now(UTC).timestamp()))
    # Who decides the approvals decided here (ops.operator_identity: the AWS principal
    # of a deployed stack, a name on a local one), recorded as "<who> (console)".
    operator: str = approvals.DECIDED_BY_CONSOLE

    # --- guards -------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        try:
            return self._post(request) if request.method == "POST" else self._get(request)
        except (BadInput, OperatorError, StorageUnavailable, ClientError, BotoCoreError) as exc:
            return _failure(exc)
        except Exception as exc:  # noqa: BLE001 (any other failure is a bug: answer, never drop)
            return internal_error(exc)

    def _refusal(self, request: Request) -> Response | None:
        host = request.headers.get("host", "")
        name, _, port = host.rpartition(":")
        if name not in _LOOPBACK_HOSTS or (self.port and port != str(self.port)):
            return Response.json(403, {"error": "bad_host", "message": "ask 127.0.0.1 directly"})
        if request.method == "POST":
            given = request.headers.get(assets.TOKEN_HEADER.lower())
            if given is None:
                return Response.json(
                    403,
                    {
                        "error": "token_header_required",
                        "message": f"a change needs the {assets.TOKEN_HEADER} header",
                    },
                )
        else:
            given = request.query.get("token")
            if given is None:
                return Response.json(401, {"error": "token_required"})
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return Response.json(403, {"error": "bad_token"})
        return None

    def _chrome(self, request: Request) -> views.Chrome:
        return views.Chrome(
            links=views.Links(self.token),
            target=self.target_label,
            read_only=self.read_only,
            now=self.clock(),
            note=request.query.get("note"),
        )

    # --- pages --------------------------------------------------------------------
    def _get(self, request: Request) -> Response:
        if request.path == "/console.js":
            return Response(200, assets.SCRIPT, "text/javascript; charset=utf-8")
        if request.path == "/console.css":
            return Response(200, assets.STYLE, "text/css; charset=utf-8")
        chrome = self._chrome(request)
        pages: dict[str, Callable[[views.Chrome, Request], Response]] = {
            "/": self._home,
            "/deliveries": self._deliveries,
            "/quarantine": self._quarantine,
            "/dead-letters": self._dead_letters,
            "/effects": self._effects,
            "/bulk": self._bulk,
            "/budget": self._budget,
            "/approvals": self._approvals,
        }
        if request.path == "/delivery":  # Home's "find a delivery by id" form
            return self._delivery(chrome, _required(request.query, "id"))
        if request.path.startswith("/delivery/"):
            return self._delivery(chrome, unquote(request.path.removeprefix("/delivery/")))
        shown = pages.get(request.path)
        if shown is None:
            return Response(404, views.not_found_page(chrome, f"No page {request.path}."))
        return shown(chrome, request)

    def _home(self, chrome: views.Chrome, _request: Request) -> Response:
        alarms = reads.alarms_in_alarm(self.cloudwatch, self.stack_name)
        home = reads.read_home(self.target, alarms, now=chrome.now)
        return Response(200, views.home_page(chrome, home))

    def _deliveries(self, chrome: views.Chrome, request: Request) -> Response:
        chosen = self._filter(request.query, now=chrome.now)
        found = reads.list_deliveries(self.target, chosen)
        return Response(200, views.deliveries_page(chrome, chosen, found, request.query))

    def _delivery(self, chrome: views.Chrome, delivery_id: str) -> Response:
        delivery = reads.read_delivery(self.target, delivery_id)
        if delivery is None:
            return Response(404, views.not_found_page(chrome, f"No delivery {delivery_id}."))
        return Response(200, views.delivery_page(chrome, delivery))

    def _quarantine(self, chrome: views.Chrome, _request: Request) -> Response:
        records = quarantine.list_quarantine(self.target)
        return Response(200, views.quarantine_page(chrome, records))

    def _dead_letters(self, chrome: views.Chrome, _request: Request) -> Response:
        return Response(200, views.dead_letters_page(chrome, dead_letters.peek(self.target)))

    def _effects(self, chrome: views.Chrome, _request: Request) -> Response:
        found = effects.list_effects(
            self.target,
            now=chrome.now,
            effect_age_seconds=settings_table.RECONCILE_EFFECT_AGE_SECONDS.default,
        )
        return Response(200, views.effects_page(chrome, found))

    def _approvals(self, chrome: views.Chrome, _request: Request) -> Response:
        waiting = approvals.list_waiting(self.target)
        return Response(200, views.approvals_page(chrome, waiting))

    def _bulk(self, chrome: views.Chrome, request: Request) -> Response:
        return Response(200, views.bulk_page(chrome, request.query))

    def _budget(self, chrome: views.Chrome, _request: Request) -> Response:
        status = budget.show_budget(self.target, now=chrome.now)
        return Response(200, views.budget_page(chrome, status))

    def _filter(self, query: dict[str, str], *, now: int) -> reads.DeliveryFilter:
        state = _state(query.get("state") or None)
        since = query.get("since") or None
        until = query.get("until") or None
        text = query.get("page") or "1"
        # Digits only (int() also takes "1_0", " 1" and other scripts' digits), and few:
        # a page reads every entry before it, so a far page would walk the whole index.
        if _PAGE.fullmatch(text) is None or not 1 <= int(text) <= MAX_PAGE:
            raise BadInput("bad_page", f"page is a whole number from 1 to {MAX_PAGE}")
        number = int(text)
        return reads.DeliveryFilter(
            state=state,
            reason=query.get("reason") or None,
            window=reads.Window(
                since=None if since is None else _moment(since, now=now),
                until=None if until is None else _moment(until, now=now),
            ),
            page=number,
        )

    # --- actions ------------------------------------------------------------------
    def _post(self, request: Request) -> Response:
        if self.read_only:
            return Response.json(
                403, {"error": "read_only", "message": "this console was started --read-only"}
            )
        actions: dict[str, Callable[[dict[str, str], int], tuple[str, str]]] = {
            "/actions/requeue": self._requeue,
            "/actions/redrive": self._redrive_one,
            "/actions/redrive-all": self._redrive_all,
            "/actions/resolve": self._resolve,
            "/actions/bulk-requeue": self._bulk_requeue,
            "/actions/approve": self._approve,
            "/actions/deny": self._deny,
        }
        action = actions.get(request.path)
        if action is None:
            return Response.json(404, {"error": "no_such_action"})
        message, location = action(request.form, self.clock())
        return Response.json(200, {"message": message, "location": location})

    def _requeue(self, form: dict[str, str], now: int) -> tuple[str, str]:
        delivery_id = _required(form, "delivery_id")
        result = requeue.requeue(self.target, delivery_id, now=now)
        said = f"{delivery_id}: {result.outcome.value}"
        if result.reason:
            said += f" ({result.reason})"
        return said, _delivery_path(delivery_id)

    def _redrive_one(self, form: dict[str, str], now: int) -> tuple[str, str]:
        delivery_id = _required(form, "delivery_id")
        report = requeue.redrive(self.target, now=now, delivery_id=delivery_id)
        counts = ", ".join(
            f"{o.value} {report.count(o)}" for o in requeue.RedriveOutcome if report.count(o)
        )
        said = f"{delivery_id}: redrive {counts}" if counts else f"{delivery_id}: no dead letter"
        return said, _delivery_path(delivery_id)

    def _redrive_all(self, form: dict[str, str], now: int) -> tuple[str, str]:
        # The depth the operator saw bounds what this click may touch.
        shown = _count(form, "shown")
        result = bulk.redrive_all(self.target, now=now, limit=max(shown, 1), dry_run=False)
        return f"redrive all: {_summary(result)}", "/dead-letters"

    def _resolve(self, form: dict[str, str], now: int) -> tuple[str, str]:
        delivery_id = _required(form, "delivery_id")
        name = _required(form, "effect")
        applied = form.get("applied")
        if applied not in ("yes", "no"):
            raise BadInput("bad_applied", "applied is yes or no")
        result = effects.resolve_effect(
            self.target, delivery_id, name, applied=applied == "yes", now=now
        )
        said = f"{delivery_id} {name}: {result.outcome.value}"
        return said + (f" ({result.reason})" if result.reason else ""), _delivery_path(delivery_id)

    def _approve(self, form: dict[str, str], now: int) -> tuple[str, str]:
        return self._decide(form, now, ApprovalDecision.APPROVED)

    def _deny(self, form: dict[str, str], now: int) -> tuple[str, str]:
        return self._decide(form, now, ApprovalDecision.DENIED)

    def _decide(self, form: dict[str, str], now: int, wanted: ApprovalDecision) -> tuple[str, str]:
        """One decision about the proposal the page showed (its digest is in the form),
        recorded once; the other one recorded before, another proposal waiting, or a
        deadline passed is a 409 that says so."""
        delivery_id = _required(form, "delivery_id")
        note = form.get("note", "").strip() or None
        if note is not None and len(note) > MAX_NOTE_CHARS:
            raise BadInput("bad_note", f"a note has at most {MAX_NOTE_CHARS} characters")
        proposal = _required(form, "proposal")
        by = self.operator
        report = approvals.decide_approval(
            self.target,
            delivery_id,
            wanted,
            now=now,
            decided_by=by if by == approvals.DECIDED_BY_CONSOLE else f"{by} (console)",
            note=note,
            name=form.get("name") or None,
            proposal=proposal,
        )
        record = report.record
        decided = None if record is None else record.decided
        if report.outcome is DecideOutcome.NOT_WAITING:
            raise Conflict("not_awaiting_approval", f"{delivery_id} waits for no approval")
        if report.outcome is DecideOutcome.OTHER_PROPOSAL and record is not None:
            raise Conflict(
                "approval_other_proposal",
                f"{delivery_id} waits for another proposal ({record.short_digest()}) than"
                " the one shown: read it again before deciding",
            )
        if report.outcome is DecideOutcome.EXPIRED:
            raise Conflict(
                "approval_expired",
                f"{delivery_id}: its deadline has passed; nothing was {wanted.value}, nothing acts",
            )
        if report.outcome is DecideOutcome.REFUSED and decided is not None:
            raise Conflict(
                "approval_decided",
                f"{delivery_id} was {decided.decision.value} by {decided.decided_by}:"
                " a decision is recorded once",
            )
        said = f"{delivery_id}: {wanted.value}"
        if report.outcome is DecideOutcome.UNCHANGED and decided is not None:
            said = f"{delivery_id}: already {decided.decision.value}, nothing changed"
        return said, "/approvals"

    def _bulk_requeue(self, form: dict[str, str], now: int) -> tuple[str, str]:
        """A dry run counts; the confirmation may touch no more than the count it showed."""
        if (form.get("state") or State.FAILED.value) != State.FAILED.value:
            raise BadInput("bad_state", "only failed deliveries are requeued in bulk")
        since, until = form.get("since") or None, form.get("until") or None
        kept = {k: form[k] for k in ("state", "reason", "since", "until") if form.get(k)}
        arguments: dict[str, Any] = {
            "reason": form.get("reason") or None,
            "since": None if since is None else _moment(since, now=now),
            "until": None if until is None else _moment(until, now=now),
        }
        if form.get("dry_run", "yes") != "no":
            result = bulk.requeue_matching(
                self.target, now=now, dry_run=True, yes=True, **arguments
            )
            said = f"dry run: {result.matched} match, {result.changed} would be requeued"
            location = f"/bulk?{urlencode({**kept, 'count': said, 'matched': result.matched})}"
            return said, location
        shown = _count(form, "matched")
        result = bulk.requeue_matching(
            self.target, now=now, dry_run=False, limit=max(shown, 1), **arguments
        )
        location = f"/deliveries?{urlencode({'state': State.PENDING.value})}"
        return f"requeue: {_summary(result)}", location


def internal_error(exc: BaseException) -> Response:
    """500 with a one-line JSON error; stderr gets one line naming the error's type (its
    message could quote a request, which holds the token)."""
    print(f"console: internal error ({type(exc).__name__})", file=sys.stderr)
    message = "the console failed on this request; its standard error names the error"
    return Response.json(500, {"error": "internal_error", "message": message})


def _failure(exc: Exception) -> Response:
    """A short answer with an error code for what went wrong, never a traceback."""
    if isinstance(exc, Conflict):
        return Response.json(409, {"error": exc.code, "message": str(exc)})
    if isinstance(exc, BadInput):
        return Response.json(400, {"error": exc.code, "message": str(exc)})
    if isinstance(exc, bulk.BulkLimitExceeded):
        message = (
            f"{exc.matched} match now, more than the {exc.limit} shown: nothing was changed;"
            " look again"
        )
        return Response.json(409, {"error": "more_than_shown", "message": message})
    if isinstance(exc, OperatorError):
        return Response.json(502, {"error": "target_unavailable", "message": str(exc)})
    if isinstance(exc, StorageUnavailable):
        message = "AWS is throttling or unavailable"
        return Response.json(503, {"error": "aws_unavailable", "message": message})
    return Response.json(502, {"error": "aws_error", "message": describe_aws_error(exc)})


def _count(form: dict[str, str], name: str) -> int:
    try:
        value = int(form.get(name, ""))
    except ValueError:
        raise BadInput(f"bad_{name}", f"{name} is a count") from None
    if value < 0:
        raise BadInput(f"bad_{name}", f"{name} is a count")
    return value


def _summary(result: bulk.BulkResult) -> str:
    """``3 matched, 2 changed (already_requeued 1)``."""
    said = f"{result.matched} matched, {result.changed} changed"
    reasons = ", ".join(f"{why} {n}" for why, n in sorted(result.not_changed.items()) if n)
    return said + (f" ({reasons})" if reasons else "")


def _state(value: str | None) -> State | None:
    if value is None:
        return None
    try:
        return State(value)
    except ValueError:
        raise BadInput("bad_state", f"no state {value!r}") from None


def _required(form: dict[str, str], name: str) -> str:
    value = form.get(name, "").strip()
    if not value:
        raise BadInput(f"missing_{name}", f"{name} is required")
    return value


def _delivery_path(delivery_id: str) -> str:
    return f"/delivery/{quote(delivery_id, safe='')}"
