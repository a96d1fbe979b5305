"""Which MCP URLs may receive our RelayLink API token (docs/contract.md, Packages over MCP).

``mcp_url`` arrives in a signed webhook body, but a leaked signing secret would let
anyone point us anywhere: the token goes only to hosts the owner configured, over
HTTPS. Pure: no I/O, no DNS. The check is deliberately strict about URL shapes that
parsers disagree on (userinfo, backslashes, control characters, numeric hosts), so
that the host checked here is the host the HTTP client connects to.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from functions.core.errors import HostNotAllowed

# The codes say which rule refused; none carries any part of the URL.
CODE_HOST: Final = "mcp_host_not_allowed"
CODE_SCHEME: Final = "mcp_scheme_not_allowed"
CODE_INSECURE: Final = "mcp_insecure_not_allowed"
CODE_URL: Final = "mcp_url_invalid"

_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_LOOPBACK_NAMES: Final = frozenset({"localhost"})
_MAX_URL_LENGTH: Final = 2048


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """An allowlist of hosts, each exact (``mcp.example.com``) or ``*.suffix``.

    ``*.example.com`` matches ``a.example.com`` and ``a.b.example.com``, never
    ``example.com`` itself nor ``evilexample.com``. IP literals match only an exact
    entry. HTTPS only; plain HTTP only to a loopback host (127.0.0.0/8, ::1,
    ``localhost``) that is also allowlisted, and only with ``allow_insecure_loopback``
    (local runtime and tests).
    """

    allowed_hosts: tuple[str, ...]
    allow_insecure_loopback: bool = False

    def __post_init__(self) -> None:
        # Normalise once, so that settings fail fast on a bad entry.
        object.__setattr__(
            self, "allowed_hosts", tuple(_entry(entry) for entry in self.allowed_hosts)
        )

    @classmethod
    def from_setting(cls, text: str, *, allow_insecure_loopback: bool = False) -> HostPolicy:
        """Parse a comma-separated setting such as ``"*.relaylink.example,mcp.example.com"``.

        Raises:
            ValueError: an entry is not a host name, IP literal or ``*.suffix``.
        """
        entries = [part.strip() for part in text.split(",") if part.strip()]
        return cls(tuple(entries), allow_insecure_loopback=allow_insecure_loopback)

    def check(self, url: str) -> None:
        """Return if the token may be sent to ``url``.

        Raises:
            HostNotAllowed: with code ``mcp_url_invalid`` (unparseable or ambiguous
                URL), ``mcp_scheme_not_allowed``, ``mcp_insecure_not_allowed`` (plain
                HTTP where it is not allowed) or ``mcp_host_not_allowed``.
        """
        scheme, host = _parse(url)
        if not self._matches(host):
            raise HostNotAllowed(CODE_HOST)
        if scheme == "https":
            return
        if not (self.allow_insecure_loopback and _is_loopback(host)):
            raise HostNotAllowed(CODE_INSECURE)

    def allows(self, url: str) -> bool:
        """:meth:`check` as a predicate."""
        try:
            self.check(url)
        except HostNotAllowed:
            return False
        return True

    def _matches(self, host: str) -> bool:
        ip = _ip(host)
        for entry in self.allowed_hosts:
            if entry.startswith("*."):
                if ip is None and host.endswith(entry[1:]):  # entry[1:] is ".suffix"
                    return True
            elif entry == host:
                return True
        return False


def _entry(raw: str) -> str:
    """One allowlist entry, normalised: lower case, no trailing dot, IPs canonical.

    The error names the entry (configuration, not a secret): the worker's cold start
    and the CDK synth, which parses the allowlist with this same code, both report it.
    """
    entry = raw.strip().lower().removesuffix(".")
    if entry.startswith("[") and entry.endswith("]"):
        entry = entry[1:-1]
    ip = _ip(entry)
    if ip is not None:
        return str(ip)
    if entry.startswith("*."):
        suffix = entry[2:]
        # "*.com" would trust a whole top-level domain: surely a mistake.
        if "." not in suffix or not _is_host_name(suffix):
            raise ValueError(
                f"allowlist entry {raw!r}: a wildcard must be *.<domain of two labels or more>"
            )
        return entry
    if not _is_host_name(entry):
        raise ValueError(f"allowlist entry {raw!r} is not a host name, IP literal or *.suffix")
    return entry


def _parse(url: str) -> tuple[str, str]:
    """The URL's scheme and normalised host; refuses anything parsers might read differently."""
    if not isinstance(url, str) or not url or len(url) > _MAX_URL_LENGTH:
        raise HostNotAllowed(CODE_URL)
    # urlsplit silently drops tabs and newlines, and some clients treat "\" as "/":
    # refuse them rather than check a host the client would not use.
    if not url.isascii() or any(ch <= " " or ch in "\\\x7f" for ch in url):
        raise HostNotAllowed(CODE_URL)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a malformed port)
    except ValueError:
        raise HostNotAllowed(CODE_URL) from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise HostNotAllowed(CODE_SCHEME)
    if "@" in parts.netloc:
        # Userinfo would put credentials in the URL, and "a@b" confuses humans reading it.
        raise HostNotAllowed(CODE_URL)
    host = (parts.hostname or "").removesuffix(".")
    if not host:
        raise HostNotAllowed(CODE_URL)
    if _ip(host) is None and not _is_host_name(host):
        raise HostNotAllowed(CODE_URL)
    return scheme, host if _ip(host) is None else str(_ip(host))


def _is_host_name(name: str) -> bool:
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return False
    # A numeric last label ("127.1", "0x7f.1", "2130706433") is no DNS name: some
    # resolvers read it as an IPv4 address, which an exact-name check cannot see.
    return labels[-1][0].isalpha()


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _is_loopback(host: str) -> bool:
    ip = _ip(host)
    if ip is not None:
        return ip.is_loopback
    return host in _LOOPBACK_NAMES
