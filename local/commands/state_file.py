"""``--local STATE_FILE``: a running local stack's state file, read for a command.

Every way it can be wrong becomes one line the user can act on: no such file (the
stack is stopped), a directory or an unreadable file, not a state file, or a file
left behind by a stack that no longer answers (killed with SIGKILL).
"""

from __future__ import annotations

import errno
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from local.commands import CommandError, ErrorCode

if TYPE_CHECKING:
    from local.state import LocalState

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
    from local.state import LocalState  # noqa: PLC0415 (boto3 behind it; --help stays quick)

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
