"""The console's HTTP API against moto: who may ask, what may change, what is shown.

Pages and actions go through :meth:`Console.handle` (the server is only its adapter);
the server itself is tested over real HTTP on loopback at the end, and the ``console``
command as a subprocess, with planted secrets that no page may contain.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import boto3
import pytest

from cli.state import LocalState
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.dynamodb_steps import DynamoDbSteps
from functions.core.effects import idempotency_key
from functions.core.models import QuarantineRecord, State, WorkItem
from functions.core.ports.approvals import ApprovalRecord
from functions.core.ports.steps import StoredResult
from ops import approvals
from ops.console import reads
from ops.console.assets import SCRIPT, TOKEN_HEADER
from ops.console.routes import Console, Request, Response
from ops.console.server import bind
from tests import log_audit
from tests.e2e.console_process import console as console_process
from tests.operator_harness import MCP, NOW, Stack

TOKEN = "console-test-token-" + uuid.uuid4().hex
HOST = {"host": "127.0.0.1:8080"}
PAGES = (
    "/",
    "/deliveries",
    "/quarantine",
    "/dead-letters",
    "/effects",
    "/bulk",
    "/budget",
    "/approvals",
)
ACTIONS = (
    "/actions/requeue",
    "/actions/redrive",
    "/actions/redrive-all",
    "/actions/resolve",
    "/actions/bulk-requeue",
    "/actions/approve",
    "/actions/deny",
)


def make_console(stack: Stack, **overrides: Any) -> Console:
    fields: dict[str, Any] = {
        "target": stack.target,
        "token": TOKEN,
        "target_label": "local stack",
        "clock": lambda: NOW + 60,
        **overrides,
    }
    return Console(**fields)


def get(console: Console, path: str, *, token: str | None = TOKEN, **query: str) -> Response:
    if token is not None:
        query["token"] = token
    return console.handle(Request("GET", path, query, dict(HOST)))


def post(
    console: Console, path: str, form: dict[str, str], *, header: str | None = TOKEN
) -> Response:
    headers = dict(HOST)
    if header is not None:
        headers[TOKEN_HEADER.lower()] = header
    # The query token alone never authorises a change.
    return console.handle(Request("POST", path, {"token": TOKEN}, headers, form))


def error(response: Response) -> str:
    return str(json.loads(response.body)["error"])


def failed(stack: Stack, *, received_at: int = NOW, reason: str = "mcp_unavailable") -> str:
    delivery_id = stack.accept(received_at=received_at)
    claim = stack.claims.claim(delivery_id, owner="w0", now=received_at, lease_seconds=0).claim
    stack.claims.fail(claim, now=received_at + 1, error_code=reason)
    return delivery_id


def record_step(stack: Stack, delivery_id: str, name: str, result: str) -> None:
    """A step with its result stored inline, as the worker's step store writes it."""
    steps = DynamoDbSteps(client=stack.target.dynamodb, table_name=stack.target.table_name)
    steps.start(delivery_id, name, now=NOW, expires_at=NOW + 86400)
    stored = StoredResult(size=len(result), inline=result)
    steps.record_result(delivery_id, name, result=stored, now=NOW + 1)


# --- the guards --------------------------------------------------------------------


def test_every_page_needs_the_token(stack: Stack) -> None:
    console = make_console(stack)
    for path in (*PAGES, "/delivery/x", "/console.js", "/console.css"):
        assert get(console, path, token=None).status == 401, path
        assert error(get(console, path, token="wrong")) == "bad_token", path
        assert get(console, path, token=TOKEN[:-1]).status == 403
    for path in PAGES:
        shown = get(console, path)
        assert shown.status == 200, (path, shown.body)
        assert shown.content_type.startswith("text/html")


def test_only_a_loopback_host_header_is_served(stack: Stack) -> None:
    console = make_console(stack, port=8080)
    for host in ("evil.example:8080", "127.0.0.1:9999", "", "10.0.0.1:8080"):
        refused = console.handle(Request("GET", "/", {"token": TOKEN}, {"host": host}))
        assert (refused.status, error(refused)) == (403, "bad_host")
    assert (
        console.handle(Request("GET", "/", {"token": TOKEN}, {"host": "localhost:8080"})).status
        == 200
    )


