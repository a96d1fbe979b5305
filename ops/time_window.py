"""A moment an operator names: an age back from now (``30m``, ``2h``, ``1d``) or ISO 8601.

The bulk commands' ``--since`` and ``--until`` and the console's filters read their
bounds here, so both accept exactly the same words.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE: Final = re.compile(r"(\d+)([smhdw])")

MOMENT_HELP: Final = "an age (30m, 2h, 1d; units s m h d w) or ISO 8601 (2026-12-03T14:00Z; UTC)"


def parse_moment(text: str, *, now: int) -> int:
    """Epoch seconds of ``text``: ``now`` minus an age, or an ISO 8601 time (naive is UTC).

    Raises:
        ValueError: with a one-line message naming what was expected.
    """
    spoken = text.strip()
    age = _AGE.fullmatch(spoken.lower())
    if age is not None:
        return now - int(age.group(1)) * _UNIT_SECONDS[age.group(2)]
    try:
        moment = datetime.fromisoformat(spoken)
    except ValueError:
        raise ValueError(f"{text!r} is not {MOMENT_HELP}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())
