"""``python -m bench``: measure every figure, write docs/benchmarks.{md,json}, docs/cost.md and
docs/capacity.md (printed too).

``--quick`` runs each figure small (a smoke run, not for committing);
``--only 1,3`` measures some figures and leaves the files alone unless ``--write``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from bench import figures
from bench.receiver_rig import offline_environment
from bench.report import Figure, write
from infra import capacity

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"

# The figures docs/cost.md (and figure 9, its targets) are computed from.
COST_FIGURES = frozenset({2, 3, 7, 8, 11})

PREAMBLE = """# Benchmarks

Written by `make bench` (`python -m bench`); do not edit by hand, except the last
section (Earlier measurements), which a run keeps as it is. Timings
are ratios measured side by side in one run, because absolute times drift on a
shared machine; every figure gives its method, the median and the spread
(quartiles, range) and, where the project sets one, the target and whether it is met.
The same numbers, unrounded, are in `docs/benchmarks.json`; `docs/cost.md` turns
them into dollars.
"""


# The key _again writes.
_PARTIAL_RUN: Final = re.compile(r"figures (\d+(?:, \d+)*) measured again")


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "functions", "bench"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip() + (" (+ uncommitted changes)" if dirty else "")


def _render_only() -> int:
    """The documents again from the last run's data: wording changes, same numbers."""
    data = json.loads((DOCS / "benchmarks.json").read_text(encoding="utf-8"))
    from bench import cost_doc  # noqa: PLC0415

    results = [
        Figure.from_json(f) for f in data["figures"] if f["figure"] != cost_doc.TARGETS_FIGURE
    ]
    # docs/cost.md needs the figures that feed it (a run before figure 8 has no worker's).
    priced = {f.number for f in results} >= COST_FIGURES
    if priced:
        results.append(cost_doc.targets_figure(results))
    write(results, data["run"], PREAMBLE, DOCS / "benchmarks.md", DOCS / "benchmarks.json")
    if priced:
        cost_doc.write(results, data["run"], DOCS / "cost.md")
    _capacity_plan()
    return 0


def _merged(measured: list[Figure], run: dict[str, Any]) -> tuple[list[Figure], dict[str, Any]]:
    """The last full run's figures with ``measured`` in place of theirs (``--only N
    --write``): a partial run must not wipe the others' numbers, and the run table says
    which figures were measured when."""
    path = DOCS / "benchmarks.json"
    if not path.exists():
        return measured, run
    from bench import cost_doc  # noqa: PLC0415

    data = json.loads(path.read_text(encoding="utf-8"))
    numbers = {f.number for f in measured} | {cost_doc.TARGETS_FIGURE}
    kept = [Figure.from_json(f) for f in data["figures"] if f["figure"] not in numbers]
    merged_run = {
        **{k: v for k, v in data["run"].items() if not k.startswith("figures ")},
        **earlier_partial_runs(data["run"], {f.number for f in measured}),
        _again([f.number for f in measured]): (
            f"{run['date (UTC)']}, commit {run['commit']}, load average {run['load average']}"
        ),
    }
    return sorted([*kept, *measured], key=lambda f: f.number), merged_run


def earlier_partial_runs(run: dict[str, Any], measured: set[int]) -> dict[str, Any]:
    """The run table's earlier "figures N measured again" rows, less the figures
    measured now: each figure keeps the date and commit it was last measured at."""
    kept: dict[str, Any] = {}
    for key, value in run.items():
        match = _PARTIAL_RUN.fullmatch(key)
        if match is None:
            continue
        left = [int(n) for n in match.group(1).split(", ") if int(n) not in measured]
        if left:
            kept[_again(left)] = value
    return kept


def _again(numbers: Sequence[int]) -> str:
    """The run table's key for the figures measured again in one partial run."""
    return f"figures {', '.join(map(str, numbers))} measured again"


def _capacity_plan() -> None:
    """docs/capacity.md, and the same plan on stdout: no figure feeds it."""
    plan = capacity.render()
    (DOCS / "capacity.md").write_text(plan, encoding="utf-8")
    print(plan)


def _settle_the_heap() -> None:
    """What a finished figure left in this process is never scanned by the collector
    again. Figure 12 leaves some 700,000 objects per 20,000 items behind (a full
    collection then takes half a second; 2.5 s at its 100,000): the next figures' own
    collections stalled this process, which is the sender, the MCP server and the
    notify sink of the local stack, and figure 13's first attempts timed out."""
    gc.collect()
    gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--only", help="comma-separated figure numbers")
    parser.add_argument("--write", action="store_true", help="write the docs even with --only")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite the docs from docs/benchmarks.json (the numbers of the last run)",
    )
    args = parser.parse_args(argv)
    if args.render_only:
        return _render_only()
    sizes = figures.QUICK if args.quick else figures.Sizes()
    makers: dict[int, Callable[[figures.Sizes], Figure | list[Figure]]] = figures.ALL
    chosen = sorted(makers) if not args.only else [int(n) for n in args.only.split(",")]
    offline_environment()
    load_at_start = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    started = time.perf_counter()
    results: list[Figure] = []
    for number in chosen:
        began = time.perf_counter()
        print(f"figure {number} ...", file=sys.stderr, flush=True)
        made = makers[number](sizes)
        seconds = time.perf_counter() - began
        for figure in made if isinstance(made, list) else [made]:
            figure.seconds = seconds
            results.append(figure)
        print(f"figure {number}: {seconds:.1f} s", file=sys.stderr, flush=True)
        _settle_the_heap()
    results.sort(key=lambda f: f.number)
    run = {
        "date (UTC)": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "commit": _commit(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs visible",
        "load average": load_at_start,
        "sizes": "quick (smoke run)" if args.quick else "full",
        "duration": f"{time.perf_counter() - started:.0f} s",
        "seconds": round(time.perf_counter() - started),
    }
    took = run["duration"]
    if args.only and args.write:
        results, run = _merged(results, run)
    priced = {f.number for f in results} >= COST_FIGURES
    if priced:
        from bench import cost_doc  # noqa: PLC0415

        results.append(cost_doc.targets_figure(results))
    if args.only and not args.write:
        for figure in results:
            print(figure.to_json())
        return 0
    write(results, run, PREAMBLE, DOCS / "benchmarks.md", DOCS / "benchmarks.json")
    if priced:
        cost_doc.write(results, run, DOCS / "cost.md")
    _capacity_plan()
    print(f"wrote docs/benchmarks.md and docs/benchmarks.json in {took}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
