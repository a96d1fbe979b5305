"""The console's pages as pure functions: escaping, ages, links, read-only, no package URL."""

from __future__ import annotations

from functions.core.models import InboxItem, QuarantineRecord, State
from ops.console import views
from ops.console.reads import Alarm, Alarms, Delivery, Home, Listed
from ops.inbox import Progress

NOW = 1_800_000_000
HOSTILE_ID = '<script>alert("x")</script>'


def chrome(*, read_only: bool = False) -> views.Chrome:
    return views.Chrome(views.Links("tok"), "local stack", read_only, NOW)


def item(delivery_id: str = "d-1", state: State = State.FAILED, **fields: object) -> InboxItem:
    values: dict[str, object] = {
        "delivery_id": delivery_id,
        "event": "package.received",
        "body_sha256": "a" * 64,
        "received_at": NOW - 7200,
        "state": state,
        "attempts": 2,
        "last_error": "package_not_found",
        "package_id": "pkg_1",
        "mcp_url": "https://mcp.relaylink.example/mcp",
        "state_changed_at": NOW - 90,
        **fields,
    }
    return InboxItem(**values)  # type: ignore[arg-type]


def test_age_uses_the_largest_whole_unit() -> None:
    assert [views.age(NOW - s, NOW) for s in (0, 59, 60, 3599, 3600, 86400 * 3)] == [
        "0s",
        "59s",
        "1m",
        "59m",
        "1h",
        "3d",
    ]
    assert views.age(None, NOW) == "—"
    assert views.age(NOW + 5, NOW) == "0s"  # a clock ahead of ours is not negative


def test_outcome_is_ok_once_completed_else_the_error_code() -> None:
    assert views.outcome_code(item(state=State.COMPLETED)) == "ok"
    assert views.outcome_code(item()) == "package_not_found"
    assert views.outcome_code(item(state=State.PENDING, last_error=None)) == "—"


def test_links_carry_the_token_and_quote_the_id() -> None:
    links = views.Links("t0k")
    assert (
        links.to("/deliveries", state="failed", reason=None) == "/deliveries?state=failed&token=t0k"
    )
    assert links.delivery("a/b c") == "/delivery/a%2Fb%20c?token=t0k"


def test_values_are_escaped_everywhere() -> None:
    home = Home(
        counts={State.FAILED: 1},
        quarantined=0,
        effects_in_doubt=0,
        failed_last_hour=1,
        recent=[Listed(NOW - 90, item=item(HOSTILE_ID))],
        alarms=Alarms("stack", [Alarm("<b>alarm</b>", "<i>why</i>", NOW - 60)]),
        now=NOW,
    )
    shown = views.home_page(chrome(), home)
    assert HOSTILE_ID not in shown and "<b>alarm</b>" not in shown and "<i>why</i>" not in shown
    assert "&lt;script&gt;" in shown and "%3Cscript%3E" in shown


def test_the_delivery_page_shows_digest_and_package_id_not_the_package_url() -> None:
    delivery = Delivery(item(), None, Progress([], []), [])
    shown = views.delivery_page(chrome(), delivery)
    assert "a" * 64 in shown and "pkg_1" in shown and "package_not_found" in shown
    assert "mcp.relaylink.example" not in shown
    assert "Requeue" in shown and "data-action" in shown
    assert "data-action" not in views.delivery_page(chrome(read_only=True), delivery)


def test_a_completed_delivery_offers_no_requeue_and_names_the_earlier_error() -> None:
    done = item(
        state=State.COMPLETED, completed_at=NOW - 10, state_changed_at=NOW - 10, reset_at=NOW - 60
    )
    shown = views.delivery_page(chrome(), Delivery(done, None, Progress([], []), []))
    assert "Requeue" not in shown
    assert "since the last requeue" in shown and "an earlier attempt's outcome code" in shown
    # The timeline runs in time order: received, requeued, attempts, completed.
    timeline = shown[shown.index("<h2>Timeline</h2>") :]
    whats = ("<td>received", "<td>requeued", "<td>attempts", "<td>completed")
    positions = [timeline.index(what) for what in whats]
    assert positions == sorted(positions)


def test_a_running_attempt_shows_only_the_start_of_its_lease_owner() -> None:
    running = item(state=State.PROCESSING, lease_until=NOW + 30)
    shown = views.delivery_page(chrome(), Delivery(running, "0123abcd", Progress([], []), []))
    assert "0123abcd…" in shown


def test_home_says_when_the_stack_has_no_alarms_to_show() -> None:
    home = Home({}, 0, 0, 0, [], Alarms(source=None), NOW)
    shown = views.home_page(chrome(), home)
    assert "The local stack has no CloudWatch alarms." in shown
    assert "Nothing needs attention." in shown
    assert 'http-equiv="refresh"' in shown
    quiet = views.home_page(chrome(), Home({}, 0, 0, 0, [], Alarms(source="prod"), NOW))
    assert "No alarm of prod is in ALARM." in quiet


def test_home_says_completed_deliveries_are_not_listed_and_where_to_look() -> None:
    local = views.home_page(chrome(), Home({}, 0, 0, 0, [], Alarms(source=None), NOW))
    assert "not listed by the table" in local and "no CloudWatch metrics" in local
    deployed = views.home_page(chrome(), Home({}, 0, 0, 0, [], Alarms(source="prod"), NOW))
    assert "<code>WorkCompleted</code>" in deployed and "of prod" in deployed
    # Any delivery, completed ones too, is found by its id on the Delivery page.
    assert 'action="/delivery"' in local and 'name="id"' in local
    assert 'name="token" value="tok"' in local


def test_home_counts_only_indexed_states_and_lists_a_quarantine_record() -> None:
    conflict = QuarantineRecord("d-q", "package.received", "a" * 64, "b" * 64, NOW - 30, NOW)
    home = Home(
        counts={State.PENDING: 4, State.PROCESSING: 2, State.FAILED: 1},
        quarantined=1,
        effects_in_doubt=3,
        failed_last_hour=1,
        recent=[Listed(NOW - 30, quarantine=conflict), Listed(NOW - 90, item=item())],
        alarms=Alarms(source=None),
        now=NOW,
    )
    shown = views.home_page(chrome(), home)
    counts = shown[shown.index('class="counts"') : shown.index("</section>")]
    for label, number in (("pending", 4), ("processing", 2), ("failed", 1)):
        assert f">{label}</span></a><b>{number}</b>" in counts
    assert "quarantined</a><b>1</b>" in counts and "effects in doubt</a><b>3</b>" in counts
    assert "completed" not in counts and "ignored" not in counts
    row = shown[shown.index("d-q") :].split("</tr>")[0]
    assert "quarantined" in row and "other body" in row and "30s" in row
    assert shown.index("d-q") < shown.index("d-1")
