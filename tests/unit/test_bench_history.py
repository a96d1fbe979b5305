"""History lives in docs/benchmarks.md, not in the bench's code: a run keeps the
hand-kept section, and no bench module carries a commit id."""

from __future__ import annotations

import re
from pathlib import Path

from bench import report
from bench.report import Figure, Row

ROOT = Path(__file__).resolve().parents[2]
RUN = {"date (UTC)": "2026-12-04 12:00", "commit": "0000000"}
HEADING = "## Earlier measurements"
EARLIER = f"{HEADING}\n\n### Figure 1, 2026-12-01, commit abc1234\n\n1.5\n"


def _write(markdown: Path, value: float) -> None:
    figure = Figure(1, "A figure", "How.", rows=[Row("ratio", "x", value=value)])
    report.write([figure], RUN, "# Benchmarks\n", markdown, markdown.with_suffix(".json"))


def test_bench_write_keeps_the_earlier_measurements_section(tmp_path: Path) -> None:
    markdown = tmp_path / "benchmarks.md"
    _write(markdown, 1.2)
    markdown.write_text(markdown.read_text(encoding="utf-8") + "\n" + EARLIER, encoding="utf-8")
    _write(markdown, 1.1)
    _write(markdown, 1.0)
    text = markdown.read_text(encoding="utf-8")
    assert text.endswith(EARLIER)
    assert text.count(HEADING) == 1
    assert "| ratio | x | 1 |" in text and "1.1" not in text


def test_bench_write_without_a_kept_section_writes_only_the_run(tmp_path: Path) -> None:
    markdown = tmp_path / "benchmarks.md"
    _write(markdown, 1.0)
    assert HEADING not in markdown.read_text(encoding="utf-8")


def test_bench_code_names_no_commit() -> None:
    """A "before" figure belongs in docs/benchmarks.md's Earlier measurements with its
    date and commit; code that quotes one goes stale with the next run."""
    commit = re.compile(r"\bcommit (?!\{)[0-9a-f]{7,40}\b")
    offences = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "bench").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if commit.search(line)
    ]
    assert offences == []


def test_docs_keep_the_earlier_measurements_with_date_and_commit() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    kept = text[text.find(f"\n{HEADING}\n") + 1 :] if HEADING in text else ""
    headings = [line for line in kept.splitlines() if line.startswith("### ")]
    assert headings
    assert all(re.search(r"\d{4}-\d{2}-\d{2}, commit [0-9a-f]{7}", h) for h in headings)


def test_a_partial_run_keeps_when_each_other_figure_was_measured_again() -> None:
    from bench.__main__ import earlier_partial_runs  # noqa: PLC0415 (the bench's entry point)

    run = {
        "commit": "0000000",
        "figures 12, 13 measured again": "2026-12-07 18:26, commit 7abcc8c",
        "figures 2, 3 measured again": "2026-12-07 20:16, commit f57e8e4",
    }
    assert earlier_partial_runs(run, {2}) == {
        "figures 12, 13 measured again": "2026-12-07 18:26, commit 7abcc8c",
        "figures 3 measured again": "2026-12-07 20:16, commit f57e8e4",
    }
    assert earlier_partial_runs(run, {2, 3, 12, 13}) == {}
