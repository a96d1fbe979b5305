"""What a person reads before deciding: every hidden character escaped, cuts said."""

from __future__ import annotations

import pytest

from ops.shown_text import cut, visible


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Pay acme", "Pay acme"),
        ("caf\u00e9 \u00fc\u00df \u4e2d\u6587", "caf\u00e9 \u00fc\u00df \u4e2d\u6587"),
        ("a\u202eb\u202c", "a\\u202eb\\u202c"),  # bidi override and pop
        ("a\u2066b\u2069", "a\\u2066b\\u2069"),  # bidi isolates
        ("a\u200bb\u200dc\ufeff", "a\\u200bb\\u200dc\\ufeff"),  # zero-width, BOM
        ("a\x85b\x9bc", "a\\u0085b\\u009bc"),  # C1 controls (NEL, CSI)
        ("a\x1b[31mb", "a\\u001b[31mb"),  # an ANSI escape
        ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
        ("a\u2028b", "a\\u2028b"),  # line separator
        ("a\u00a0b\u3000c", "a\\u00a0b\\u3000c"),  # spaces that look like a plain one
        ("a\u3164b\u115fc", "a\\u3164b\\u115fc"),  # Hangul fillers render as nothing
        ("tag\U000e0041", "tag\\U000e0041"),  # a tag character
        ("C:\\u202e", "C:\\\\u202e"),  # a backslash: never poses as an escape
    ],
)
def test_visible_escapes_what_a_reader_would_not_see(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_cut_says_where_it_cut_and_leaves_a_short_text_whole() -> None:
    assert cut("abcdef", 6) == "abcdef"
    assert cut("abcdef", None) == "abcdef"
    assert cut("abcdefgh", 3) == "abc… [cut at 3 of 8 characters]"