def test_a_post_without_the_header_changes_nothing(stack: Stack) -> None:
    delivery_id = failed(stack)
    console = make_console(stack)
    for path in ACTIONS:
        refused = post(console, path, {"delivery_id": delivery_id}, header=None)
        assert (refused.status, error(refused)) == (403, "token_header_required")
        assert (
            error(post(console, path, {"delivery_id": delivery_id}, header="wrong")) == "bad_token"
        )
    assert stack.claims.get(delivery_id).state is State.FAILED
    assert stack.drain(stack.target.work_queue_url) == []

    done = post(console, "/actions/requeue", {"delivery_id": delivery_id})
    assert done.status == 200
    answer = json.loads(done.body)
    assert answer["message"] == f"{delivery_id}: requeued"
    assert answer["location"] == f"/delivery/{delivery_id}"
    assert stack.claims.get(delivery_id).state is State.PENDING
    sent = [WorkItem.from_json(b).delivery_id for b in stack.drain(stack.target.work_queue_url)]
    assert sent == [delivery_id]


def test_read_only_refuses_every_change_and_offers_none(stack: Stack) -> None:
    delivery_id = failed(stack)
    stack.dead_letter(WorkItem(delivery_id, "package.received", "pkg_TEST", MCP).to_json())
    console = make_console(stack, read_only=True)
    forms = {
        "/actions/resolve": {"delivery_id": delivery_id, "effect": "notify", "applied": "yes"},
        "/actions/bulk-requeue": {"since": "1d", "dry_run": "no", "matched": "1"},
        "/actions/redrive-all": {"shown": "1"},
    }
    for path in ACTIONS:
        refused = post(console, path, forms.get(path, {"delivery_id": delivery_id}))
        assert (refused.status, error(refused)) == (403, "read_only"), path
    assert stack.claims.get(delivery_id).state is State.FAILED
    assert len(stack.drain(stack.target.dead_letter_queue_url)) == 1  # still there
    for path in (*PAGES, f"/delivery/{delivery_id}"):
        shown = get(console, path)
        assert shown.status == 200
        assert "data-action" not in shown.body, path
        assert "read-only" in shown.body


def test_bad_input_is_a_400_with_a_code(stack: Stack) -> None:
    console = make_console(stack)
    assert error(get(console, "/deliveries", since="yesterday")) == "bad_time"
    assert error(get(console, "/deliveries", page="0")) == "bad_page"
    assert error(get(console, "/deliveries", page="two")) == "bad_page"
    assert error(get(console, "/deliveries", state="lost")) == "bad_state"
    for every_state in ("completed", "ignored"):
        assert get(console, "/deliveries", state=every_state).status == 200
    assert error(post(console, "/actions/requeue", {})) == "missing_delivery_id"
    resolve = {"delivery_id": "d", "effect": "notify", "applied": "maybe"}
    assert error(post(console, "/actions/resolve", resolve)) == "bad_applied"
    assert post(console, "/actions/nothing", {}).status == 404
    assert get(console, "/delivery/no-such-id").status == 404
    assert get(console, "/nowhere").status == 404


@pytest.mark.parametrize("page", ["99999999999999999999", "201", "1_0", " 1", "\u0661"])
def test_a_page_out_of_bounds_is_a_400_and_reads_nothing(stack: Stack, page: str) -> None:
    # A target with no table: a page that read anything would fail otherwise.
    console = make_console(stack, target=replace(stack.target, table_name="no-such-table"))
    answer = get(console, "/deliveries", page=page)
    assert (answer.status, error(answer)) == (400, "bad_page")
    assert "1 to 200" in json.loads(answer.body)["message"]


def test_the_script_posts_with_the_token_header() -> None:
    assert f'"{TOKEN_HEADER}": token' in SCRIPT
    assert 'method: "POST"' in SCRIPT


# --- what the pages show ------------------------------------------------------------


