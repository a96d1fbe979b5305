"""The console's pages as pure functions: escaping, ages, links, read-only, no package URL."""

from __future__ import annotations

from functions.core.models import InboxItem, QuarantineRecord, State
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.steps import StepRecord, StepStatus, StoredResult
from functions.core.spend import ModelSpend
from ops.console import views
from ops.console.reads import (
    Alarm,
    Alarms,
    Delivery,
    DeliveryFilter,
    DeliveryPage,
    Home,
    Listed,
)
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


def home(**fields: object) -> Home:
    values: dict[str, object] = {
        "open_work": 0,
        "failed": 0,
        "quarantined": 0,
        "effects_in_doubt": 0,
        "completed_last_hour": 0,
        "failed_last_hour": 0,
        "ignored_last_hour": 0,
        "recent": [],
        "alarms": Alarms(source=None),
        "now": NOW,
        **fields,
    }
    return Home(**values)  # type: ignore[arg-type]


def test_values_are_escaped_everywhere() -> None:
    shown = views.home_page(
        chrome(),
        home(
            failed=1,
            recent=[Listed(NOW - 90, item=item(HOSTILE_ID))],
            alarms=Alarms("stack", [Alarm("<b>alarm</b>", "<i>why</i>", NOW - 60)]),
        ),
    )
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


def test_the_timeline_shows_the_recorded_package_the_default_archive() -> None:
    recorded = PackageRecord(
        "d-1", "b" * 64, StoredResult(size=321, inline="{}"), NOW - 30, "owner", "c" * 64, NOW
    )
    progress = Progress([], [], package=recorded)
    shown = views.delivery_page(chrome(), Delivery(item(), None, progress, []))
    timeline = shown[shown.index("<h2>Timeline</h2>") :]
    assert "<td>package recorded" in timeline and "b" * 64 in timeline and "321 bytes" in timeline
    assert "refetched another" in timeline and "c" * 64 in timeline
    no_record = views.delivery_page(chrome(), Delivery(item(), None, Progress([], []), []))
    assert "package recorded" not in no_record


def test_the_delivery_page_shows_what_its_model_calls_cost() -> None:
    spend = ModelSpend(model_calls=2, answered=1, input_tokens=812, output_tokens=57)
    progress = Progress([], [], spend=spend)
    shown = views.delivery_page(chrome(), Delivery(item(), None, progress, []))
    assert "Model calls <b>2</b> (1 answered, 1 of unknown outcome" in shown
    assert "tokens <b>812</b> in / <b>57</b> out" in shown
    quiet = views.delivery_page(chrome(), Delivery(item(), None, Progress([], []), []))
    assert "Model calls" not in quiet


def test_a_running_attempt_shows_only_the_start_of_its_lease_owner() -> None:
    running = item(state=State.PROCESSING, lease_until=NOW + 30)
    shown = views.delivery_page(chrome(), Delivery(running, "0123abcd", Progress([], []), []))
    assert "0123abcd…" in shown


def test_home_says_when_the_stack_has_no_alarms_to_show() -> None:
    shown = views.home_page(chrome(), home())
    assert "The local stack has no CloudWatch alarms." in shown
    assert "No delivery yet." in shown
    assert 'http-equiv="refresh"' in shown
    quiet = views.home_page(chrome(), home(alarms=Alarms(source="prod")))
    assert "No alarm of prod is in ALARM." in quiet
    # Any delivery is also found by its id on the Delivery page.
    assert 'action="/delivery"' in shown and 'name="id"' in shown
    assert 'name="token" value="tok"' in shown


def test_home_counts_by_state_shows_the_hours_throughput_and_every_state_recent() -> None:
    conflict = QuarantineRecord("d-q", "package.received", "a" * 64, "b" * 64, NOW - 30, NOW)
    done = item("d-done", State.COMPLETED, completed_at=NOW - 20, last_error=None)
    shown = views.home_page(
        chrome(),
        home(
            open_work=6,
            failed=1,
            quarantined=1,
            effects_in_doubt=3,
            completed_last_hour=90,
            failed_last_hour=1,
            ignored_last_hour=2,
            recent=[
                Listed(NOW - 20, item=done),
                Listed(NOW - 30, quarantine=conflict),
                Listed(NOW - 90, item=item()),
            ],
        ),
    )
    counts = shown[shown.index('class="counts"') : shown.index("</section>")]
    assert "open (pending, processing)</a><b>6</b>" in counts
    assert ">failed</span></a><b>1</b>" in counts
    assert "quarantined</a><b>1</b>" in counts and "effects in doubt</a><b>3</b>" in counts
    assert "completed in the last hour</a><b>90</b>" in counts
    assert "state=completed" in counts
    throughput = shown[shown.index('class="throughput"') :].split("</p>")[0]
    assert "<b>90</b> completed (1.5 per minute)" in throughput
    assert "<b>1</b> failed" in throughput and "<b>2</b> ignored" in throughput
    done_row = shown[shown.index("d-done") :].split("</tr>")[0]
    assert "state-completed" in done_row and "<td>ok</td>" in done_row and "20s" in done_row
    row = shown[shown.index("d-q") :].split("</tr>")[0]
    assert "quarantined" in row and "other body" in row and "30s" in row
    assert shown.index("d-done") < shown.index("d-q") < shown.index("d-1")


def test_the_timeline_shows_a_repeatable_effect_marked_by_the_completion() -> None:
    done = item(state=State.COMPLETED, completed_at=NOW - 10, effects_done=frozenset({"archive"}))
    progress = Progress([], [], ["archive"], NOW - 10)
    shown = views.delivery_page(chrome(), Delivery(done, None, progress, []))
    timeline = shown[shown.index("<h2>Timeline</h2>") :]
    assert "archive: " in timeline and "marked by the completion" in timeline
    assert timeline.index("archive: ") < timeline.index("<td>completed")


def test_the_deliveries_filter_offers_every_state() -> None:
    page = views.deliveries_page(
        chrome(), DeliveryFilter(state=State.COMPLETED), DeliveryPage([], False), {}
    )
    for state in State:
        assert f'<option value="{state.value}"' in page
    assert '<option value="completed" selected>' in page


def test_a_failed_tool_step_shows_its_tool_and_the_exception_type_beside_its_digest() -> None:
    step = StepRecord(
        "d-1",
        "tool.8493dfe8a1b2c3d4",
        StepStatus.FAILED,
        5,
        NOW - 60,
        label="tool lookup",
        error="tool lookup raised KeyError",
    )
    shown = views.delivery_page(chrome(), Delivery(item(), None, Progress([step], []), []))
    assert "tool.8493dfe8a1b2c3d4 (tool lookup)" in shown
    assert "<b>tool lookup raised KeyError</b>" in shown
