"""Who decides: the identity an approval's decision records.

On a deployed stack it is the caller's AWS principal (STS ``GetCallerIdentity``):
what IAM authenticated, not what the caller says. On a local stack there is no
principal to ask: the name given (``--by``), else ``$RELAYLINK_OPERATOR``, else the
user's login name. A name given on a deployed stack is kept beside the ARN, never
instead of it.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Mapping
from typing import Final

from ops.shown_text import visible
from ops.target import OperatorError

OPERATOR_ENV: Final = "RELAYLINK_OPERATOR"
MAX_NAME_CHARS: Final = 200


class BadOperatorName(OperatorError):
    """The name given could mislead a reader of the record (the caller's option)."""


def operator_name(given: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The name the operator gives (``--by``, then the environment); None: none given."""
    env = os.environ if environ is None else environ
    name = (given or env.get(OPERATOR_ENV) or "").strip()
    if not name:
        return None
    if len(name) > MAX_NAME_CHARS or visible(name) != name:
        raise BadOperatorName(
            f"--by (or ${OPERATOR_ENV}) is at most {MAX_NAME_CHARS} characters,"
            " with no control or invisible character"
        )
    return name


def local_decider(given: str | None, environ: Mapping[str, str] | None = None) -> str:
    """A local stack's decider: the name given, else the login name."""
    name = operator_name(given, environ)
    if name is not None:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        raise OperatorError(
            f"say who decides: --by NAME (or ${OPERATOR_ENV}); there is no login name"
        ) from None


def caller_arn(region: str | None) -> str:
    """The caller's principal, as STS names it (any principal may ask; no permission)."""
    import boto3  # noqa: PLC0415 (keeps the CLI's --help quick)
    from botocore.exceptions import ClientError  # noqa: PLC0415

    try:
        sts = boto3.session.Session(region_name=region).client("sts")
        return str(sts.get_caller_identity()["Arn"])
    except ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", "unknown error")
        raise OperatorError(f"cannot tell who decides (sts:GetCallerIdentity): {message}") from None


def deployed_decider(caller_arn: Callable[[], str], given: str | None) -> str:
    """A deployed stack's decider: the caller's principal ARN, and the name if given."""
    arn = caller_arn()
    name = operator_name(given)
    return arn if name is None else f"{arn} (name: {name})"
