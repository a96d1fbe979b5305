"""The shared delivery vectors (``../shared/vectors/deliveries.json``; never edited), typed.

They are signed by an independent implementation of the signing scheme; every layer
of the tests replays them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR_ENV = "RELAYLINK_SHARED_DIR"


# A byte-for-byte copy of the shared vectors, for clones that have no ``shared/``
# beside them (CI); tests/unit/test_vendored_vectors.py keeps the two identical.
VENDORED_VECTORS = REPO_ROOT / "tests" / "vectors" / "deliveries.json"
VENDORED_VECTORS_SHA256 = "649c8afab435e9170e182490c3063342a81f35d5bf7a8978280dd9833d906bdd"


def shared_dir() -> Path:
    """``$RELAYLINK_SHARED_DIR``, else ``shared/`` beside the repository root."""
    override = os.environ.get(SHARED_DIR_ENV)
    return Path(override) if override else REPO_ROOT.parent / "shared"


def vectors_file() -> Path:
    """The shared vectors: from ``shared/`` when it is there, else the vendored copy."""
    shared = shared_dir() / "vectors" / "deliveries.json"
    return shared if shared.exists() else VENDORED_VECTORS


@dataclass(frozen=True)
class VectorRequest:
    headers: dict[str, str]
    body: bytes  # the exact bytes: the vector's text encoded as UTF-8
    expect_status: int
    expect_outcome: str


@dataclass(frozen=True)
class VectorCase:
    name: str
    secrets: list[str]
    request: VectorRequest


@dataclass(frozen=True)
class VectorSequence:
    name: str
    secrets: list[str]
    steps: list[VectorRequest]
    expect_work_items: int


@dataclass(frozen=True)
class Vectors:
    now: int
    cases: list[VectorCase]
    sequences: list[VectorSequence]


def _vector_request(step: dict[str, Any]) -> VectorRequest:
    return VectorRequest(
        headers=dict(step["request"]["headers"]),
        body=step["request"]["body"].encode(),
        expect_status=int(step["expect"]["status"]),
        expect_outcome=str(step["expect"]["outcome"]),
    )


def load_vectors() -> Vectors:
    """Read the shared delivery vectors into typed values."""
    data = json.loads(vectors_file().read_text(encoding="utf-8"))
    return Vectors(
        now=int(data["now"]),
        cases=[
            VectorCase(c["name"], list(c["secrets"]), _vector_request(c)) for c in data["cases"]
        ],
        sequences=[
            VectorSequence(
                s["name"],
                list(s["secrets"]),
                [_vector_request(step) for step in s["steps"]],
                int(s["expect_work_items"]),
            )
            for s in data["sequences"]
        ],
    )