def test_home_counts_by_state_and_lists_every_state_newest_first(stack: Stack) -> None:
    earlier = stack.accept(received_at=NOW - 3 * 3600)
    claim = stack.claims.claim(earlier, owner="w0", now=NOW - 3 * 3600, lease_seconds=0).claim
    stack.claims.complete(claim, now=NOW - 2 * 3600)  # completed, but not in the last hour
    completed = stack.accept(received_at=NOW - 30)
    claim = stack.claims.claim(completed, owner="w0", now=NOW, lease_seconds=0).claim
    stack.claims.complete(claim, now=NOW + 1, effects_done=frozenset({"archive"}))
    ping = stack.accept(received_at=NOW - 40, package=False)
    old = failed(stack, received_at=NOW - 2 * 3600)
    broken = failed(stack, received_at=NOW - 20, reason="package_not_found")  # listed NOW - 19
    waiting = stack.accept(received_at=NOW - 10)
    running = stack.accept(received_at=NOW - 5)
    stack.claims.claim(running, owner="w9", now=NOW, lease_seconds=300)  # still listed NOW - 5
    item = stack.claims.get(broken)
    DynamoDbInbox(stack.target.dynamodb, stack.target.table_name).quarantine(
        QuarantineRecord(broken, item.event, item.body_sha256, "f" * 64, NOW + 2, NOW + 86400)
    )
    key = idempotency_key(running, "notify")
    assert stack.target.effects().record_intent(
        running, "notify", key=key, now=NOW, expires_at=NOW + 86400
    )

    home = reads.read_home(stack.target, reads.Alarms(source=None), now=NOW + 60)
    assert (home.open_work, home.failed, home.quarantined, home.effects_in_doubt) == (2, 2, 1, 1)
    assert (home.completed_last_hour, home.failed_last_hour, home.ignored_last_hour) == (1, 1, 1)
    # Newest entry into its label first, every state.
    assert [(e.delivery_id, e.item is None) for e in home.recent] == [
        (broken, True),  # its quarantine record, NOW + 2
        (completed, False),  # NOW + 1
        (running, False),
        (waiting, False),
        (broken, False),
        (ping, False),
        (old, False),
        (earlier, False),
    ]
    assert len(reads.read_home(stack.target, home.alarms, now=NOW + 60, recent=3).recent) == 3

    console = make_console(stack)
    page = get(console, "/").body
    assert '<meta http-equiv="refresh"' in page
    assert "The local stack has no CloudWatch alarms." in page
    assert "completed in the last hour</a><b>1</b>" in page
    assert "<b>1</b> completed (0.0 per minute)" in page
    done_row = page[page.index(completed) :].split("</tr>")[0]
    assert "state-completed" in done_row and "<td>ok</td>" in done_row
    row = page[page.index(old) :].split("</tr>")[0]
    assert "failed" in row and "mcp_unavailable" in row
    assert page.index(completed) < page.index(running) < page.index(waiting) < page.index(old)
    # The find form asks GET /delivery?id=...: any delivery is read by key.
    assert 'action="/delivery"' in page
    found = get(console, "/delivery", id=f" {completed} ")
    assert found.status == 200
    summary = found.body[found.body.index('class="summary"') :].split("</p>")[0]
    assert completed in summary and "completed" in summary and "ok" in summary
    assert "archive: " in found.body and "marked by the completion" in found.body
    assert get(console, "/delivery", id="no-such-id").status == 404
    assert error(get(console, "/delivery")) == "missing_id"


