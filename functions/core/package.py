"""The package a delivery points at, as the MCP server's ``get_package`` returns it.

docs/contract.md (Packages over MCP) gives the shape. It is parsed here, at the edge,
into frozen values; unknown fields are tolerated (the server may add some), a wrong shape is
:class:`~functions.core.errors.InvalidPackage`. Plain dataclasses rather than
pydantic: the shape is small, and the error must never echo the input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from functions.core.errors import InvalidPackage

# What a signed 64-bit size field holds, and far beyond any real attachment. Unbounded,
# a 5,000-digit size would parse here and then fail to serialise (int to text has a
# 4,300-digit limit) while the package is archived.
MAX_SIZE: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Attachment:
    """One attachment the briefing mentions (metadata only; the bytes stay on the server)."""

    name: str
    media_type: str
    size: int  # bytes, at most MAX_SIZE

    @classmethod
    def from_mapping(cls, data: object) -> Attachment:
        """Parse one entry of ``attachments``.

        Raises:
            InvalidPackage: not an object with a non-empty ``name`` and
                ``media_type`` and an integer ``size`` from 0 to ``MAX_SIZE``.
        """
        if not isinstance(data, Mapping):
            raise InvalidPackage()
        return cls(
            name=_text(data, "name"),
            media_type=_text(data, "media_type"),
            size=_size(data.get("size")),
        )

    def to_mapping(self) -> dict[str, Any]:
        return {"name": self.name, "media_type": self.media_type, "size": self.size}


@dataclass(frozen=True, slots=True)
class Package:
    """A briefing for the agent, with its attachments' metadata."""

    package_id: str
    title: str
    briefing: str
    attachments: tuple[Attachment, ...]
    created_at: datetime  # timezone-aware, UTC

    @classmethod
    def from_mapping(cls, data: object) -> Package:
        """Parse the tool result's structured content (or its JSON text).

        Any input at all either parses or raises :class:`InvalidPackage`, so a
        malformed result is always a permanent failure, never an unexpected error.

        Raises:
            InvalidPackage: any required field missing or of the wrong type, or
                ``created_at`` not an ISO 8601 time with a zone that is within
                datetime's range in UTC.
        """
        if not isinstance(data, Mapping):
            raise InvalidPackage()
        attachments = data.get("attachments", [])
        if not isinstance(attachments, list):
            raise InvalidPackage()
        return cls(
            package_id=_text(data, "package_id"),
            title=_text(data, "title"),
            # An empty briefing is odd but not malformed: the workflow decides.
            briefing=_text(data, "briefing", allow_empty=True),
            attachments=tuple(Attachment.from_mapping(item) for item in attachments),
            created_at=_time(data.get("created_at")),
        )

    def to_mapping(self) -> dict[str, Any]:
        """The contract's JSON shape, e.g. for archiving (round-trips through ``from_mapping``)."""
        return {
            "package_id": self.package_id,
            "title": self.title,
            "briefing": self.briefing,
            "attachments": [attachment.to_mapping() for attachment in self.attachments],
            "created_at": _utc_text(self.created_at),
        }

    def canonical(self) -> bytes:
        """The canonical form: the contract's JSON shape with sorted keys, no spaces and
        UTF-8 text. Fields the server adds (and the parser drops) never change it, and it
        parses back (``from_mapping``) into an equal package."""
        return json.dumps(
            self.to_mapping(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")

    def digest(self) -> str:
        """SHA-256 (hex) of the canonical form: what a screening verdict and an approval
        are about, and what tells one version of a package from another."""
        return hashlib.sha256(self.canonical()).hexdigest()


def _text(data: Mapping[Any, Any], name: str, *, allow_empty: bool = False) -> str:
    value = data.get(name)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise InvalidPackage()
    return value


def _size(value: object) -> int:
    # bool is an int in Python; a JSON true is not a size.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SIZE:
        raise InvalidPackage()
    return value


def _time(value: object) -> datetime:
    if not isinstance(value, str):
        raise InvalidPackage()
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidPackage() from None
    if parsed.tzinfo is None:
        # A time without a zone is ambiguous; the contract's times end in "Z".
        raise InvalidPackage()
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        # At the calendar's ends (year 1 east of UTC, year 9999 west of it) the UTC
        # time is outside what datetime can hold.
        raise InvalidPackage() from None


def _utc_text(moment: datetime) -> str:
    # isoformat, not strftime("%Y"): glibc drops the leading zeros of years before 1000,
    # and "1-01-01" would not parse back.
    seconds = moment.replace(tzinfo=None).isoformat(timespec="seconds")
    fraction = f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
    return f"{seconds}{fraction}Z"
