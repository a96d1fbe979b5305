"""Text a person reads before deciding, shown as it is: nothing hidden, nothing cut
without saying so.

A proposal quotes a model that read third-party content. Characters a terminal or a
browser does not show as themselves (controls, C1 included; bidi overrides such as
U+202E, which reorder what follows; zero-width and other invisible characters) would
let what a person reads differ from what runs: each is shown as its escape
(``\\u202e``). A backslash is shown doubled, so that no text can pose as an escape.
"""

from __future__ import annotations

import unicodedata
from typing import Final

# Unicode categories never shown as themselves: controls, format characters (bidi
# controls, zero-width ones, the BOM), surrogates, private use, unassigned, and the
# line and paragraph separators.
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Letters and marks that render as nothing (Hangul fillers, the braille blank, the
# combining grapheme joiner), and spaces that look like a plain one.
_INVISIBLE: Final = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0")
_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def visible(text: str) -> str:
    """``text`` with every character a reader would not see as itself escaped."""
    return "".join(_shown(char) for char in text)


def _shown(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    category = unicodedata.category(char)
    hidden = category in _HIDDEN_CATEGORIES or char in _INVISIBLE
    if hidden or (category == "Zs" and char != " "):
        code = ord(char)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


def cut(text: str, limit: int | None) -> str:
    """``text`` whole, or its first ``limit`` characters and how much was left out."""
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… [cut at {limit} of {len(text)} characters]"
