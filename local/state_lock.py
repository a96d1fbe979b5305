"""One local stack per state file: a lock beside it, and only its own file removed.

``relaylink-receiver local --state-file PATH`` takes an exclusive ``flock`` on
``PATH.lock`` before it starts anything and holds it while it runs; the lock file
names the holder's pid. A second stack given the same path finds the lock held and
refuses to start, naming that pid, instead of overwriting a live stack's file (and
deleting it when it stops). The kernel drops the lock when its holder dies, however it
dies, so a stack killed with SIGKILL leaves no stale lock behind.

On stop, the state file is removed only if it is still the one this stack wrote (the
same inode and modification time as its last write): a file another program put
there since is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path

LOCK_SUFFIX = ".lock"


class StateFileBusy(Exception):
    """The state file belongs to a live local stack (``pid`` holds its lock)."""

    def __init__(self, path: Path, pid: str) -> None:
        self.path = path
        self.pid = pid
        super().__init__(
            f"{path} belongs to the local stack running as pid {pid or '?'}; stop it or give "
            "another --state-file"
        )


@dataclass
class StateFileLock:
    """The lock on one state file, and what this stack last wrote there."""

    path: Path
    _descriptor: int | None = None
    _written: tuple[int, int] | None = field(default=None)  # (inode, mtime_ns)

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + LOCK_SUFFIX)

    def acquire(self) -> None:
        """Take the lock, or refuse.

        Raises:
            StateFileBusy: another live process holds it.
        """
        while True:
            descriptor = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(descriptor, 32).decode("ascii", "replace").strip()
                os.close(descriptor)
                raise StateFileBusy(self.path, holder) from None
            # A holder that was releasing may have removed the file we opened: lock the
            # file that is at the path now.
            if _same_file(descriptor, self.lock_path):
                break
            os.close(descriptor)
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        self._descriptor = descriptor

    def wrote(self) -> None:
        """Remember the state file as this stack has just written it."""
        status = self.path.stat()
        self._written = (status.st_ino, status.st_mtime_ns)

    def release(self) -> None:
        """Remove the state file if it is still ours, then the lock."""
        if self._descriptor is None:
            return
        with contextlib.suppress(FileNotFoundError):
            status = self.path.stat()
            if self._written == (status.st_ino, status.st_mtime_ns):
                self.path.unlink()
        with contextlib.suppress(FileNotFoundError):
            self.lock_path.unlink()  # still locked: a starter waiting on it retries
        os.close(self._descriptor)
        self._descriptor = None


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        on_disk = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (opened.st_dev, opened.st_ino) == (on_disk.st_dev, on_disk.st_ino)
