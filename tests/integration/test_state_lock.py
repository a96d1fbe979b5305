"""One local stack per state file: the lock, and a state file removed only by its writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.state_file import default_state_file, make_private_folder
from local.state_lock import StateFileBusy, StateFileLock
from ops.cli import build_parser

HOLD = (
    "import sys, time; from pathlib import Path; from local.state_lock import StateFileLock;"
    "lock = StateFileLock(Path(sys.argv[1])); lock.acquire(); print('held', flush=True);"
    "time.sleep(60)"
)
ROOT = Path(__file__).resolve().parents[2]


def _holder(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_state_file_held_by_a_live_stack_is_refused_naming_its_pid(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    holder = _holder(path)
    try:
        with pytest.raises(StateFileBusy, match=rf"running as pid {holder.pid};") as busy:
            StateFileLock(path).acquire()
        assert "\n" not in str(busy.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    # The kernel dropped the killed holder's lock: nothing stale is left to clean up.
    lock = StateFileLock(path)
    lock.acquire()
    assert lock.lock_path.read_text() == f"{os.getpid()}\n"
    lock.release()
    assert not lock.lock_path.exists()


def test_a_stack_removes_only_the_state_file_it_wrote(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    lock = StateFileLock(path)
    lock.acquire()
    path.write_text("ours")
    lock.wrote()
    lock.release()
    assert not path.exists()

    lock = StateFileLock(path)
    lock.acquire()
    path.write_text("ours")
    lock.wrote()
    replacement = tmp_path / "other.json"
    replacement.write_text("another stack's")
    deadline = time.monotonic() + 5
    while path.stat().st_mtime_ns == replacement.stat().st_mtime_ns:  # a new write, surely
        assert time.monotonic() < deadline
        replacement.write_text("another stack's")
    os.replace(replacement, path)
    lock.release()
    assert path.read_text() == "another stack's"


def test_the_default_state_file_is_in_a_private_folder_of_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    default = default_state_file()
    assert default == str(tmp_path / "state" / "relaylink-receiver" / "local-stack.json")
    make_private_folder(default)
    assert Path(default).parent.stat().st_mode & 0o777 == 0o700
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_state_file().startswith(str(Path.home()))
    assert not default_state_file().startswith(("/tmp", "/var/tmp"))


def test_state_file_options_alone_mean_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    default = default_state_file()
    parser = build_parser()
    assert parser.parse_args(["local", "--state-file"]).state_file == default
    assert parser.parse_args(["inbox", "list", "--local"]).local == default
    assert parser.parse_args(["send", "--local", "--count", "2"]).local == default
    assert parser.parse_args(["inbox", "list", "--local", "x.json"]).local == "x.json"


def test_local_refuses_a_live_stacks_state_file_and_leaves_it_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("the live stack's state")
    holder = _holder(path)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ops.cli", "local", "--port", "0", "--state-file", str(path)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"relaylink-receiver local: error: state_file_in_use: {path} belongs to the local "
        f"stack running as pid {holder.pid}; stop it or give another --state-file\n"
    )
    assert path.read_text() == "the live stack's state"
