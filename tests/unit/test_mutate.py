"""The mutation check's list holds to the code: each bug's text is in its file once."""

from __future__ import annotations

import pytest

from local.simulate import mutate
from local.simulate.run import WORKFLOWS


@pytest.mark.parametrize("mutation", mutate.MUTATIONS, ids=mutate.NAMES)
def test_each_mutation_matches_its_file_exactly_once(mutation: mutate.Mutation) -> None:
    text = (mutate.ROOT / mutation.path).read_text(encoding="utf-8")

    assert mutation.workflow in WORKFLOWS
    assert mutation.path.startswith("functions/")
    changed = mutate.planted(text, mutation)
    assert changed != text
    assert changed.count(mutation.new) >= 1 or not mutation.new


def test_a_mutation_whose_code_moved_fails_loudly() -> None:
    mutation = mutate.MUTATIONS[0]
    text = (mutate.ROOT / mutation.path).read_text(encoding="utf-8")

    with pytest.raises(mutate.MutationMoved, match="0 times, not once"):
        mutate.planted(text.replace(mutation.old, ""), mutation)
    with pytest.raises(mutate.MutationMoved, match="2 times, not once"):
        mutate.planted(text + mutation.old, mutation)


def test_the_list_names_the_bugs_the_check_must_plant() -> None:
    assert len(set(mutate.NAMES)) == len(mutate.NAMES)
    assert {
        "inbox_put_unconditional",
        "claim_ignores_lease_expiry",
        "finish_ignores_lease_owner",
        "relay_failed_send_reported_sent",
        "other_digest_answered_duplicate",
        "unknown_outcome_as_not_applied",
        "done_before_effect",
        "step_ignores_recorded_start",
        "decision_not_once",
    } <= set(mutate.NAMES)


def _outcome(name: str, *, found: bool) -> mutate.Outcome:
    return mutate.Outcome(name, "archive", found, 10, 3 if found else None, "x: y", 1.0)


def test_the_verdict_fails_on_a_miss_a_stale_known_miss_or_a_dirty_control() -> None:
    known = frozenset({"decision_not_once"})
    clean = [
        _outcome("done_before_effect", found=True),
        _outcome("decision_not_once", found=False),
        _outcome(mutate.CONTROL, found=False),
    ]
    assert mutate.verdict(clean, known) == []
    assert mutate.verdict([_outcome("done_before_effect", found=False)], known) == [
        "done_before_effect was not found in 10 seeds"
    ]
    assert mutate.verdict([_outcome("decision_not_once", found=True)], known) == [
        "decision_not_once is found now: take it off --known-missed"
    ]
    assert mutate.verdict([_outcome(mutate.CONTROL, found=True)], known) == [
        "the unmutated code violates on archive: x: y"
    ]


def test_the_check_refuses_an_unknown_mutation(capsys: pytest.CaptureFixture[str]) -> None:
    status = mutate.main(["--only", "no_such_bug"])

    assert status == 2
    assert "bad_option: unknown mutations: no_such_bug" in capsys.readouterr().err
