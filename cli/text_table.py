"""A plain-text table with aligned columns, as the demo prints its results."""

from __future__ import annotations

from collections.abc import Sequence


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The header, a rule and the rows, each column as wide as its widest cell."""
    columns = zip(header, *rows, strict=True)
    widths = [max(len(cell) for cell in column) for column in columns]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
        for cells in (header, tuple("-" * w for w in widths), *rows)
    ]
