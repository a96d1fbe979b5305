"""Package.from_mapping: the MCP result's shape (docs/contract.md, Packages over MCP)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from functions.core.errors import InvalidPackage
from functions.core.package import Attachment, Package


def _contract_example() -> dict[str, Any]:
    return {
        "package_id": "pkg_01JE7Q9V5K3M8N2P4R6T",
        "title": "Quarterly supplier review",
        "briefing": "Markdown text for the agent ...",
        "attachments": [{"name": "notes.md", "media_type": "text/markdown", "size": 1832}],
        "created_at": "2026-12-02T15:04:00Z",
    }


def test_package_parses_the_contract_example() -> None:
    package = Package.from_mapping(_contract_example())
    assert package.package_id == "pkg_01JE7Q9V5K3M8N2P4R6T"
    assert package.title == "Quarterly supplier review"
    assert package.briefing == "Markdown text for the agent ..."
    assert package.attachments == (Attachment("notes.md", "text/markdown", 1832),)
    assert package.created_at == datetime(2026, 12, 2, 15, 4, tzinfo=UTC)


def test_package_is_frozen() -> None:
    package = Package.from_mapping(_contract_example())
    with pytest.raises(AttributeError):
        package.title = "changed"  # type: ignore[misc]


def test_package_tolerates_unknown_fields() -> None:
    data = _contract_example()
    data["priority"] = "high"
    data["attachments"][0]["sha256"] = "ab" * 32
    assert Package.from_mapping(data) == Package.from_mapping(_contract_example())


def test_package_round_trips_through_to_mapping() -> None:
    data = _contract_example()
    assert Package.from_mapping(data).to_mapping() == data
    data["created_at"] = "2026-12-02T15:04:00.25Z"
    again = Package.from_mapping(Package.from_mapping(data).to_mapping())
    assert again.created_at == datetime(2026, 12, 2, 15, 4, 0, 250000, tzinfo=UTC)


def test_package_normalises_offsets_to_utc() -> None:
    data = _contract_example()
    data["created_at"] = "2026-12-02T17:04:00+02:00"
    assert Package.from_mapping(data).created_at == datetime(2026, 12, 2, 15, 4, tzinfo=UTC)


def test_package_without_attachments_has_none() -> None:
    data = _contract_example()
    del data["attachments"]
    assert Package.from_mapping(data).attachments == ()
    data["attachments"] = []
    assert Package.from_mapping(data).attachments == ()


def test_package_allows_an_empty_briefing() -> None:
    data = _contract_example()
    data["briefing"] = ""
    assert Package.from_mapping(data).briefing == ""


@pytest.mark.parametrize("field", ["package_id", "title", "briefing", "created_at"])
def test_package_requires_each_field(field: str) -> None:
    data = _contract_example()
    del data[field]
    with pytest.raises(InvalidPackage):
        Package.from_mapping(data)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("package_id",), ""),
        (("package_id",), 7),
        (("title",), None),
        (("title",), ""),
        (("briefing",), ["x"]),
        (("created_at",), "yesterday"),
        (("created_at",), "2026-12-02T15:04:00"),  # no zone: ambiguous
        (("created_at",), 1764687840),
        (("attachments",), "notes.md"),
        (("attachments",), {"name": "notes.md"}),
        (("attachments", 0), "notes.md"),
        (("attachments", 0, "name"), ""),
        (("attachments", 0, "media_type"), None),
        (("attachments", 0, "size"), -1),
        (("attachments", 0, "size"), True),
        (("attachments", 0, "size"), 1.5),
        (("attachments", 0, "size"), "1832"),
    ],
)
def test_package_rejects_wrong_shapes(path: tuple[str | int, ...], value: object) -> None:
    data = copy.deepcopy(_contract_example())
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InvalidPackage) as caught:
        Package.from_mapping(data)
    # The error is a fixed code: it never echoes what the server sent.
    assert str(caught.value) == "invalid_package"


@pytest.mark.parametrize("data", [None, [], "pkg", 3, [("package_id", "pkg_1")]])
def test_package_rejects_non_objects(data: object) -> None:
    with pytest.raises(InvalidPackage):
        Package.from_mapping(data)
