"""The shared vectors over HTTP through the front door give the answers they prescribe.

The in-process suite (tests/integration/test_receiver_vectors.py) asserts the same
answers against the handler directly; here each request crosses a real socket and
the API Gateway translation. The receiver's clock is moved to the vectors' ``now``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest

from local.stack import LocalStack
from local.stack_options import StackOptions
from local.testkit.vectors import vectors_file
from tests.e2e.stacks import audited
from tests.polling import poll

VECTORS = json.loads(vectors_file().read_text(encoding="utf-8"))
ONE_SECRET = tuple(VECTORS["cases"][0]["secrets"])


def _post(client: httpx.Client, url: str, request: dict[str, Any]) -> tuple[int, str]:
    body = request["body"].encode("utf-8")
    response = client.post(url, content=body, headers=request["headers"])
    return response.status_code, json.loads(response.content)["outcome"]


def _settled(got: tuple[int, str], *, want: tuple[int, str]) -> bool:
    """The expected answer, or any answer but 401 (a 401 may come from the old secret)."""
    return got == want or got[0] != 401


def _vector_stack(**options: Any) -> AbstractContextManager[LocalStack]:
    return audited(
        StackOptions(signing_secrets=ONE_SECRET, receiver_clock_start=VECTORS["now"], **options)
    )


@pytest.fixture(scope="module")
def vector_stack() -> Iterator[LocalStack]:
    """The receiver's clock stopped at the vectors' ``now``: the ±300/301 s cases are exact."""
    with _vector_stack(receiver_clock_frozen=True) as running:
        yield running


@pytest.fixture
def rotating_stack() -> Iterator[LocalStack]:
    """A running clock (the secrets cache must age), a one-second cache."""
    with _vector_stack(secrets_max_age_seconds=1) as running:
        yield running


def _entries(secrets: tuple[str, ...]) -> list[dict[str, Any]]:
    return [e for e in VECTORS["cases"] + VECTORS["sequences"] if tuple(e["secrets"]) == secrets]


def test_every_single_secret_vector_gets_its_answer_over_http(vector_stack: LocalStack) -> None:
    entries = _entries(ONE_SECRET)
    assert len(entries) >= 20
    mismatches = []
    with httpx.Client(timeout=10) as client:
        for entry in entries:
            steps = entry.get("steps") or [entry]
            for number, step in enumerate(steps, 1):
                got = _post(client, vector_stack.state.webhook_url, step["request"])
                want = (step["expect"]["status"], step["expect"]["outcome"])
                if got != want:
                    mismatches.append((entry["name"], number, got, want))
    assert mismatches == []


def test_rotation_vectors_pass_once_the_stack_knows_both_secrets(
    rotating_stack: LocalStack,
) -> None:
    vector_stack = rotating_stack
    (secrets,) = {tuple(e["secrets"]) for e in VECTORS["cases"] + VECTORS["sequences"]} - {
        ONE_SECRET
    }
    vector_stack.client("secretsmanager").put_secret_value(
        SecretId=vector_stack.state.resources.signing_secrets_arn,
        SecretString=json.dumps(list(secrets)),
    )
    entries = _entries(secrets)
    assert entries
    url = vector_stack.state.webhook_url
    with httpx.Client(timeout=10) as client:
        for entry in entries:
            steps = entry.get("steps") or [entry]
            first = steps[0]
            want = (first["expect"]["status"], first["expect"]["outcome"])
            # The receiver's secret cache (max age 1 s here) picks the new value up.
            got = poll(
                functools.partial(_post, client, url, first["request"]),
                functools.partial(_settled, want=want),
                deadline_seconds=15,
                pause_seconds=0.2,
            )
            assert got == want, entry["name"]
            for step in steps[1:]:
                got = _post(client, url, step["request"])
                assert got == (step["expect"]["status"], step["expect"]["outcome"]), entry["name"]
