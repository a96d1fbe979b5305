"""The vendored vectors (for clones without ``shared/`` beside them) are the shared ones."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from local.testkit import vectors


def test_vendored_vectors_are_byte_identical_to_the_shared_ones() -> None:
    vendored = vectors.VENDORED_VECTORS.read_bytes()
    shared = vectors.shared_dir() / "vectors" / "deliveries.json"
    if shared.exists():
        assert vendored == shared.read_bytes(), "copy ../shared/vectors/deliveries.json again"
    # Without shared/ (CI's clone), the copy is the one taken from it, unchanged.
    assert hashlib.sha256(vendored).hexdigest() == vectors.VENDORED_VECTORS_SHA256


def test_the_tests_read_shared_when_present_else_the_vendored_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(vectors.SHARED_DIR_ENV, str(tmp_path))
    assert vectors.vectors_file() == vectors.VENDORED_VECTORS
    (tmp_path / "vectors").mkdir()
    (tmp_path / "vectors" / "deliveries.json").write_bytes(vectors.VENDORED_VECTORS.read_bytes())
    assert vectors.vectors_file() == tmp_path / "vectors" / "deliveries.json"
