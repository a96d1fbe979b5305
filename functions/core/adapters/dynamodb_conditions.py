"""Condition expressions written as named parts, each with the reason it exists.

A write's condition is what makes it idempotent or exclusive; keeping each part's
reason beside it lets a reader check that argument one part at a time.
"""

from __future__ import annotations

# (expression part, why it is there)
Condition = tuple[tuple[str, str], ...]


def condition_expression(condition: Condition) -> str:
    """The parts, each in parentheses, joined with AND."""
    return " AND ".join(f"({part})" for part, _reason in condition)
