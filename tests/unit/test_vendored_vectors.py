"""The vendored vectors (for clones without ``shared/`` beside them) are the shared ones."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests import builders


def test_vendored_vectors_are_byte_identical_to_the_shared_ones() -> None:
    vendored = builders.VENDORED_VECTORS.read_bytes()
    shared = builders.shared_dir() / "vectors" / "deliveries.json"
    if shared.exists():
        assert vendored == shared.read_bytes(), "copy ../shared/vectors/deliveries.json again"
    # Without shared/ (CI's clone), the copy is the one taken from it, unchanged.
    assert hashlib.sha256(vendored).hexdigest() == builders.VENDORED_VECTORS_SHA256


def test_the_tests_read_shared_when_present_else_the_vendored_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(builders.SHARED_DIR_ENV, str(tmp_path))
    assert builders.vectors_file() == builders.VENDORED_VECTORS
    (tmp_path / "vectors").mkdir()
    (tmp_path / "vectors" / "deliveries.json").write_bytes(builders.VENDORED_VECTORS.read_bytes())
    assert builders.vectors_file() == tmp_path / "vectors" / "deliveries.json"
