"""The simulator's own mutation check: plant one realistic bug at a time, see whether
the default seeds find it.

Each mutation is one exact text replacement in one file of ``functions/`` (the shipped
code), which must match exactly once: a mutation whose text moved fails loudly
(:class:`MutationMoved`) instead of silently testing nothing. Each runs in a scratch
copy of the tree (``functions/``, ``local/``, ``infra/``, ``cli/`` in a temporary
folder; never the working tree), in a subprocess whose ``PYTHONPATH`` is that copy:
the seeds of the mutation's workflow run in order until the first violation (found)
or the last seed (not found). A control run on an unmutated copy must find nothing.

    python -m local.simulate.mutate                 # the table (1,000 seeds per bug)
    relaylink-receiver simulate --mutations --json  # the same, as JSON
    make simulate                                   # after the seeds of every workflow
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
# What the simulator imports, copied whole into the scratch tree.
COPIED: Final = ("functions", "local", "infra", "cli")
DEFAULT_SEEDS: Final = 1000  # the simulator's own default (relaylink-receiver simulate)
PROBE_TIMEOUT_SECONDS: Final = 3600  # 2,000 agent seeds on a loaded machine: tens of minutes


class MutationMoved(RuntimeError):
    """A mutation's text is not in its file exactly once: the code moved."""


@dataclass(frozen=True, slots=True)
class Mutation:
    """One planted bug: ``old`` becomes ``new`` in ``path`` (relative to the root)."""

    name: str
    path: str
    old: str
    new: str
    workflow: str
    what: str  # the bug, in a few words


