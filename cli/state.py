"""The local stack's state file: where everything listens, and the secrets it uses.

It holds the stack's secrets: the signing secrets, the MCP token and the key pair its
AWS emulator admits. ``relaylink-receiver local --state-file PATH`` writes it once
everything serves, rewrites it when a child process is restarted (its pid changes) and
removes it on shutdown (:mod:`local.state_lock`: one stack per file). Scripts, the
operator commands (``--local PATH``) and the test suites read it through
:meth:`LocalState.read`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cli.aws_clients import AwsClients

# A state file from before the stack generated its own pair (the emulator then
# admitted any key): these make boto3 never look for real credentials.
LOCAL_ACCESS_KEY = "local"
LOCAL_SECRET_KEY = "local"  # noqa: S105 (a placeholder the emulator ignores)


@dataclass(frozen=True, slots=True)
class Resources:
    table_name: str
    work_queue_url: str
    dead_letter_queue_url: str
    relay_failure_queue_url: str
    signing_secrets_arn: str
    mcp_token_secret_arn: str
    archive_bucket: str
    stream_arn: str = ""
    alarm_topic_arn: str = ""
    alert_topic_arn: str = ""  # the agent workflow's; its alerts go to alert_queue_url too
    alert_queue_url: str = ""


@dataclass(frozen=True, slots=True)
class LocalState:
    webhook_url: str
    mcp_url: str
    effects_url: str
    aws_endpoint_url: str
    region: str
    signing_secrets: list[str]
    mcp_token: str
    resources: Resources
    pids: dict[str, int] = field(default_factory=dict)
    bedrock_url: str = ""  # the Bedrock emulator's, when the worker runs the agent workflow
    workflow: str = ""  # the worker's workflow setting; "" in a state file from before it
    # The pair this stack's emulator admits (it refuses every other access key id).
    aws_access_key_id: str = LOCAL_ACCESS_KEY
    aws_secret_access_key: str = LOCAL_SECRET_KEY
    # Where the stack's functions (and operator commands on it) write their spans:
    # OTLP-JSON lines, read back by ``inbox show --trace``; "" before it had one.
    spans_file: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> LocalState:
        fields = dict(data)
        fields["resources"] = Resources(**fields["resources"])
        fields["pids"] = {str(k): int(v) for k, v in fields.get("pids", {}).items()}
        return cls(**fields)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> LocalState:
        """Read a state file.

        Raises:
            FileNotFoundError: no local stack is running with that state file.
            ValueError: the file is not a state file.
        """
        text = Path(path).read_text(encoding="utf-8")
        try:
            return cls.from_mapping(json.loads(text))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path} is not a local stack state file") from exc

    def write(self, path: str | os.PathLike[str]) -> None:
        """Atomically (a reader never sees half a file), readable by its owner only.

        The file holds the signing secrets and the MCP token. ``mkstemp`` creates the
        temporary file 0600 with ``O_EXCL``, so neither the umask nor a file or link
        planted under a predictable name in a shared directory such as /tmp can widen
        who reads it.
        """
        target = Path(path)
        descriptor, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
                stream.write(self.to_json())
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    @property
    def aws_client(self) -> AwsClients:
        """boto3 clients for the emulator: ``state.aws_client("sqs")``."""
        return emulator_clients(
            self.aws_endpoint_url,
            region=self.region,
            access_key_id=self.aws_access_key_id,
            secret_access_key=self.aws_secret_access_key,
        )

    def client_environment(self) -> dict[str, str]:
        """Environment that points boto3 (and so the handlers) at the emulator."""
        return {
            "AWS_ENDPOINT_URL": self.aws_endpoint_url,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.aws_access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.aws_secret_access_key,
        }


def emulator_clients(
    endpoint_url: str,
    *,
    region: str,
    access_key_id: str = LOCAL_ACCESS_KEY,
    secret_access_key: str = LOCAL_SECRET_KEY,
) -> AwsClients:
    """boto3 clients for the emulator at ``endpoint_url``, signing with that pair."""
    return AwsClients(
        region=region,
        endpoint_url=endpoint_url,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
    )
