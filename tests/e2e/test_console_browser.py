"""The console in a real browser: headless Chromium (Debian's) driven by Playwright.

A small load on a local stack (normal deliveries, a conflict, a missing package);
the home page shows without a click the counts by state, the last hour's throughput and
the recent deliveries of every state (completed ones, the failed delivery, the
quarantined conflict), and finds a delivery by its id; the failed delivery's page shows
why; the package is published late and a click on Requeue brings the delivery to
completed, and its page draws its trace as a waterfall in time order (both attempts,
the requeue between them). Screenshots go to the test's temporary folder, and with
``CONSOLE_SCREENSHOTS=docs`` also to docs/images/ (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from local.sender import Sender, SenderConfig
from local.stack import LocalStack
from local.stack_options import StackOptions
from tests.e2e.console_process import console
from tests.e2e.stacks import audited
from tests.polling import poll

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
DEADLINE_SECONDS = 60.0
MISSING_PACKAGE = "pkg_missing_console"


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's chromium, headless. Started after the load: Playwright's sync API runs an
    event loop of its own in this thread while it is open."""
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium (.ci/run)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _load(stack: LocalStack) -> dict[str, str]:
    """Three deliveries, one conflicting resend, one missing package; ids by role."""
    state = stack.state
    config = SenderConfig(
        url=state.webhook_url, secrets=tuple(state.signing_secrets), time_scale=300.0
    )

    async def send() -> dict[str, str]:
        async with Sender(config) as sender:
            normal = [sender.new_delivery(mcp_url=state.mcp_url) for _ in range(3)]
            missing = sender.new_delivery(mcp_url=state.mcp_url, package_id=MISSING_PACKAGE)
            for delivery in [*normal, missing]:
                assert (await sender.deliver(delivery)).acknowledged
            conflict = await sender.attempt(normal[0].conflicting(), number=2)
            assert conflict.answer == "409"
            roles = {f"normal{n}": d.delivery_id for n, d in enumerate(normal)}
            return {**roles, "missing": missing.delivery_id}

    return asyncio.run(send())


def _shoot(page: Page, folder: Path, name: str) -> None:
    path = folder / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("CONSOLE_SCREENSHOTS") == "docs":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMAGES / path.name)


def _span_row(text: str) -> tuple[str, float]:
    """A waterfall row's span name and its start (milliseconds from the trace's start)."""
    name, start = text.split("\t")[:2]
    return name.strip(), float(start.strip().removeprefix("+").removesuffix(" ms"))


def _row_text(page: Page, delivery_id: str) -> str:
    return page.locator("tr", has_text=delivery_id).first.inner_text()


def test_home_shows_states_then_a_failed_delivery_is_requeued_and_completes(
    tmp_path: Path,
) -> None:
    state_file = tmp_path / "state.json"
    with audited(StackOptions(seed=5, state_file=str(state_file))) as stack:
        ids = _load(stack)
        states = poll(
            stack.inbox_states,
            lambda s: all(s.get(i) in ("completed", "failed") for i in ids.values()),
            deadline_seconds=DEADLINE_SECONDS,
            pause_seconds=0.2,
        )
        assert states[ids["missing"]] == "failed"
        assert [states[ids[f"normal{n}"]] for n in range(3)] == ["completed"] * 3

        with console(state_file, tmp_path / "console.out") as url, chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(url)
            # The first page, no click: the recent deliveries of every state, with their
            # state, outcome code and age; counts by state; the last hour's throughput.
            assert page.title().startswith("Home")
            failed_row = _row_text(page, ids["missing"])
            assert "failed" in failed_row and "package_not_found" in failed_row
            conflict_row = (
                page.locator("tr", has_text=ids["normal0"]).filter(has_text="quarantined").first
            )
            assert "other body" in conflict_row.inner_text()
            for n in range(3):
                done_row = page.locator("tr", has_text=ids[f"normal{n}"]).filter(
                    has_text="completed"
                )
                assert done_row.count() == 1
                assert "\tok\t" in done_row.inner_text()
            count = {"failed": "1", "quarantined": "1", "completed in the last hour": "3"}
            for label, shown in count.items():
                assert page.locator(".count", has_text=label).locator("b").inner_text() == shown
            assert "3 completed" in page.locator(".throughput").inner_text()
            assert "The local stack has no CloudWatch alarms." in page.content()
            _shoot(page, tmp_path, "home")

            page.get_by_label("delivery id").fill(ids["normal1"])
            page.get_by_role("button", name="Find a delivery by id").click()
            page.wait_for_url("**/delivery?**")
            summary = page.locator(".summary").inner_text()
            assert ids["normal1"] in summary and "completed" in summary and "ok" in summary
            page.go_back()

            page.get_by_role("link", name=ids["missing"]).first.click()
            page.wait_for_url("**/delivery/**")
            summary = page.locator(".summary").inner_text()
            assert "failed" in summary and "package_not_found" in summary
            _shoot(page, tmp_path, "delivery-failed")

            # RelayLink publishes the package late; the operator requeues.
            stack.mcp.controls.publish(MISSING_PACKAGE)  # type: ignore[union-attr]
            page.get_by_role("button", name="Requeue").click()
            page.wait_for_selector(".note")
            assert "requeued" in page.locator(".note").inner_text()

            def look() -> str:
                page.reload()
                return page.locator(".summary").inner_text()

            summary = poll(
                look,
                lambda s: "completed" in s,
                deadline_seconds=DEADLINE_SECONDS,
                pause_seconds=0.3,
            )
            assert "completed" in summary and "ok" in summary
            timeline = page.locator("table").first.inner_text()
            assert "completed" in timeline
            # The local stack's notify workflow archives with a repeatable put: marked done
            # by the completion; the package it ran on is recorded on the inbox item.
            assert "archive: done (repeatable: marked by the completion)" in timeline
            assert re.search(r"package recorded\s+sha256 [0-9a-f]{64}, \d+ bytes", timeline)
            _shoot(page, tmp_path, "delivery-completed")

            # Its trace, drawn as a waterfall in time order: the failed attempt, the
            # operator's requeue, the attempt that completed it.
            def spans() -> list[tuple[str, float]]:
                page.reload()
                rows = page.locator("table.waterfall tr.span, table.waterfall tr.span-error")
                return [_span_row(text) for text in rows.all_inner_texts()]

            drawn = poll(
                spans,
                lambda rows: [n for n, _ in rows].count("attempt") == 2,
                deadline_seconds=DEADLINE_SECONDS,
                pause_seconds=0.3,
            )
            names = [name for name, _ in drawn]
            for expected in ("accept", "relay", "claim", "mcp.get_package", "operator.requeue"):
                assert expected in names, names
            assert names.count("attempt") == 2
            assert names[0] == "accept"
            starts = [start for _, start in drawn]
            assert starts == sorted(starts)
            assert page.locator("table.waterfall svg rect").count() == len(drawn)
            _shoot(page, tmp_path, "delivery-trace")

            page.get_by_role("link", name="Quarantine").click()
            assert ids["normal0"] in page.locator("table").inner_text()
            _shoot(page, tmp_path, "quarantine")
            page.close()
    for name in ("home", "delivery-failed", "delivery-completed", "delivery-trace", "quarantine"):
        assert (tmp_path / f"console-{name}.png").stat().st_size > 10_000
