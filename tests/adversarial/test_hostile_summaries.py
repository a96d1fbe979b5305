"""Every hostile alert text of the corpus, rendered as the agent workflow sends it."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

from functions.workflows.agent import MAX_SUMMARY_CHARS, Alert, ModelSummary
from functions.workflows.agent_prompt import sanitize_model_output
from functions.workflows.archive import archive_key
from tests.adversarial.summaries import PACKAGE_IDS, SUMMARIES, TITLES

DELIVERY = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"
# What chat clients and Markdown renderers act on, written independently of the rules.
ACTIVE = {
    "angle-bracket control or markup": re.compile(r"[<>]"),
    "mention or mail address": re.compile(r"@"),
    "URL scheme": re.compile(r"(?i)\b[a-z][a-z0-9+.-]*:(//|(?<=javascript:)|(?<=data:))"),
    "host name": re.compile(r"(?i)\b(?:[a-z0-9-]+[.\u3002\uff0e\uff61])+[a-z]{2,}\b"),
    "IPv4 address": re.compile(r"\d{1,3}(?:\.\d{1,3}){3}"),
    # CommonMark: no space may come between "]" and "(", "[" or ":" of a link.
    "Markdown link": re.compile(r"\][(\[:]"),
}


def _alert(*, title: str = "Title", package_id: str = "pkg_1", summary: str = "ok") -> Alert:
    recorded = ModelSummary(
        sanitize_model_output(summary, MAX_SUMMARY_CHARS), "end_turn", 1, 1, False
    )
    return Alert(DELIVERY, "package.received", package_id, title, recorded, archive_key(DELIVERY))


def _assert_inert(text: str) -> None:
    for kind, pattern in ACTIVE.items():
        assert not pattern.search(text), f"{kind} left in {text!r}"
    invisible = [
        char
        for char in text
        if unicodedata.category(char) in {"Cc", "Cf", "Co", "Cn", "Zl", "Zp"} and char not in "\n\t"
    ]
    assert not invisible, f"invisible characters left in {text!r}"


def _assert_real_header(alert: Alert, *, title: str, package_id: str) -> None:
    header = alert.text().split("\n")[:4]
    assert header == [
        title,
        f"Package {package_id}, delivery {DELIVERY}",
        f"Archived as {archive_key(DELIVERY)}",
        "",
    ]


@pytest.mark.parametrize("name", sorted(SUMMARIES))
def test_a_hostile_summary_reaches_the_alert_inert(name: str) -> None:
    alert = _alert(summary=SUMMARIES[name])
    _assert_inert(alert.body)
    _assert_inert(json.loads(json.dumps(alert.payload()))["summary"])
    _assert_real_header(alert, title="Title", package_id="pkg_1")
    assert alert.text().endswith(alert.body)


@pytest.mark.parametrize("name", sorted(TITLES))
def test_a_hostile_title_stays_on_the_first_line_inert(name: str) -> None:
    alert = _alert(title=TITLES[name])
    title = alert.payload()["title"]
    assert isinstance(title, str) and "\n" not in title and title == title.strip()
    assert "  " not in title
    _assert_inert(title)
    _assert_real_header(alert, title=title, package_id="pkg_1")
    assert "\n" not in alert.subject() and alert.subject().isascii()


@pytest.mark.parametrize("name", sorted(PACKAGE_IDS))
def test_a_stored_package_id_with_invisible_characters_is_shown_without_them(name: str) -> None:
    alert = _alert(package_id=PACKAGE_IDS[name])
    shown = alert.payload()["package_id"]
    assert isinstance(shown, str)
    _assert_inert(shown)
    _assert_real_header(alert, title="Title", package_id=shown)
    assert shown in alert.subject()
