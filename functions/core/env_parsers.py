"""Reading typed settings from a Lambda environment, failing fast with the name."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

_Number = TypeVar("_Number", int, float)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


class SettingsError(ValueError):
    """The environment is incomplete or malformed; the message names the variable."""


def required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise SettingsError(f"{name} is required and not set")
    return value


def optional(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def integer(env: Mapping[str, str], name: str, *, default: int, low: int, high: int) -> int:
    return _bounded(env, name, parse=int, kind="an integer", default=default, low=low, high=high)


def number(env: Mapping[str, str], name: str, *, default: float, low: float, high: float) -> float:
    return _bounded(env, name, parse=float, kind="a number", default=default, low=low, high=high)


def _bounded(
    env: Mapping[str, str],
    name: str,
    *,
    parse: Callable[[str], _Number],
    kind: str,
    default: _Number,
    low: _Number,
    high: _Number,
) -> _Number:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = parse(text)
    except ValueError:
        raise SettingsError(f"{name} must be {kind}") from None
    if not low <= value <= high:  # (NaN is within no range)
        raise SettingsError(f"{name} must be between {low} and {high}")
    return value


@dataclass(frozen=True, slots=True)
class BoundedInteger:
    """An integer variable with its default and its allowed range, declared once."""

    name: str
    default: int
    low: int
    high: int

    def read(self, env: Mapping[str, str]) -> int:
        return integer(env, self.name, default=self.default, low=self.low, high=self.high)


def secret_arn(env: Mapping[str, str], name: str) -> str:
    """A secret referenced by ARN (never a secret value in the environment)."""
    arn = required(env, name)
    if not arn.startswith("arn:"):
        raise SettingsError(f"{name} must be a secret ARN")
    return arn


def boolean(env: Mapping[str, str], name: str) -> bool:
    text = env.get(name, "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise SettingsError(f"{name} must be true or false")


def flag(env: Mapping[str, str], name: str) -> bool:
    """An optional ``true``/``false``: False when absent."""
    return name in env and boolean(env, name)


def host_list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """Comma-separated hosts (exact, or ``*.suffix``), lower-cased; at least one."""
    hosts = tuple(h.strip().lower() for h in required(env, name).split(",") if h.strip())
    if not hosts:
        raise SettingsError(f"{name} must list at least one host")
    return hosts


def string_map(env: Mapping[str, str], name: str) -> dict[str, str]:
    """A JSON object whose values are all strings; unset or empty is ``{}``."""
    text = env.get(name, "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise SettingsError(f"{name} must be a JSON object of strings") from None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise SettingsError(f"{name} must be a JSON object of strings")
    return value
