"""Every hostile corpus case through the real handler against moto: answer and storage."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from functions.core import table_layout
from functions.core.adapters import dynamodb_items as items
from functions.core.host_policy import HostPolicy
from functions.core.models import State
from tests.adversarial import corpus
from tests.adversarial.corpus import CORPUS, HostileCase

POLICY = HostPolicy(corpus.ALLOWED_HOSTS)
OUTCOMES = {"accepted", "duplicate", "ignored", "rejected", "invalid", "quarantined", "too_large"}


def test_hostile_corpus_has_at_least_fifty_named_cases() -> None:
    assert len(CORPUS) >= 50  # 122 today
    assert len({case.name for case in CORPUS}) == len(CORPUS)
    assert len({case.category for case in CORPUS}) >= 10


# The kinds of hostile input the corpus must hold; each names the cases that cover it.
ISSUE_ITEMS: dict[str, list[str]] = {
    "duplicated or folded headers": [
        "signature header repeated (HTTP API joins with a comma)",
        "REST multiValueHeaders with two signature values",
        "signature folded over two lines (obs-fold)",
    ],
    "header values with control characters": [
        "timestamp with a trailing NUL",
        "NUL inside the signature value",
        "CR LF and a forged header inside the delivery header",
        "event header with a tab (signature does not cover it)",
    ],
    "signature lists with empty entries or stray spaces": [
        "valid entry between doubled, leading and trailing spaces",
        "empty entries between a wrong and the valid entry",
        "v1 entry with an empty value",
        "space after the v1 comma",
    ],
    "base64 padding games": [
        "signature without its '=' padding",
        "signature with an extra '='",
        "signature with its padding doubled",
        "signature in the urlsafe alphabet",
    ],
    "timestamps at +-300/301 s and absurd values": [
        "timestamp +300 s (edge of tolerance)",
        "timestamp -300 s (edge of tolerance)",
        "timestamp +301 s",
        "timestamp -301 s",
        "timestamp as twenty digits",
        "timestamp 0 (1970), validly signed",
    ],
    "non-UTF-8 and BOM-prefixed bodies": [
        "Latin-1 byte in the body (not UTF-8)",
        "overlong UTF-8 encoding of '/'",
        "UTF-8 BOM before the JSON",
        "UTF-8 BOM before the JSON, text transport",
    ],
    "deeply nested or huge JSON": [
        "array nested 100,000 deep",
        "5,000-digit integer in an unknown field",
        "object with 23,000 unknown fields, just under the limit",
    ],
    "bodies just under and over 256 KiB": [
        "body of 256 KiB - 1 byte",
        "body of exactly 256 KiB",
        "body of 256 KiB + 1 byte, validly signed",
        "text body of 256 KiB + 1 byte, validly signed",
    ],
    "upper-case vs lower-case delivery ids": [
        "upper-case id in header and body",
        "upper-case header, lower-case body",
        "upper-case replay of an accepted id",
        "mixed-case id in header and body",
    ],
    "mcp_url with userinfo, IP literals, http:// or a host outside the allowlist": [
        "mcp_url with userinfo",
        "mcp_url as an IPv4 literal",
        "mcp_url as an IPv6 literal",
        "mcp_url over plain http",
        "mcp_url on a host outside the allowlist",
    ],
    "package_id with invisible format characters": [
        "package_id with a right-to-left override",
        "package_id with a zero-width space",
        "package_id with a line separator",
    ],
}


def test_hostile_corpus_covers_every_item_the_issue_lists() -> None:
    names_in_corpus = {case.name for case in CORPUS}
    for item, wanted in ISSUE_ITEMS.items():
        assert set(wanted) <= names_in_corpus, item


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_hostile_corpus_case(receiver_factory: Any, case: HostileCase) -> None:
    receiver = receiver_factory([corpus.SECRET], now=corpus.NOW)
    for earlier in case.before:
        assert receiver.invoke(earlier).outcome == "accepted"
    before = receiver.items()
    receiver.calls.reset()

    response = receiver.invoke(case.event)

    assert (response.status, response.outcome, response.reason) == (
        case.status,
        case.outcome,
        case.reason,
    )
    assert response.outcome in OUTCOMES
    assert response.content_type == "application/json"
    if case.before:  # nothing the hostile attempt did changed what was stored first
        assert receiver.items() == before
    if case.stores == corpus.NOTHING:
        assert receiver.items() == []
        assert receiver.calls.count("dynamodb") == 0
    else:
        _assert_stored(receiver, case)


def _assert_stored(receiver: Any, case: HostileCase) -> None:
    (stored,) = receiver.of_kind(table_layout.KIND_INBOX)
    inbox = items.inbox_from_item(stored)
    assert inbox.body_sha256 == hashlib.sha256(case.body).hexdigest()
    # Never the body itself (the biggest string field of an item is far smaller).
    assert all(len(json.dumps(v)) < 1024 for v in stored.values())
    if case.stores == corpus.INBOX:
        assert inbox.state is State.IGNORED
        assert receiver.work_items() == 0
        return
    assert inbox.state is State.PENDING
    assert (inbox.package_id, inbox.mcp_url) == (case.package_id, case.mcp_url)
    (outbox,) = receiver.of_kind(table_layout.KIND_OUTBOX)
    work = items.work_item_from_outbox(outbox)
    assert (work.delivery_id, work.package_id, work.mcp_url) == (
        inbox.delivery_id,
        case.package_id,
        case.mcp_url,
    )
    if case.mcp_allowed is not None:
        # The receiver keeps mcp_url as signed; the worker's policy decides where the
        # token may go (docs/security.md).
        assert POLICY.allows(inbox.mcp_url or "") is case.mcp_allowed
