"""Synthesize the real app once per session (cdk-nag included) and share the template.

The app is built exactly as ``app.py`` builds it, with cdk.json's context plus two
overrides that switch optional parts on (a notification URL and an alarm e-mail), so
that the assertions see every resource the stack can create.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# jsii prints a banner for end-of-life node majors unless they are listed here; it must be
# set before aws_cdk starts its node process (on first import).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")

from aws_cdk import Stack

from infra.application import build_app

ROOT = Path(__file__).resolve().parents[2]
NOTIFY_URL = "https://hooks.example.com/relaylink"
ALARM_EMAIL = "oncall@example.com"


@dataclass(frozen=True)
class Synthesized:
    """One synthesized stack: its template, the construct objects and the assembly dir."""

    template: dict[str, Any]
    stack: Any
    outdir: Path
    context: dict[str, Any]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return dict(self.template["Resources"])

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == resource_type}

    def logical_id(self, construct: Any) -> str:
        child = construct.node.default_child
        return str(Stack.of(construct).get_logical_id(child))

    def resource(self, construct: Any) -> dict[str, Any]:
        return self.resources[self.logical_id(construct)]

    def function_logical_id(self, name: str) -> str:
        return self.logical_id(getattr(self.stack, name).function)

    def function(self, name: str) -> dict[str, Any]:
        return self.resources[self.function_logical_id(name)]

    def environment(self, name: str) -> dict[str, Any]:
        return dict(self.function(name)["Properties"]["Environment"]["Variables"])


def cdk_json_context() -> dict[str, Any]:
    return dict(json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"])


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    context = cdk_json_context() | {"notify_url": NOTIFY_URL, "alarm_email": ALARM_EMAIL}
    outdir = tmp_path_factory.mktemp("cdk.out")
    # Fails here (with cdk-nag's report) when a finding is not acknowledged.
    app, stack = build_app(context=context, outdir=str(outdir))
    assembly = app.synth()
    template = assembly.get_stack_by_name(stack.stack_name).template
    yield Synthesized(template=template, stack=stack, outdir=outdir, context=context)


def ref(logical_id: str) -> dict[str, str]:
    return {"Ref": logical_id}


def get_att(logical_id: str, attribute: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}
