"""``--local STATE_FILE``: a running local stack's state file, read for a command.

Every way it can be wrong becomes one line the user can act on: no such file (the
stack is stopped), a directory or an unreadable file, not a state file, or a file
left behind by a stack that no longer answers (killed with SIGKILL).
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cli.errors import CommandError, ErrorCode

if TYPE_CHECKING:
    from cli.state import LocalState

STATE_HOME_ENV = "XDG_STATE_HOME"
STATE_FILE_NAME = "local-stack.json"


def default_state_file() -> str:
    """The state file's path when ``--state-file`` / ``--local`` are given no path: in a
    folder of the user's own (``$XDG_STATE_HOME/relaylink-receiver/``, by default
    ``~/.local/state/relaylink-receiver/``), never a shared temporary folder where
    another user's stack could find or replace it."""
    base = os.environ.get(STATE_HOME_ENV) or str(Path.home() / ".local" / "state")
    return str(Path(base) / "relaylink-receiver" / STATE_FILE_NAME)


def make_private_folder(path: str) -> None:
    """Create the state file's folder, readable by its owner only (if it is new)."""
    Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)


def add_state_file_argument(parser: Any, flag: str, help: str) -> None:
    """``flag PATH``, or ``flag`` alone for :func:`default_state_file`."""
    parser.add_argument(
        flag,
        metavar="STATE_FILE",
        nargs="?",
        const=default_state_file(),
        help=f"{help} (alone: {default_state_file()})",
    )


# Loopback: a listening stack accepts at once; a stopped one refuses at once.
_CONNECT_TIMEOUT_SECONDS = 2.0
_START_HINT = "is `relaylink-receiver local` running?"


def read_running_stack(path: str, *, answering_url: str = "aws_endpoint_url") -> LocalState:
    """The state file at ``path``, once the URL it names (a LocalState field) answers.

    Raises:
        CommandError: the file is missing, unreadable or foreign, or nothing listens.
    """
    state = read_state_file(path)
    url = getattr(state, answering_url)
    where = address(url)
    if not _listening(url):
        raise CommandError(
            f"no local stack answers at {where} (from {path}); {_START_HINT}",
            code=ErrorCode.STACK_UNREACHABLE,
        )
    return state


def read_state_file(path: str) -> LocalState:
    """The state file at ``path``; what is wrong with it as a one-line CommandError."""
    from cli.state import LocalState  # noqa: PLC0415 (boto3 behind it; --help stays quick)

    try:
        return LocalState.read(path)
    except FileNotFoundError:
        raise CommandError(
            f"no state file {path}; {_START_HINT}", code=ErrorCode.STACK_UNREACHABLE
        ) from None
    except IsADirectoryError:
        raise CommandError(
            f"{path} is a directory; give the file `local --state-file` wrote",
            code=ErrorCode.STATE_FILE,
        ) from None
    except UnicodeDecodeError:
        raise CommandError(
            f"{path} is not a local stack state file", code=ErrorCode.STATE_FILE
        ) from None
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise CommandError(
            f"cannot read the state file {path}: {reason.lower()}", code=ErrorCode.STATE_FILE
        ) from None
    except ValueError as exc:
        raise CommandError(str(exc), code=ErrorCode.STATE_FILE) from None


def address(url: str) -> str:
    """``host:port`` of a URL: what to name in a message (a path may hold a secret token)."""
    host, port = _host_and_port(url)
    return f"{host}:{port}"


def _host_and_port(url: str) -> tuple[str, int | str]:
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    try:
        return parts.hostname or "", parts.port or default
    except ValueError:  # a port that is not a number: name what was given
        return parts.hostname or "", parts.netloc.rpartition(":")[2]


def _listening(url: str) -> bool:
    host, port = _host_and_port(url)
    if not isinstance(port, int):
        return False
    try:
        with socket.create_connection((host, port), _CONNECT_TIMEOUT_SECONDS):
            return True
    except OSError:
        return False
