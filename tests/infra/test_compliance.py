"""cdk-nag (AwsSolutions) and cfn-lint over the synthesized template."""

from __future__ import annotations

import json

from cfnlint.api import lint
from cfnlint.config import ManualArgs

from tests.infra.conftest import Synthesized


def expected_acknowledgements(synthesized: Synthesized) -> dict[str, int]:
    """Every acknowledged finding and how often: a new one must be argued in review."""
    bucket = synthesized.logical_id(synthesized.stack.archive.bucket)
    return {
        "AwsSolutions-APIG4": 1,  # the signature-authenticated webhook route
        "AwsSolutions-IAM5[Action::s3:Abort*]": 1,  # worker: grant_put
        "AwsSolutions-IAM5[Resource::*]": 4,  # X-Ray on each role (+ ListStreams, relay)
        f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/*]": 1,  # worker: grant_put
        # worker: step results by content digest
        f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/step-results/sha256/*]": 1,
        "AwsSolutions-S1": 1,  # archive bucket without server access logs
        "AwsSolutions-SMG4": 2,  # two RelayLink-issued secrets, rotated by hand
        "AwsSolutions-SQS3": 1,  # the relay failure queue is itself a DLQ
    }


# CDK itself adds DependsOn on each function's role next to the GetAtt: redundant, harmless.
CFN_LINT_IGNORED = ["W3005"]


def _nag_report(synthesized: Synthesized) -> dict[str, object]:
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    return dict(plugin)


def test_cdk_nag_finds_nothing_unacknowledged(synthesized: Synthesized) -> None:
    report = _nag_report(synthesized)
    assert report["conclusion"] == "success"
    assert report["violations"] == []


def test_every_acknowledgement_is_expected_and_has_a_reason(synthesized: Synthesized) -> None:
    suppressed = _nag_report(synthesized)["suppressedViolations"]
    assert isinstance(suppressed, list)
    counts: dict[str, int] = {}
    for finding in suppressed:
        rule = finding["acknowledgedId"].removeprefix("AwsSolutions::")
        counts[rule] = counts.get(rule, 0) + len(finding["violatingConstructs"])
        assert len(finding["reason"].split()) >= 12, rule
    assert counts == expected_acknowledgements(synthesized)


def test_cfn_lint_finds_no_errors_or_warnings(synthesized: Synthesized) -> None:
    matches = lint(
        json.dumps(synthesized.template),
        config=ManualArgs(regions=["us-east-1", "eu-west-1"], ignore_checks=CFN_LINT_IGNORED),
    )
    assert [f"{m.rule.id} {m.message}" for m in matches] == []