MUTATIONS: Final = (
    Mutation(
        "inbox_put_unconditional",
        "functions/core/adapters/dynamodb_inbox_transitions.py",
        '        "attribute_not_exists(#pk)",\n',
        '        "attribute_exists(#pk) OR attribute_not_exists(#pk)",\n',
        "archive",
        "the inbox put without its attribute_not_exists existence condition",
    ),
    Mutation(
        "claim_ignores_lease_expiry",
        "functions/core/adapters/dynamodb_inbox_transitions.py",
        '            "#state = :pending OR (#state = :processing AND lease_until <= :now)",\n'
        '            "free, or abandoned by a worker whose lease ran out; never two live holders",',
        '            "#state = :pending OR #state = :processing",\n'
        '            "free, or abandoned by a worker whose lease ran out; never two live holders",',
        "notify",
        "the claim takes a processing item whatever its lease",
    ),
    Mutation(
        "finish_ignores_lease_owner",
        "functions/core/adapters/dynamodb_inbox_transitions.py",
        '    ("lease_owner = :owner", "a worker whose lease expired',
        '    ("lease_owner = :owner OR lease_until <= :now", "a worker whose lease expired',
        "notify",
        "a completion, failure or release accepted from any worker once the lease ran out",
    ),
    Mutation(
        "relay_failed_send_reported_sent",
        "functions/relay/handler.py",
        "            failed += [o.sequence_number for o in chunk]\n",
        "",
        "archive",
        "the relay reports a failed SendMessageBatch as sent",
    ),
    Mutation(
        "relay_drops_a_batch_of_one",
        "functions/relay/handler.py",
        "    failed = _send_all(outgoing, deps)\n",
        "    failed = _send_all(outgoing, deps) if len(outgoing) > 1 else []\n",
        "archive",
        "the relay drops a stream batch of one record and reports it sent",
    ),
    Mutation(
        "reconciler_resends_fresh_pending",
        "functions/core/reconcile.py",
        "    return item.state is State.PENDING and item.state_changed_at < stale_before\n",
        "    return item.state is State.PENDING\n",
        "notify",
        "the reconciler sends every pending item again, however recently it changed",
    ),
    Mutation(
        "other_digest_answered_duplicate",
        "functions/core/accept.py",
        "        if existing.body_sha256 == digest:\n",
        "        if existing is not None:\n",
        "archive",
        "same id, different digest answered as a duplicate",
    ),
    Mutation(
        "unknown_outcome_as_not_applied",
        "functions/core/effects.py",
        "        except (NotApplied, Rejected):\n"
        "            # Certainly not applied: nothing is in doubt;",
        "        except Exception:\n            # Certainly not applied: nothing is in doubt;",
        "notify",
        "the ledger clears an intent whose outcome is unknown, as not applied",
    ),
    Mutation(
        "done_before_effect",
        "functions/core/effects.py",
        "        try:\n            fn(key)\n        except (NotApplied, Rejected):",
        "        self._store.record_done(self.delivery_id, name, now=self._clock.now())\n"
        "        try:\n"
        "            fn(key)\n"
        "        except (NotApplied, Rejected):",
        "notify",
        "the ledger writes the done record before it applies the effect",
    ),
    Mutation(
        "step_ignores_recorded_start",
        "functions/core/steps.py",
        "            return self._load(before)  # another worker recorded it since our read\n",
        "            pass  # another worker recorded it since our read\n",
        "agent",
        "the step recorder runs the step again though its refused start found a result",
    ),
    Mutation(
        "step_start_unconditional",
        "functions/core/adapters/dynamodb_steps.py",
        '        "attribute_not_exists(pk) OR #status <> :recorded",\n',
        '        "attribute_not_exists(pk) OR #status <> :recorded OR #status = :recorded",\n',
        "agent",
        "a step's start not conditional on no result recorded",
    ),
    Mutation(
        "decision_not_once",
        "functions/core/adapters/dynamodb_approvals.py",
        '    ("attribute_not_exists(decision)", "decided once: the first decision stands"),\n',
        "",
        "agent",
        "the decision update without attribute_not_exists(decision)",
    ),
)
NAMES: Final = tuple(m.name for m in MUTATIONS)
CONTROL: Final = "none"  # the control row: the code as it is


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the seeds of one mutation found."""

    mutation: str
    workflow: str
    found: bool
    seeds_run: int
    seed: int | None  # the first violating seed
    violation: str  # its first violation ("" when none)
    seconds: float

    @property
    def invariant(self) -> str:
        return self.violation.partition(":")[0]


def planted(text: str, mutation: Mutation) -> str:
    """``text`` with the mutation applied; raises :class:`MutationMoved` unless its old
    text is there exactly once."""
    count = text.count(mutation.old)
    if count != 1:
        raise MutationMoved(
            f"{mutation.name}: its text is in {mutation.path} {count} times, not once"
        )
    return text.replace(mutation.old, mutation.new)


def plant(root: Path, mutation: Mutation) -> None:
    """Apply ``mutation`` to the tree at ``root``."""
    path = root / mutation.path
    path.write_text(planted(path.read_text(encoding="utf-8"), mutation), encoding="utf-8")


def scratch_copy(into: Path) -> Path:
    """A copy of what the simulator runs, without byte code."""
    for name in COPIED:
        shutil.copytree(
            ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    return into


def check_one(mutation: Mutation | None, workflow: str, *, seeds: int, first_seed: int) -> Outcome:
    """Plant ``mutation`` (None: the control) in a scratch copy and probe its seeds."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="relaylink-mutant-") as folder:
        root = scratch_copy(Path(folder))
        if mutation is not None:
            plant(root, mutation)
        env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
        command = [
            sys.executable,
            "-m",
            "local.simulate.mutate",
            "--probe",
            workflow,
            "--seeds",
            str(seeds),
            "--first-seed",
            str(first_seed),
        ]
        done = subprocess.run(
            command,
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
        )
    name = CONTROL if mutation is None else mutation.name
    if done.returncode != 0:
        # A mutant that cannot even run its seeds is found (it would fail at once),
        # but say why: a crash is not an invariant.
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Outcome(
            name, workflow, True, 0, None, f"crashed: {last}", time.monotonic() - started
        )
    probe = json.loads(done.stdout)
    return Outcome(
        name,
        workflow,
        probe["seed"] is not None,
        probe["seeds_run"],
        probe["seed"],
        probe["violation"],
        time.monotonic() - started,
    )


def probe(workflow: str, *, seeds: int, first_seed: int) -> dict[str, object]:
    """Seeds in order until the first violation (in the scratch copy's process)."""
    from local.simulate.run import run_seed  # noqa: PLC0415 (the copy's, on PYTHONPATH)

    for number, seed in enumerate(range(first_seed, first_seed + seeds), start=1):
        result = run_seed(workflow, seed)
        if result.violations:
            return {"seeds_run": number, "seed": seed, "violation": result.violations[0]}
    return {"seeds_run": seeds, "seed": None, "violation": ""}