def test_deliveries_filter_by_state_reason_and_window_over_pages(stack: Stack) -> None:
    mcp_failures = [failed(stack, received_at=NOW - 3600 + n) for n in range(7)]
    not_found = failed(stack, received_at=NOW - 100, reason="package_not_found")
    old = failed(stack, received_at=NOW - 86400)
    stack.accept(received_at=NOW - 50)
    done = stack.accept(received_at=NOW - 40)
    stack.finish(done, State.COMPLETED)

    def ids(chosen: reads.DeliveryFilter) -> tuple[list[str], bool]:
        found = reads.list_deliveries(stack.target, chosen)
        return [i.delivery_id for i in found.items], found.has_next

    window = reads.Window(since=NOW - 2 * 3600)
    first = reads.DeliveryFilter(
        state=State.FAILED, reason="mcp_unavailable", window=window, page_size=3
    )
    newest_first = list(reversed(mcp_failures))
    assert ids(first) == (newest_first[:3], True)
    assert ids(replace(first, page=2)) == (newest_first[3:6], True)
    assert ids(replace(first, page=3)) == (newest_first[6:], False)
    assert old not in ids(replace(first, window=reads.Window(), page_size=50))[0][:7]
    assert ids(replace(first, window=reads.Window(), page_size=50))[0][-1] == old
    assert ids(replace(first, reason="package_not_found"))[0] == [not_found]
    assert ids(reads.DeliveryFilter(state=State.PENDING))[0] != []
    every = ids(reads.DeliveryFilter(page_size=100))[0]
    assert len(every) == 11 and done in every
    assert ids(reads.DeliveryFilter(state=State.COMPLETED)) == ([done], False)
    # Every state's page is read newest first, a page at a time.
    assert ids(reads.DeliveryFilter(page_size=4)) == (every[:4], True)
    assert ids(reads.DeliveryFilter(page=3, page_size=4)) == (every[8:], False)

    console = make_console(stack)
    page = get(console, "/deliveries", state="failed", reason="package_not_found", since="2h").body
    assert not_found in page and mcp_failures[0] not in page
    until = get(console, "/deliveries", state="failed", until="2027-01-14T09:00:00Z").body
    assert old in until and not_found not in until
    completed_page = get(console, "/deliveries", state="completed").body
    assert done in completed_page and not_found not in completed_page


def test_a_delivery_page_shows_its_journey_but_no_result_or_package_url(stack: Stack) -> None:
    delivery_id = failed(stack, reason="uncertain_effect")
    secret_result = json.dumps({"summary": "confidential briefing " + uuid.uuid4().hex})
    record_step(stack, delivery_id, "model", secret_result)
    effects = stack.target.effects()
    key = idempotency_key(delivery_id, "notify")
    assert effects.record_intent(delivery_id, "notify", key=key, now=NOW, expires_at=NOW + 86400)
    item = stack.claims.get(delivery_id)
    DynamoDbInbox(stack.target.dynamodb, stack.target.table_name).quarantine(
        QuarantineRecord(delivery_id, item.event, item.body_sha256, "f" * 64, NOW + 2, NOW + 86400)
    )

    page = get(make_console(stack), f"/delivery/{delivery_id}").body
    assert item.body_sha256 in page and "f" * 64 in page
    assert "model" in page and f"result {len(secret_result)} bytes" in page
    assert "confidential briefing" not in page
    assert MCP not in page  # the package server's URL is not shown
    assert "uncertain_effect" in page and "Requeue" in page
    assert 'value="notify"' in page  # resolve applied / not applied

    resolved = post(
        make_console(stack),
        "/actions/resolve",
        {"delivery_id": delivery_id, "effect": "notify", "applied": "no"},
    )
    assert json.loads(resolved.body)["message"] == f"{delivery_id} notify: not_applied"
    assert get(make_console(stack), "/effects").body.count(delivery_id) == 0


def test_dead_letters_redrive_one_then_all(stack: Stack) -> None:
    first, second = failed(stack), failed(stack)
    for delivery_id in (first, second):
        stack.dead_letter(WorkItem(delivery_id, "package.received", "pkg_TEST", MCP).to_json())
    console = make_console(stack)
    page = get(console, "/dead-letters").body
    assert first in page and second in page and "<b>2</b>" in page

    one = json.loads(post(console, "/actions/redrive", {"delivery_id": first}).body)
    assert one["message"] == f"{first}: redrive moved 1"
    assert stack.claims.get(first).state is State.PENDING
    assert stack.claims.get(second).state is State.FAILED

    assert error(post(console, "/actions/redrive-all", {})) == "bad_shown"
    everything = json.loads(post(console, "/actions/redrive-all", {"shown": "1"}).body)
    assert everything["message"] == "redrive all: 1 matched, 1 changed"
    assert stack.claims.get(second).state is State.PENDING
    assert stack.drain(stack.target.dead_letter_queue_url) == []
    again = json.loads(post(console, "/actions/redrive", {"delivery_id": first}).body)
    assert again["message"] == f"{first}: no dead letter"


