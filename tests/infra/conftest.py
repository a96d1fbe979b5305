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


def resolved(environment: dict[str, Any]) -> dict[str, str]:
    """A function's environment with plausible deploy-time values for its references."""
    return {key: _resolved(key, value) for key, value in environment.items()}


def _resolved(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if key.endswith("_ARN"):
        return "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink-AbCdEf"
    if key.endswith("_URL"):
        return "https://sqs.eu-west-1.amazonaws.com/123456789012/relaylink-queue"
    return f"resolved-{key.lower()}"


def cdk_json_context() -> dict[str, Any]:
    return dict(json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"])


# The assets this session's synths bundled: assembly folder name -> the folder.
_BUNDLED: dict[str, Path] = {}


def synthesize(tmp_path_factory: pytest.TempPathFactory, overrides: dict[str, Any]) -> Synthesized:
    """The real app (cdk-nag included) from cdk.json's context with ``overrides``."""
    context = cdk_json_context() | overrides
    outdir = tmp_path_factory.mktemp("cdk.out")
    # An asset's folder is named by the digest of all it holds (infra/bundle.py), and CDK
    # bundles none whose folder is already in the assembly: each content is bundled once
    # a session, and the other synths link to it (as a second `cdk synth` reuses cdk.out).
    for name, bundled in _BUNDLED.items():
        (outdir / name).symlink_to(bundled, target_is_directory=True)
    # Fails here (with cdk-nag's report) when a finding is not acknowledged.
    app, stack = build_app(context=context, outdir=str(outdir))
    assembly = app.synth()
    for folder in outdir.glob("asset.*"):
        if folder.is_dir() and not folder.is_symlink():
            _BUNDLED[folder.name] = folder
    template = assembly.get_stack_by_name(stack.stack_name).template
    return Synthesized(template=template, stack=stack, outdir=outdir, context=context)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    yield synthesize(
        tmp_path_factory, {"notify_url": NOTIFY_URL, "alarm_email": ALARM_EMAIL, "dashboard": True}
    )


Grant = tuple[str, str]  # (action, resource as canonical JSON)


def resource_key(resource: Any) -> str:
    return json.dumps(resource, sort_keys=True)


def role_statements(
    synthesized: Synthesized, function: str, *, managed_policy_arns: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The statements of ``function``'s role: one inline policy, and no managed policy
    but those the deployer named (``managed_policy_arns``)."""
    role_id = synthesized.function(function)["Properties"]["Role"]["Fn::GetAtt"][0]
    role = synthesized.resources[role_id]["Properties"]
    attached = tuple(role.get("ManagedPolicyArns", ()))
    assert attached == managed_policy_arns, f"{function} must not use other managed policies"
    assert "Policies" not in role
    policies = [
        p["Properties"]
        for p in synthesized.of_type("AWS::IAM::Policy").values()
        if ref(role_id) in p["Properties"]["Roles"]
    ]
    assert len(policies) == 1
    return list(policies[0]["PolicyDocument"]["Statement"])


def role_grants(
    synthesized: Synthesized, function: str, *, managed_policy_arns: tuple[str, ...] = ()
) -> set[Grant]:
    """Every (action, resource) pair ``function``'s role allows in its own policy."""
    grants: set[Grant] = set()
    for statement in role_statements(
        synthesized, function, managed_policy_arns=managed_policy_arns
    ):
        if statement["Effect"] == "Deny":
            continue  # grants nothing (role_denials reads them)
        assert statement["Effect"] == "Allow"
        actions = _listed(statement["Action"])
        # Only a KMS grant through Secrets Manager carries a condition (kms:ViaService).
        allowed = {"Effect", "Action", "Resource"}
        if all(action.startswith("kms:") for action in actions):
            allowed.add("Condition")
        assert set(statement) <= allowed, statement
        grants.update((a, resource_key(r)) for a in actions for r in _listed(statement["Resource"]))
    return grants


def role_denials(synthesized: Synthesized, function: str) -> list[dict[str, Any]]:
    """The Deny statements of ``function``'s own policy."""
    return [s for s in role_statements(synthesized, function) if s["Effect"] == "Deny"]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def ref(logical_id: str) -> dict[str, str]:
    return {"Ref": logical_id}


def get_att(logical_id: str, attribute: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}
