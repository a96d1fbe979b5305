"""The mutation check itself, on a few of its bugs: planted in a scratch copy, found by
the seeds there; the unmutated copy finds nothing; the working tree is left alone."""

from __future__ import annotations

import hashlib

import pytest

from local.simulate import mutate

pytestmark = pytest.mark.simulation


def _tree_status() -> dict[str, str]:
    """The digest of every file the mutations plant in, in the working tree."""
    paths = sorted({m.path for m in mutate.MUTATIONS})
    return {p: hashlib.sha256((mutate.ROOT / p).read_bytes()).hexdigest() for p in paths}


def test_a_ledger_that_writes_done_before_the_effect_is_found_by_the_simulator() -> None:
    before = _tree_status()
    outcomes = {
        (o.mutation, o.workflow): o
        for o in mutate.check_all(
            ("done_before_effect", "relay_failed_send_reported_sent"), seeds=150, jobs=2
        )
    }

    done_first = outcomes[("done_before_effect", "notify")]
    assert done_first.found
    assert done_first.invariant == "effect_applied"
    relay = outcomes[("relay_failed_send_reported_sent", "archive")]
    assert relay.found
    assert relay.invariant == "relay_reaches_queue"
    for workflow in ("archive", "notify"):
        control = outcomes[(mutate.CONTROL, workflow)]
        assert not control.found, control.violation
        assert control.seeds_run == 150
    assert _tree_status() == before  # planted in the copy only
