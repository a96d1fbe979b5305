"""Text that reaches an alert: one line where a line is expected, and nothing a chat acts on.

An alert is read by people in a mail client or a chat channel (the SNS topic's
subscriptions, a chat-style ``alert_url``). Every text in it that came from outside
(the package's title, written by whoever sent the package; its ``package_id``; the
model's summary, which the package steers) goes through this module first:

* :func:`visible` drops every invisible character: control characters but newline and
  tab, Unicode format characters (bidi overrides such as U+202E, zero-width
  characters, tag characters), private-use, surrogate and unassigned code points, and
  the line and paragraph separators. What a reader sees is then what is there.
* :func:`one_line` also collapses every run of whitespace (line breaks included) to
  one space: a title cannot start a second line, so it cannot print a fake
  "Package ..., delivery ..." or "Archived as ..." line above the real header.
* :func:`defang` makes what a chat or Markdown renderer would act on inert, keeping it
  legible:

  - ``<`` and ``>`` become the single angle quotation marks U+2039 and U+203A: no
    Slack control sequence (``<!channel>``, ``<!here>``, ``<@U123>``,
    ``<https://x|label>``), no Teams ``<at>`` and no HTML;
  - ``@`` becomes the full-width at sign U+FF20: no ``@here``, ``@channel``, ``@everyone`` or
    ``@someone`` mention, and no mail address turned into a link;
  - a URL's scheme separator ``://`` becomes ``[:]//``, and ``javascript:``,
    ``data:``, ``vbscript:``, ``file:``, ``mailto:``, ``tel:`` and ``sms:`` lose their
    colon the same way (``javascript[:]``);
  - a dot between a name and a letter-only label (``evil.example``), or inside an
    IPv4 address, becomes ``[.]``, so no bare domain or address is linked either
    (the ideographic and full-width dots that IDNA reads as dots too);
  - Markdown's link and image syntax ``[text](target)``, ``[text][ref]`` and
    ``[ref]: target`` is broken by a space after the ``]``.

The result is still untrusted text, shown, never fetched or run. Every rule is
idempotent, so defanging twice changes nothing.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

# Control, format, private-use, surrogate and unassigned code points, and the Unicode
# line and paragraph separators: characters a reader cannot see.
INVISIBLE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})
_KEPT_CONTROLS: Final = frozenset("\n\t")
_ELLIPSIS: Final = "…"
_REPLACED: Final = str.maketrans({"<": "\u2039", ">": "\u203a", "@": "\uff20"})
_SCHEME_SEPARATOR: Final = re.compile(r"://")
_BARE_SCHEME: Final = re.compile(r"(?i)\b(javascript|data|vbscript|file|mailto|tel|sms):")
# IDNA maps U+3002, U+FF0E and U+FF61 to "." as well.
_DOTS: Final = "[.\u3002\uff0e\uff61]"
_HOST_DOT: Final = re.compile(rf"(?i)(?<=[a-z0-9_-]){_DOTS}(?=[a-z]{{2,63}}\b)")
_IPV4: Final = re.compile(rf"(?<![\d.])\d{{1,3}}(?:{_DOTS}\d{{1,3}}){{3}}(?![\d.])")
_DOT: Final = re.compile(_DOTS)
_MARKDOWN_LINK: Final = re.compile(r"\](?=[(\[:])")


def is_invisible(char: str) -> bool:
    """Whether ``char`` is one of :data:`INVISIBLE_CATEGORIES`."""
    return unicodedata.category(char) in INVISIBLE_CATEGORIES


def visible(text: str) -> str:
    """``text`` without invisible characters (newlines and tabs kept, ``\\r\\n`` as
    ``\\n``), trimmed."""
    return "".join(
        char
        for char in text.replace("\r\n", "\n")
        if char in _KEPT_CONTROLS or not is_invisible(char)
    ).strip()


def one_line(text: str) -> str:
    """``text`` visible and on one line: every run of whitespace (line and paragraph
    separators, vertical tab and form feed too) is one space."""
    return " ".join(visible(" ".join(text.split())).split())


def capped(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, the last being "…" when cut.

    Raises:
        ValueError: ``max_chars`` is less than 1.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1].rstrip() + _ELLIPSIS


def defang(text: str) -> str:
    """``text`` with mentions, URLs, addresses and Markdown links made inert (the
    module docstring gives each rule)."""
    text = text.translate(_REPLACED)
    text = _SCHEME_SEPARATOR.sub("[:]//", text)
    text = _BARE_SCHEME.sub(r"\1[:]", text)
    text = _HOST_DOT.sub("[.]", text)
    text = _IPV4.sub(lambda address: _DOT.sub("[.]", address.group()), text)
    return _MARKDOWN_LINK.sub("] ", text)


def alert_line(text: str, max_chars: int) -> str:
    """An outside text shown as one line of an alert: visible, one line, defanged,
    capped."""
    return capped(defang(one_line(text)), max_chars)


def alert_block(text: str) -> str:
    """An outside text shown as a paragraph of an alert: visible and defanged."""
    return defang(visible(text))