def test_home_lists_the_stacks_alarms_in_alarm(stack: Stack, moto_endpoint: str) -> None:
    cloudwatch = boto3.client(
        "cloudwatch",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    name = f"relaylink-{uuid.uuid4().hex[:6]}"
    for alarm in (f"{name}-WorkFailedAlarm", f"{name}-QuarantinedAlarm", f"other-{name}-X"):
        cloudwatch.put_metric_alarm(
            AlarmName=alarm,
            MetricName="WorkFailed",
            Namespace="relaylink",
            Statistic="Sum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
        )
    for alarm in (f"{name}-WorkFailedAlarm", f"other-{name}-X"):
        cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason="1 failed")
    console = make_console(stack, cloudwatch=cloudwatch, stack_name=name)
    page = get(console, "/").body
    assert f"{name}-WorkFailedAlarm" in page and "1 failed" in page
    assert f"{name}-QuarantinedAlarm" not in page  # OK or INSUFFICIENT_DATA
    assert f"other-{name}-X" not in page  # another stack's


def test_bulk_requeue_counts_first_then_touches_no_more_than_it_showed(stack: Stack) -> None:
    console = make_console(stack)
    now = NOW + 60
    wanted = [failed(stack, received_at=now - 600 + n) for n in range(3)]
    other_reason = failed(stack, received_at=now - 500, reason="package_not_found")
    too_old = failed(stack, received_at=now - 3 * 3600)
    form = {"reason": "mcp_unavailable", "since": "1h"}

    dry = json.loads(post(console, "/actions/bulk-requeue", {**form, "dry_run": "yes"}).body)
    assert dry["message"] == "dry run: 3 match, 3 would be requeued"
    assert {stack.claims.get(i).state for i in [*wanted, other_reason, too_old]} == {State.FAILED}
    shown = get(
        console, dry["location"].split("?")[0], **dict(parse_qsl(dry["location"].split("?")[1]))
    )
    assert "Confirm: requeue 3" in shown.body and 'name="matched" value="3"' in shown.body

    late = failed(stack, received_at=now - 100)  # matches too, but was not counted
    refused = post(console, "/actions/bulk-requeue", {**form, "dry_run": "no", "matched": "3"})
    assert (refused.status, error(refused)) == (409, "more_than_shown")
    assert {stack.claims.get(i).state for i in [*wanted, late]} == {State.FAILED}

    confirmed = post(console, "/actions/bulk-requeue", {**form, "dry_run": "no", "matched": "4"})
    assert json.loads(confirmed.body)["message"] == "requeue: 4 matched, 4 changed"
    assert {stack.claims.get(i).state for i in [*wanted, late]} == {State.PENDING}
    assert {stack.claims.get(i).state for i in (other_reason, too_old)} == {State.FAILED}
    again = post(console, "/actions/bulk-requeue", {**form, "dry_run": "no", "matched": "4"})
    assert json.loads(again.body)["message"] == "requeue: 0 matched, 0 changed"
    pending = post(console, "/actions/bulk-requeue", {**form, "state": "pending"})
    assert error(pending) == "bad_state"


# --- over real HTTP ------------------------------------------------------------------


@pytest.fixture
def served(stack: Stack) -> Iterator[str]:
    console = make_console(stack)
    server = bind(console)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{console.port}"
    server.shutdown()
    server.server_close()


def fetch(
    url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), refused.read().decode()


