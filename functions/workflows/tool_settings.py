"""Each tool's own settings: the ``tool_settings`` workflow setting, keyed by tool name.

``-c agent_tool_settings='{"open_ticket": {"url": "https://tickets.example/api",
"token_secret_arn": "arn:aws:secretsmanager:...:secret:tickets-AbC123"}}'`` gives the
``open_ticket`` tool its URL and names the secret holding its token: the tools factory
is called with a :class:`ToolSettings` (``TOOLS(settings)``) and reads its part with
``settings.of("open_ticket")``. A value is a JSON string, number or boolean.

Secrets are named, never inlined: a field whose name says it holds a credential
(``token``, ``secret``, ``password``, ``api_key``, ``credential``) must end in
``_secret_arn`` and name a Secrets Manager secret (its ARN, or its name), which the
tool reads itself; a ``whsec_`` value is refused wherever it appears. Lambda's
environment is readable by whoever may read the function's configuration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

SETTING_TOOL_SETTINGS: Final = "tool_settings"
SECRET_SUFFIX: Final = "_secret_arn"  # noqa: S105 (a field name's suffix, not a secret)
_CREDENTIAL_WORDS: Final = (
    "token",
    "secret",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "credential",
)
_SECRET_REFERENCE: Final = re.compile(
    r"^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+|[A-Za-z0-9/_+=.@-]{1,512})$"
)
_FIELD_NAME: Final = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SettingValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """The tools' own settings, by tool name (what ``TOOLS(settings)`` receives)."""

    by_tool: Mapping[str, Mapping[str, SettingValue]] = field(default_factory=dict)

    def of(self, tool: str) -> Mapping[str, SettingValue]:
        """The settings of ``tool`` (empty when it has none)."""
        return self.by_tool.get(tool, {})

    @property
    def secret_arns(self) -> tuple[str, ...]:
        """Every secret a tool setting names by complete ARN (the stack grants reading them)."""
        return tuple(
            str(value)
            for values in self.by_tool.values()
            for name, value in values.items()
            if name.endswith(SECRET_SUFFIX) and str(value).startswith("arn:")
        )

    @classmethod
    def parse(cls, text: str | None) -> ToolSettings:
        """Read the setting's JSON: ``{"<tool>": {"<field>": value, ...}, ...}``.

        Raises:
            ValueError: one line naming the tool and field at fault.
        """
        if text is None or not text.strip():
            return cls()
        try:
            document = json.loads(text)
        except ValueError:
            raise ValueError(f"{SETTING_TOOL_SETTINGS}: not JSON") from None
        if not isinstance(document, dict):
            raise ValueError(f"{SETTING_TOOL_SETTINGS}: a JSON object keyed by tool name")
        by_tool: dict[str, dict[str, SettingValue]] = {}
        for tool, values in document.items():
            if not isinstance(values, dict):
                raise ValueError(f"{SETTING_TOOL_SETTINGS}: {tool} takes a JSON object")
            by_tool[tool] = {name: _checked(tool, name, value) for name, value in values.items()}
        return cls(by_tool)


def _checked(tool: str, name: str, value: object) -> SettingValue:
    where = f"{SETTING_TOOL_SETTINGS}: {tool}.{name}"
    if not _FIELD_NAME.match(name):
        raise ValueError(f"{where}: a field name is lower-case letters, digits and '_'")
    if not isinstance(value, str | int | float | bool):
        raise ValueError(f"{where}: a string, number or boolean")
    if isinstance(value, str) and value.strip().startswith("whsec_"):
        raise ValueError(f"{where}: holds a secret; keep it in Secrets Manager and name it")
    if name.endswith(SECRET_SUFFIX):
        if not isinstance(value, str) or not _SECRET_REFERENCE.match(value):
            raise ValueError(f"{where}: a Secrets Manager secret's ARN or name")
    elif any(word in name for word in _CREDENTIAL_WORDS):
        raise ValueError(
            f"{where} looks like a credential: keep it in Secrets Manager and name the"
            f" secret as {name}{SECRET_SUFFIX}"
        )
    return value
