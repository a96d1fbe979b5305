"""The moments operators name for --since and --until: ages and ISO 8601 times."""

from __future__ import annotations

import pytest

from ops.time_window import parse_moment

NOW = 1_800_000_000  # 2027-01-15T08:00:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", NOW - 1800),
        ("2h", NOW - 7200),
        ("1d", NOW - 86400),
        ("45s", NOW - 45),
        ("1w", NOW - 7 * 86400),
        (" 2H ", NOW - 7200),
        ("0m", NOW),
        ("2027-01-15T07:00:00Z", NOW - 3600),
        ("2027-01-15T07:00Z", NOW - 3600),
        ("2027-01-15T09:00:00+02:00", NOW - 3600),
        ("2027-01-15T07:00:00", NOW - 3600),  # naive: UTC
        ("2027-01-15", NOW - 8 * 3600),
    ],
)
def test_ages_and_iso_times(text: str, expected: int) -> None:
    assert parse_moment(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "2x", "-1h", "1.5h", "h", "2027-13-01"])
def test_anything_else_is_a_clear_value_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not an age \(30m, 2h, 1d"):
        parse_moment(text, now=NOW)