def check_all(
    names: tuple[str, ...] = NAMES,
    *,
    seeds: int = DEFAULT_SEEDS,
    first_seed: int = 0,
    jobs: int = 2,
    control: bool = True,
) -> list[Outcome]:
    """Every named mutation (and the control, on each workflow they use), ``jobs`` at once."""
    chosen = [m for m in MUTATIONS if m.name in names]
    for mutation in chosen:  # fail before any seed runs, not halfway
        planted((ROOT / mutation.path).read_text(encoding="utf-8"), mutation)
    tasks: list[tuple[Mutation | None, str]] = [(m, m.workflow) for m in chosen]
    if control:
        tasks += [(None, w) for w in sorted({m.workflow for m in chosen})]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(
            pool.map(
                lambda task: check_one(task[0], task[1], seeds=seeds, first_seed=first_seed),
                tasks,
            )
        )


def table(outcomes: list[Outcome], *, seeds: int, seconds: float) -> str:
    lines = [
        "| mutation | workflow | found | seeds run | seed | invariant | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        found = "found" if o.found else "not found"
        seed = "" if o.seed is None else str(o.seed)
        invariant = o.invariant if o.found else ""
        lines.append(
            f"| {o.mutation} | {o.workflow} | {found} | {o.seeds_run} | {seed} | {invariant}"
            f" | {o.seconds:.0f} |"
        )
    lines.append(f"\n{len(outcomes)} runs of up to {seeds} seeds in {seconds:.0f} s")
    return "\n".join(lines)


def verdict(outcomes: list[Outcome], known_missed: frozenset[str]) -> list[str]:
    """What makes the check fail: a mutation missed that should be found, a known miss
    now found (take it off the list), or a control run that found something."""
    problems = []
    for o in outcomes:
        if o.mutation == CONTROL and o.found:
            problems.append(f"the unmutated code violates on {o.workflow}: {o.violation}")
        elif o.mutation != CONTROL and not o.found and o.mutation not in known_missed:
            problems.append(f"{o.mutation} was not found in {o.seeds_run} seeds")
        elif o.mutation in known_missed and o.found:
            problems.append(f"{o.mutation} is found now: take it off --known-missed")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local.simulate.mutate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="seeds per bug (1000)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="mutants at once (2)")
    parser.add_argument(
        "--only", default="", help="comma-separated mutation names (all: " + ",".join(NAMES) + ")"
    )
    parser.add_argument(
        "--known-missed",
        default="",
        help="comma-separated mutations the simulator is known not to find yet",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--probe", metavar="WORKFLOW", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe, seeds=args.seeds, first_seed=args.first_seed)))
        return 0
    return report(
        only=args.only,
        known_missed=args.known_missed,
        seeds=args.seeds,
        first_seed=args.first_seed,
        jobs=args.jobs,
        as_json=args.json,
    )


def report(
    *, only: str, known_missed: str, seeds: int, first_seed: int, jobs: int, as_json: bool
) -> int:
    """Run the check and print it; 0 when it holds, 1 when it does not, 2 for a bad
    name or a mutation whose text moved."""
    names = tuple(n for n in only.split(",") if n) or NAMES
    missed = frozenset(n for n in known_missed.split(",") if n)
    unknown = sorted((set(names) | missed) - set(NAMES))
    if unknown or seeds < 1:
        problem = f"unknown mutations: {', '.join(unknown)}" if unknown else "--seeds must be >= 1"
        print(f"bad_option: {problem}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        outcomes = check_all(names, seeds=seeds, first_seed=first_seed, jobs=jobs)
    except MutationMoved as exc:
        print(f"mutation_moved: {exc}", file=sys.stderr)
        return 2
    seconds = time.monotonic() - started
    problems = verdict(outcomes, missed)
    if as_json:
        document = {
            "seeds": seeds,
            "seconds": round(seconds, 1),
            "mutations": [
                {**asdict(o), "invariant": o.invariant, "seconds": round(o.seconds, 1)}
                for o in outcomes
            ],
            "problems": problems,
        }
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(table(outcomes, seeds=seeds, seconds=seconds))
        for line in problems:
            print(f"PROBLEM: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
