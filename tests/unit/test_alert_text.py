"""What an alert shows of outside text: the defanging rule, case by case."""

from __future__ import annotations

import pytest

from functions.workflows.alert_text import alert_line, defang, one_line, visible
from tests.adversarial.summaries import SUMMARIES, TITLES


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("<!channel> now", "\u2039!channel\u203a now"),
        ("@here and admin@evil.example", "\uff20here and admin\uff20evil[.]example"),
        ("https://evil.example/x?a=1", "https[:]//evil[.]example/x?a=1"),
        ("[x](javascript:alert(1))", "[x] (javascript[:]alert(1))"),
        ("[x][1] and [1]: ftp://a.example", "[x] [1] and [1] : ftp[:]//a[.]example"),
        ("evil\uff0eexample and 192.0.2.7", "evil[.]example and 192[.]0[.]2[.]7"),
        # Left alone: what no renderer acts on stays as written.
        ("version 1.2.3, e.g. 4 items: done", "version 1.2.3, e.g. 4 items: done"),
    ],
)
def test_defang_makes_mentions_urls_and_links_inert_and_keeps_them_legible(
    raw: str, shown: str
) -> None:
    assert defang(raw) == shown


@pytest.mark.parametrize("text", [*SUMMARIES.values(), *TITLES.values()])
def test_defang_is_idempotent(text: str) -> None:
    once = defang(visible(text))
    assert defang(once) == once


def test_one_line_drops_invisible_characters_and_collapses_whitespace() -> None:
    assert visible("a\u200bb\u202ec\r\nd\u2028e\t") == "abc\nde"
    assert (
        one_line("  Invoice\nPackage 1\r\n\x0b Archived\u2028x ") == "Invoice Package 1 Archived x"
    )
    assert alert_line("<b>" + "x" * 50, 10) == "\u2039b\u203axxxxxx…"
