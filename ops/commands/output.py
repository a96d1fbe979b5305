"""How the operator commands print: JSON documents, and times as ISO 8601 in UTC."""

from __future__ import annotations

from datetime import UTC, datetime

from cli.json_output import print_json

__all__ = ["iso", "print_json"]


def iso(epoch: int | None) -> str | None:
    """Epoch seconds as ``2026-12-02T15:04:05Z`` (None stays None)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
