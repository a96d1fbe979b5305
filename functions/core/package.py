"""The package a delivery points at, as the MCP server's ``get_package`` returns it.

docs/contract.md (Packages over MCP) gives the shape. It is parsed here, at the edge,
into frozen values; unknown fields are tolerated (the server may add some), a wrong shape is
:class:`~functions.core.errors.InvalidPackage`. Plain dataclasses rather than
pydantic: the shape is small, and the error must never echo the input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from functions.core.errors import InvalidPackage


@dataclass(frozen=True, slots=True)
class Attachment:
    """One attachment the briefing mentions (metadata only; the bytes stay on the server)."""

    name: str
    media_type: str
    size: int  # bytes

    @classmethod
    def from_mapping(cls, data: object) -> Attachment:
        """Parse one entry of ``attachments``.

        Raises:
            InvalidPackage: not an object with a non-empty ``name`` and
                ``media_type`` and a non-negative integer ``size``.
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

        Raises:
            InvalidPackage: any required field missing or of the wrong type, or
                ``created_at`` not an ISO 8601 time with a zone.
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
            "created_at": self.created_at.strftime("%Y-%m-%dT%H:%M:%S")
            + _fraction(self.created_at)
            + "Z",
        }


def _text(data: Mapping[Any, Any], name: str, *, allow_empty: bool = False) -> str:
    value = data.get(name)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise InvalidPackage()
    return value


def _size(value: object) -> int:
    # bool is an int in Python; a JSON true is not a size.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
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
    return parsed.astimezone(UTC)


def _fraction(moment: datetime) -> str:
    return f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
