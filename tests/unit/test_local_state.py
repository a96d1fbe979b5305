"""The local stack's state file: it holds secrets, so only its owner may read it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from cli.state import LocalState, Resources


def _state() -> LocalState:
    return LocalState(
        webhook_url="http://127.0.0.1:1/webhook",
        mcp_url="http://127.0.0.1:2/mcp",
        effects_url="http://127.0.0.1:3/notify",
        aws_endpoint_url="http://127.0.0.1:4",
        region="us-east-1",
        signing_secrets=["whsec_c3RhdGUtZmlsZS10ZXN0LXNlY3JldA=="],
        mcp_token="state-file-test-token",
        resources=Resources(
            table_name="t",
            work_queue_url="q",
            dead_letter_queue_url="d",
            relay_failure_queue_url="r",
            signing_secrets_arn="s",
            mcp_token_secret_arn="m",
            archive_bucket="b",
        ),
        pids={"worker": 42},
    )


def test_state_file_is_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    previous = os.umask(0o000)
    try:
        _state().write(path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert LocalState.read(path) == _state()


def test_rewrite_replaces_atomically_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{}", encoding="utf-8")
    path.chmod(0o644)  # a file left by an older version: the rewrite tightens it
    _state().write(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_planted_link_at_the_old_temporary_name_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("untouched", encoding="utf-8")
    path = tmp_path / "state.json"
    (tmp_path / "state.json.tmp").symlink_to(elsewhere)
    _state().write(path)
    assert elsewhere.read_text(encoding="utf-8") == "untouched"


def test_write_into_a_missing_folder_fails_without_leaving_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _state().write(tmp_path / "missing" / "state.json")
    assert list(tmp_path.iterdir()) == []


def test_a_state_file_written_before_the_bedrock_url_existed_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    data = json.loads(_state().to_json())
    del data["bedrock_url"]
    for key in ("alert_topic_arn", "alert_queue_url"):
        del data["resources"][key]
    path.write_text(json.dumps(data), encoding="utf-8")

    state = LocalState.read(path)

    assert state.bedrock_url == ""
    assert state.resources.alert_topic_arn == ""
