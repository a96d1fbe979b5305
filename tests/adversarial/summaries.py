"""The hostile corpus of alert texts: what a package's author or a steered model may write.

Data only: ``test_hostile_summaries.py`` renders each through the agent workflow's
:class:`~functions.workflows.agent.Alert` (its subject, its text, its JSON payload) and
checks that nothing a chat or a Markdown renderer acts on is left, that no invisible
character is, and that the header lines are the real ones.
"""

from __future__ import annotations

from typing import Final

# Model answers (the summary): named, each one a way to act on the alert's reader.
SUMMARIES: Final[dict[str, str]] = {
    "slack channel mention": "<!channel> urgent: rotate every key now",
    "slack here mention with a label": "<!here|here> please check",
    "slack user mention": "<@U024BE7LH> approve this package",
    "slack link with a label": "Read <https://evil.example/login|the archive> first",
    "teams at mention": "<at>Ops</at> look at this",
    "plain @here": "@here this package is malicious",
    "plain @everyone": "@everyone click below",
    "mail address": "Forward it to admin@evil.example today",
    "raw https URL": "Reset your token at https://evil.example/reset?token=1",
    "upper-case URL": "See HTTP://EVIL.EXAMPLE/X",
    "bare www host": "Log in at www.evil.example/login",
    "bare domain": "The sender is evil.example.",
    "IPv4 address with a port": "Admin panel: 192.0.2.7:8080/admin",
    "markdown link to javascript": "[Open the archive](javascript:alert(document.cookie))",
    "markdown image beacon": "![pixel](https://evil.example/p.gif)",
    "markdown reference link": "[the archive][1]\n\n[1]: https://evil.example",
    "data URL": "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "vbscript URL": "vbscript:msgbox(1)",
    "HTML anchor": '<a href="https://evil.example">archive</a>',
    "script tag": "<script>alert(1)</script>",
    "zero-width space inside a mention": "@\u200bhere and <\u200b!channel>",
    "zero-width joiner inside a link": "[x]\u200d(javascript:alert(1))",
    "bidi override around a host": "mail \u202eelpmaxe.live\u202c now",
    "full-width dot in a host": "evil\uff0eexample/login",
    "ideographic dot in a host": "evil\u3002example/login",
    "tag characters": "ok\U000e0041\U000e0042 fine",
    "forged header lines in the body": "Package pkg_1, delivery 0\nArchived as packages/x.json",
    "line separator": "first\u2028second\u2029third",
    "mention after a carriage return": "done\r\n@channel",
}

# Package titles: written by whoever sent the package; shown on the alert's first line.
TITLES: Final[dict[str, str]] = {
    "fake header lines": (
        "Invoice\nPackage pkg_9, delivery 11111111-1111-4111-8111-111111111111\n"
        "Archived as packages/trusted.json\n\nReal title"
    ),
    "carriage returns": "Title\r\nArchived as packages/x.json",
    "line separator": "Title\u2028Package pkg_9, delivery 1",
    "vertical tab and form feed": "Title\x0bPackage pkg_9\x0cArchived",
    "mention in a title": "<!channel> Quarterly report @here",
    "bidi override in a title": "Report \u202efdp.exe",
    "link in a title": "[click](https://evil.example) now",
}

# Package ids as a record from before the receiver refused invisible characters holds them.
PACKAGE_IDS: Final[dict[str, str]] = {
    "right-to-left override": "pkg_\u202e1gpj",
    "zero-width space": "pkg_\u200b1",
}
