"""Package.from_mapping: the MCP result's shape (docs/contract.md, Packages over MCP)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.core.errors import InvalidPackage
from functions.core.package import MAX_SIZE, Attachment, Package


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


@pytest.mark.parametrize(
    "created_at",
    [
        "0001-01-01T00:00:00+01:00",  # UTC would be in year 0
        "9999-12-31T23:59:59-01:00",  # UTC would be in year 10000
        "0001-01-01T00:59:59.999999+01:00",
    ],
)
def test_package_time_outside_the_calendar_in_utc_is_invalid(created_at: str) -> None:
    data = _contract_example() | {"created_at": created_at}
    with pytest.raises(InvalidPackage):
        Package.from_mapping(data)


@pytest.mark.parametrize(
    ("created_at", "expected"),
    [
        ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
        ("0001-01-01T01:00:00+01:00", datetime(1, 1, 1, tzinfo=UTC)),
        ("9999-12-31T23:59:59.999999Z", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ],
)
def test_package_times_at_the_calendar_ends_round_trip(created_at: str, expected: datetime) -> None:
    package = Package.from_mapping(_contract_example() | {"created_at": created_at})
    assert package.created_at == expected
    assert Package.from_mapping(package.to_mapping()) == package


@pytest.mark.parametrize("size", [MAX_SIZE + 1, 10**5000], ids=["max+1", "5001 digits"])
def test_package_attachment_size_is_bounded(size: int) -> None:
    data = _contract_example()
    data["attachments"][0]["size"] = size
    with pytest.raises(InvalidPackage):
        Package.from_mapping(data)


def test_package_attachment_size_may_reach_the_bound() -> None:
    data = _contract_example()
    data["attachments"][0]["size"] = MAX_SIZE
    assert Package.from_mapping(data).attachments[0].size == MAX_SIZE


# --- Any input: a package or InvalidPackage, nothing else (property) ------------------

_any_text = st.text(st.characters(exclude_categories=()), max_size=12)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**4400, max_value=10**4500)
    | st.floats()
    | _any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_any_text, inner, max_size=3),
    max_leaves=8,
)


def _mostly(valid: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` nine times in ten, so that enough inputs parse to test the round trip."""
    return st.integers(0, 9).flatmap(lambda n: other if n == 0 else valid)


_offsets = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
_moments = st.datetimes() | st.sampled_from(
    [datetime.min, datetime.max, datetime(1, 1, 1, 0, 30), datetime(9999, 12, 31, 23, 30)]
)
_zoned_times = st.builds(
    lambda moment, zone, spec: moment.replace(tzinfo=zone).isoformat(timespec=spec),
    _moments,
    _offsets,
    st.sampled_from(["auto", "seconds", "microseconds", "hours"]),
) | st.builds(lambda moment: moment.isoformat() + "Z", _moments)
_times = _mostly(
    _zoned_times,
    st.one_of(
        _moments.map(datetime.isoformat),  # no zone
        st.sampled_from(["2026-W01-1T00:00Z", "20261202T150400Z", "2026-02-29T00:00Z", "T", ""]),
        _any_text,
        _json_values,
    ),
)
_sizes = _mostly(
    st.integers(0, MAX_SIZE) | st.integers(MAX_SIZE - 2, MAX_SIZE + 2),
    st.one_of(
        st.integers(),
        st.integers(min_value=10**4400, max_value=10**4500),
        st.booleans(),
        st.floats(),
        _any_text,
        _json_values,
    ),
)
_texts = _mostly(
    st.text(st.characters(exclude_categories=()), min_size=1), _any_text | _json_values
)
_attachment = _mostly(
    st.fixed_dictionaries({"name": _texts, "media_type": _texts, "size": _sizes}), _json_values
)
_FIELDS = ["package_id", "title", "briefing", "attachments", "created_at"]
# Contract-shaped objects whose fields are each usually plausible and sometimes absent
# or anything at all, with unknown fields; and now and then any JSON value.
_results = _mostly(
    st.builds(
        lambda fields, dropped, extra: {
            key: value for key, value in (extra | fields).items() if key not in dropped
        },
        st.fixed_dictionaries(
            {
                "package_id": _texts,
                "title": _texts,
                "briefing": _texts,
                "attachments": _mostly(st.lists(_attachment, max_size=3), _json_values),
                "created_at": _times,
            }
        ),
        _mostly(st.just(set()), st.sets(st.sampled_from(_FIELDS), max_size=2)),
        st.dictionaries(_any_text, _json_values, max_size=2),
    ),
    _json_values,
)


@settings(derandomize=True, database=None, max_examples=500, deadline=None)
@given(_results)
def test_property_any_result_is_a_package_or_invalid_package(data: object) -> None:
    try:
        package = Package.from_mapping(data)
    except InvalidPackage as exc:
        assert str(exc) == "invalid_package"  # never echoes the input
        return
    # What parses can also be archived: JSON text, parsed back to the same package.
    document = json.dumps(package.to_mapping())
    assert Package.from_mapping(json.loads(document)) == package


def test_package_digest_ignores_unknown_fields_and_key_order() -> None:
    data = _contract_example()
    plain = Package.from_mapping(data).digest()
    data["priority"] = "high"
    reordered = dict(reversed(list(data.items())))
    assert Package.from_mapping(reordered).digest() == plain
    assert len(plain) == 64


def test_package_digest_changes_with_any_field_the_agent_reads() -> None:
    base = Package.from_mapping(_contract_example()).digest()
    for field, value in (
        ("title", "Totally different title"),
        ("briefing", "Markdown text for the agent ..!"),
        ("attachments", [{"name": "notes.md", "media_type": "text/markdown", "size": 1833}]),
    ):
        data = _contract_example()
        data[field] = value
        assert Package.from_mapping(data).digest() != base, field
