"""What a user can cause, as the one-line error the CLI prints instead of a traceback.

The entry point (:mod:`ops.cli`) passes whatever a command raises through
:func:`known_failure`; every command, present and future, gets these answers
without handling them itself. An exception not listed here is a bug and keeps
its traceback.
"""

from __future__ import annotations

import importlib.metadata
import re

from cli.errors import CommandError, ErrorCode

DISTRIBUTION = "relaylink-receiver"
_REGION_HINT = "pass --region, or set AWS_DEFAULT_REGION (or AWS_PROFILE, a profile with a region)"
_CREDENTIALS_HINT = (
    "set AWS_PROFILE (after `aws sso login` or `aws configure`), or AWS_ACCESS_KEY_ID"
    " and AWS_SECRET_ACCESS_KEY"
)
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def known_failure(exc: BaseException) -> CommandError | None:
    """The one-line error for ``exc``, or None when it is not one a user can cause."""
    if isinstance(exc, CommandError):
        return exc
    if isinstance(exc, ModuleNotFoundError):
        return _missing_module(exc)
    return _aws_failure(exc)


def _aws_failure(exc: BaseException) -> CommandError | None:
    from botocore.exceptions import (  # noqa: PLC0415 (imported once a command has failed)
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    if isinstance(exc, NoRegionError):
        return CommandError(f"no AWS region: {_REGION_HINT}", code=ErrorCode.AWS_REGION)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return CommandError(
            f"no AWS credentials found: {_CREDENTIALS_HINT}", code=ErrorCode.AWS_CREDENTIALS
        )
    if isinstance(exc, EndpointConnectionError):
        return CommandError(
            f"cannot reach {exc.kwargs.get('endpoint_url', 'the AWS endpoint')}; check the"
            " network, the region and AWS_ENDPOINT_URL",
            code=ErrorCode.AWS_UNAVAILABLE,
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        message = f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
        return CommandError(message, code=ErrorCode.AWS_ERROR)
    if isinstance(exc, BotoCoreError):
        return CommandError(str(exc), code=ErrorCode.AWS_UNAVAILABLE)
    return None


def _missing_module(exc: ModuleNotFoundError) -> CommandError | None:
    module = (exc.name or "").split(".")[0]
    if not module:
        return None
    extra = extra_providing(module)
    if extra is None:
        return CommandError(
            f"the module {module} is missing; reinstall {DISTRIBUTION}",
            code=ErrorCode.MISSING_EXTRA,
        )
    return CommandError(
        f"this command needs {module}, from the [{extra}] extra:"
        f" pip install '{DISTRIBUTION}[{extra}]'",
        code=ErrorCode.MISSING_EXTRA,
    )


def extra_providing(module: str) -> str | None:
    """The extra of this distribution that requires the distribution named ``module``."""
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    wanted = _normalize(module)
    for requirement in requirements:
        name = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
        marker = _EXTRA_MARKER.search(requirement)
        if marker and _normalize(name) == wanted:
            return marker.group(1)
    return None


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()
