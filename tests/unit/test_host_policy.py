"""HostPolicy: which URLs may receive the MCP token (pure, no sockets)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions.core.errors import HostNotAllowed
from functions.core.host_policy import (
    CODE_HOST,
    CODE_INSECURE,
    CODE_SCHEME,
    CODE_URL,
    HostPolicy,
)

POLICY = HostPolicy(("*.relaylink.example", "mcp.partner.example", "203.0.113.7"))
LOOPBACK = HostPolicy(("127.0.0.1", "127.0.0.2", "::1", "localhost"), allow_insecure_loopback=True)


def _code(policy: HostPolicy, url: str) -> str:
    with pytest.raises(HostNotAllowed) as caught:
        policy.check(url)
    return caught.value.code


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.relaylink.example/mcp",
        "https://a.b.relaylink.example/mcp",
        "https://MCP.RelayLink.Example/mcp",  # hosts are case-insensitive
        "https://mcp.relaylink.example./mcp",  # the root's trailing dot
        "https://mcp.relaylink.example:8443/mcp",
        "https://mcp.partner.example/mcp?x=1",
        "HTTPS://mcp.partner.example/mcp",
        "https://203.0.113.7/mcp",  # an IP literal that is explicitly listed
    ],
)
def test_host_policy_allows_listed_https_hosts(url: str) -> None:
    POLICY.check(url)
    assert POLICY.allows(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://relaylink.example/mcp",  # the wildcard's own domain is not below it
        "https://evilrelaylink.example/mcp",
        "https://relaylink.example.evil.net/mcp",
        "https://mcp.relaylink.example.evil.net/mcp",
        "https://other.partner.example/mcp",  # an exact entry covers no sub-domain
        "https://partner.example/mcp",
        "https://203.0.113.8/mcp",  # an unlisted IP literal
        "https://[2001:db8::1]/mcp",
    ],
)
def test_host_policy_refuses_unlisted_hosts(url: str) -> None:
    assert _code(POLICY, url) == CODE_HOST
    assert not POLICY.allows(url)


def test_host_policy_wildcard_never_matches_ip_literals() -> None:
    policy = HostPolicy(("*.example.com",))
    assert _code(policy, "https://10.0.0.1/mcp") == CODE_HOST
    assert _code(policy, "https://[::ffff:10.0.0.1]/mcp") == CODE_HOST


@pytest.mark.parametrize(
    "url",
    [
        "ftp://mcp.relaylink.example/mcp",
        "file:///etc/passwd",
        "wss://mcp.relaylink.example/mcp",
        "javascript:alert(1)",
        "mcp.relaylink.example/mcp",  # no scheme at all
    ],
)
def test_host_policy_refuses_other_schemes(url: str) -> None:
    assert _code(POLICY, url) == CODE_SCHEME


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pw@mcp.relaylink.example/mcp",
        "https://mcp.relaylink.example@evil.net/mcp",
        "https://@mcp.relaylink.example/mcp",
        "https:///mcp",
        "https://:443/mcp",
        "",
        "https://mcp.relaylink.example:99999/mcp",
        "https://mcp.relaylink.example:port/mcp",
        "https://mcp.relaylink.example\\@evil.net/mcp",
        "https://mcp.relay\tlink.example/mcp",  # urlsplit would silently drop the tab
        "https://mcp.relaylink.example\n/mcp",
        "https://mcp .relaylink.example/mcp",
        "https://mcp.relaylink.exämple/mcp",
        "https://mcp..relaylink.example/mcp",
        "https://-mcp.relaylink.example/mcp",
        "https://2130706433/mcp",  # read as 127.0.0.1 by some resolvers
        "https://127.1/mcp",
        "https://0x7f.0.0.1/mcp",
        "https://" + "a" * 2100 + ".relaylink.example/mcp",
    ],
)
def test_host_policy_refuses_ambiguous_urls(url: str) -> None:
    assert _code(POLICY, url) == CODE_URL


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765/mcp",
        "http://127.0.0.2/mcp",
        "http://[::1]:8765/mcp",
        "http://localhost:8765/mcp",
        "http://LOCALHOST./mcp",
    ],
)
def test_host_policy_allows_plain_http_to_listed_loopback_when_enabled(url: str) -> None:
    LOOPBACK.check(url)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8765/mcp", "http://localhost/mcp"])
def test_host_policy_refuses_plain_http_to_loopback_by_default(url: str) -> None:
    strict = HostPolicy(LOOPBACK.allowed_hosts)
    assert _code(strict, url) == CODE_INSECURE
    strict.check(url.replace("http://", "https://"))  # the same host over HTTPS is fine


def test_host_policy_refuses_plain_http_to_other_hosts_even_when_enabled() -> None:
    policy = HostPolicy(("mcp.relaylink.example", "10.0.0.1"), allow_insecure_loopback=True)
    assert _code(policy, "http://mcp.relaylink.example/mcp") == CODE_INSECURE
    assert _code(policy, "http://10.0.0.1/mcp") == CODE_INSECURE


def test_host_policy_loopback_must_still_be_listed() -> None:
    policy = HostPolicy(("127.0.0.1",), allow_insecure_loopback=True)
    assert _code(policy, "http://127.0.0.3/mcp") == CODE_HOST
    assert _code(policy, "http://localhost/mcp") == CODE_HOST


def test_host_policy_normalises_entries() -> None:
    policy = HostPolicy((" MCP.Example.COM. ", "[::1]", "*.Relaylink.Example"))
    assert policy.allowed_hosts == ("mcp.example.com", "::1", "*.relaylink.example")
    policy.check("https://mcp.example.com/mcp")
    policy.check("https://[::1]/mcp")
    policy.check("https://x.relaylink.example/mcp")


@pytest.mark.parametrize("entry", ["*", "*.com", "*.", "bad host", "*.*.example.com", "", "a..b"])
def test_host_policy_rejects_bad_entries(entry: str) -> None:
    with pytest.raises(ValueError):
        HostPolicy((entry,))


@pytest.mark.parametrize("entry", ["*.com", "mcp.example.123", "bad host"])
def test_host_policy_error_names_the_bad_entry(entry: str) -> None:
    # An allowlist is configuration, not a secret: the operator needs to see which entry.
    with pytest.raises(ValueError, match=re.escape(repr(entry))):
        HostPolicy(("mcp.relaylink.example", entry))


def test_host_policy_from_setting_splits_on_commas() -> None:
    policy = HostPolicy.from_setting(
        " *.relaylink.example , mcp.example.com,,", allow_insecure_loopback=True
    )
    assert policy.allowed_hosts == ("*.relaylink.example", "mcp.example.com")
    assert policy.allow_insecure_loopback


def test_host_policy_error_carries_no_part_of_the_url() -> None:
    url = "https://evil.net/secret-path-token?key=hunter2"
    with pytest.raises(HostNotAllowed) as caught:
        POLICY.check(url)
    assert str(caught.value) == CODE_HOST
    assert "secret-path-token" not in repr(caught.value.args)


def test_host_policy_empty_allowlist_allows_nothing() -> None:
    assert _code(HostPolicy(()), "https://mcp.relaylink.example/mcp") == CODE_HOST


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)


@given(prefix=st.lists(_label, min_size=1, max_size=3))
def test_host_policy_wildcard_matches_every_subdomain(prefix: list[str]) -> None:
    host = ".".join(prefix) + ".relaylink.example"
    assert HostPolicy(("*.relaylink.example",)).allows(f"https://{host}/mcp")


@given(glue=_label)
def test_host_policy_wildcard_refuses_lookalikes(glue: str) -> None:
    policy = HostPolicy(("*.relaylink.example",))
    assert not policy.allows(f"https://{glue}relaylink.example/mcp")
    assert not policy.allows(f"https://relaylink.example.{glue}.net/mcp")
    assert not policy.allows(f"https://{glue}.relaylink.example.{glue}.net/mcp")