def test_the_server_guards_and_headers_over_http(stack: Stack, served: str) -> None:
    delivery_id = failed(stack)
    status, _, body = fetch(f"{served}/")
    assert (status, json.loads(body)["error"]) == (401, "token_required")
    status, headers, body = fetch(f"{served}/?token={TOKEN}")
    assert status == 200 and delivery_id in body
    assert headers["Referrer-Policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["Cache-Control"] == "no-store"

    form = f"delivery_id={delivery_id}".encode()
    status, _, body = fetch(f"{served}/actions/requeue?token={TOKEN}", data=form)
    assert (status, json.loads(body)["error"]) == (403, "token_header_required")
    status, _, body = fetch(
        f"{served}/actions/requeue", data=b"x" * 20000, headers={TOKEN_HEADER: TOKEN}
    )
    assert (status, json.loads(body)["error"]) == (413, "form_too_large")
    status, _, body = fetch(f"{served}/actions/requeue", data=form, headers={TOKEN_HEADER: TOKEN})
    assert status == 200 and json.loads(body)["message"] == f"{delivery_id}: requeued"


def test_an_unexpected_error_is_a_one_line_json_500_over_http(
    stack: Stack, capfd: pytest.CaptureFixture[str]
) -> None:
    def broken_clock() -> int:
        raise RuntimeError(f"a bug that quotes the token {TOKEN}")

    console = make_console(stack, clock=broken_clock)
    server = bind(console)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        status, headers, body = fetch(f"http://127.0.0.1:{console.port}/?token={TOKEN}")
    finally:
        server.shutdown()
        server.server_close()
    assert (status, headers["Content-Type"]) == (500, "application/json")
    assert "\n" not in body and json.loads(body)["error"] == "internal_error"
    stderr = capfd.readouterr().err
    assert "Traceback" not in stderr and TOKEN not in stderr
    assert stderr.strip() == "console: internal error (RuntimeError)"


def test_no_page_holds_a_secret_the_mcp_token_or_a_body(stack: Stack, tmp_path: Path) -> None:
    """The command itself, on a state file holding planted secrets and a body-shaped result."""
    secret = "whsec_" + "Y29uc29sZS1wbGFudGVkLXNpZ25pbmcta2V5LTEyMzQ="
    token = "mcp_console_planted_" + uuid.uuid4().hex
    log_audit.register_secret(secret)
    log_audit.register_token(token)
    state = LocalState.read(stack.state_file)
    planted = replace(state, signing_secrets=[secret], mcp_token=token)
    planted_file = tmp_path / "planted.json"
    planted.write(planted_file)

    delivery_id = failed(stack)
    body = json.dumps({"delivery_id": delivery_id, "marker": "planted body " + uuid.uuid4().hex})
    log_audit.register_body(body)
    record_step(stack, delivery_id, "echo", body)

    with console_process(planted_file, tmp_path / "console.out") as url:
        base, _, query = url.partition("/?")
        texts = [fetch(f"{base}{path}?{query}")[2] for path in (*PAGES, f"/delivery/{delivery_id}")]
    assert all("relaylink-receiver" in text for text in texts)
    assert delivery_id in texts[-1]
    # The audit sees each planted value (it would report a leak)...
    assert log_audit.check_text(f"<td>{token}</td>") == ["mcp_token"]
    assert "secret_shape" in log_audit.check_text(f"<td>{secret}</td>")
    assert "body" in log_audit.check_text(f"<td>{body}</td>")
    # ... and no page holds one.
    findings = {i: log_audit.check_text(text) for i, text in enumerate(texts)}
    assert {i: rules for i, rules in findings.items() if rules} == {}
    assert state.webhook_url not in "".join(texts)


# --- approvals -----------------------------------------------------------------------


def parked(stack: Stack, title: str, *, tool_input: dict[str, str] | None = None) -> str:
    """A delivery the agent's gate parked, proposing an alert titled ``title`` (or, with
    ``tool_input``, a call of the tool ``title``)."""
    delivery_id = stack.accept()
    claim = stack.claims.claim(delivery_id, owner="w0", now=NOW, lease_seconds=300).claim
    store = approvals.approvals_store(stack.target)
    name = "alert" if tool_input is None else "tool.0123456789abcdef"
    proposal: dict[str, object] = {"title": title, "summary": "ships today", "channels": ["alert"]}
    if tool_input is not None:
        proposal = {"tool": title, "input": tool_input, "tool_use_id": "t1", "key": "k"}
    store.request(
        ApprovalRecord(delivery_id, name, proposal, NOW, NOW + 3600), expires_at=NOW + 86400
    )
    stack.claims.park(claim, now=NOW, approval=name, deadline=NOW + 3600)
    return delivery_id


def shown_digest(stack: Stack, delivery_id: str, name: str = "alert") -> str:
    """The proposal digest the approvals page posts with a decision."""
    record = approvals.approvals_store(stack.target).get(delivery_id, name)
    assert record is not None
    page = get(make_console(stack), "/approvals").body
    assert f'name="proposal" value="{record.proposal_digest()}"' in page
    return record.proposal_digest()


def test_a_console_decision_names_what_it_showed_in_time_and_who_made_it(stack: Stack) -> None:
    console = make_console(stack, operator="alice")
    delivery_id = parked(stack, "Pay \u202eacme\u200b")
    page = get(console, "/approvals").body
    assert "\u202e" not in page and "\u200b" not in page
    assert "Pay \\u202eacme\\u200b" in page
    digest = shown_digest(stack, delivery_id)
    form = {"delivery_id": delivery_id, "name": "alert"}
    other = post(console, "/actions/approve", {**form, "proposal": "0" * 64})
    assert (other.status, error(other)) == (409, "approval_other_proposal")
    unnamed = post(console, "/actions/approve", form)
    assert (unnamed.status, error(unnamed)) == (400, "missing_proposal")
    late = make_console(stack, operator="alice", clock=lambda: NOW + 3600)
    expired = post(late, "/actions/approve", {**form, "proposal": digest})
    assert (expired.status, error(expired)) == (409, "approval_expired")
    assert stack.drain(stack.target.work_queue_url) == []  # nothing acts
    approved = post(console, "/actions/approve", {**form, "proposal": digest})
    assert approved.status == 200, approved.body
    record = approvals.approvals_store(stack.target).get(delivery_id, "alert")
    assert record is not None and record.decided is not None
    assert record.decided.decided_by == "alice (console)"
    assert "approved by alice (console)" in get(console, f"/delivery/{delivery_id}").body


def test_approvals_shows_a_proposed_tool_call_and_its_input_escaped(stack: Stack) -> None:
    delivery_id = parked(stack, "open_ticket", tool_input={"note": "<b>now</b>"})
    response = get(make_console(stack), "/approvals")
    assert delivery_id in response.body
    assert "<b>tool open_ticket</b>" in response.body
    assert "<pre>{&quot;note&quot;:&quot;&lt;b&gt;now&lt;/b&gt;&quot;}</pre>" in response.body


def test_approvals_lists_each_waiting_delivery_with_its_proposal_escaped(stack: Stack) -> None:
    delivery_id = parked(stack, "<script>alert(1)</script>")
    response = get(make_console(stack), "/approvals")
    assert response.status == 200
    assert delivery_id in response.body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.body
    assert "<script>alert(1)" not in response.body
    assert 'action="/actions/approve"' in response.body
    read_only = get(make_console(stack, read_only=True), "/approvals")
    assert 'action="/actions/approve"' not in read_only.body
    page = get(make_console(stack), f"/delivery/{delivery_id}")
    assert "approval asked" in page.body
    assert 'action="/actions/deny"' in page.body
    home = get(make_console(stack), "/")
    assert "awaiting approval</a><b>1</b>" in home.body


def test_approve_resumes_once_and_deny_after_it_is_a_conflict(stack: Stack) -> None:
    console = make_console(stack)
    delivery_id = parked(stack, "t")
    digest = shown_digest(stack, delivery_id)
    form = {"delivery_id": delivery_id, "name": "alert", "note": "looks right", "proposal": digest}
    approved = post(console, "/actions/approve", form)
    assert approved.status == 200, approved.body
    assert json.loads(approved.body)["message"] == f"{delivery_id}: approved"
    assert [json.loads(b)["delivery_id"] for b in stack.drain(stack.target.work_queue_url)] == [
        delivery_id
    ]
    again = post(console, "/actions/approve", form)
    assert json.loads(again.body)["message"] == f"{delivery_id}: already approved, nothing changed"
    assert stack.drain(stack.target.work_queue_url) == []  # resumed once
    denied = post(console, "/actions/deny", form)
    assert (denied.status, error(denied)) == (409, "approval_decided")
    record = approvals.approvals_store(stack.target).get(delivery_id, "alert")
    assert record is not None and record.decided is not None
    assert (record.decided.decided_by, record.decided.note) == ("console", "looks right")
    page = get(console, f"/delivery/{delivery_id}")
    assert "approval decided" in page.body
    assert "approved by console: looks right" in page.body
    unknown = post(console, "/actions/deny", {"delivery_id": str(uuid.uuid4()), "proposal": digest})
    assert (unknown.status, error(unknown)) == (409, "not_awaiting_approval")
