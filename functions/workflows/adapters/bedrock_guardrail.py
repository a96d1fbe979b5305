"""Bedrock Runtime ``ApplyGuardrail``: the screening port (:mod:`functions.workflows.screening`).

One call per screening, source ``INPUT``, one text block. The answer's ``action``
says whether the guardrail intervened; its ``assessments`` are read into one line per
finding that acted (a policy's kind, type or name, confidence and action), and the
``match`` fields (the text a word, PII or regex filter matched) and ``outputs`` (the
guardrail's masked copy) are never kept: they quote the briefing.

The outcome contract is the read-only one: the call changes nothing, so the SDK's
own retries are safe (``GUARDRAIL_CONFIG`` in the wiring) and an unknown outcome is
asked again (the answers' outcomes are :mod:`functions.workflows.adapters.bedrock_errors`'):

=====================================  =====================================
the call                               raises
=====================================  =====================================
answered                               (the screening)
throttled, quota, never connected      ``NotApplied`` (retried later)
validation, access denied, not found   ``PermanentError`` ``guardrail_rejected``
5xx, timeout, lost, garbled answer     ``TransientError`` (retried)
=====================================  =====================================
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from functions.core.errors import TransientError
from functions.workflows.adapters.bedrock_errors import bedrock_call
from functions.workflows.alert_text import alert_line
from functions.workflows.screening import (
    MAX_FINDINGS,
    MAX_REASON_CHARS,
    GuardrailRef,
    Screening,
    finding_line,
)

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime.client import BedrockRuntimeClient

INTERVENED: Final = "GUARDRAIL_INTERVENED"


class BedrockGuardrail:
    """Calls ``ApplyGuardrail`` on one guardrail version with one ``bedrock-runtime`` client."""

    def __init__(self, *, client: BedrockRuntimeClient, guardrail: GuardrailRef) -> None:
        self._client = client
        self._guardrail = guardrail

    def screen(self, text: str) -> Screening:
        response = bedrock_call(
            lambda: self._client.apply_guardrail(
                guardrailIdentifier=self._guardrail.id,
                guardrailVersion=self._guardrail.version,
                source="INPUT",
                content=[{"text": {"text": text}}],
            ),
            subject="guardrail",
        )
        return screening_of(response, self._guardrail)


def screening_of(response: Mapping[str, Any], guardrail: GuardrailRef) -> Screening:
    """The screening an ApplyGuardrail answer gives (its matched text left out).

    Raises:
        TransientError: ``guardrail_answer_invalid``: an answer of no usable shape.
    """
    try:
        action = response["action"]
        if not isinstance(action, str):
            raise TypeError("action is a string")
        assessments = response.get("assessments") or []
        lines = Counter(line for a in assessments for line in _findings(a))
        reason = response.get("actionReason") or ""
        if not isinstance(reason, str):
            raise TypeError("actionReason is a string")
    except (KeyError, TypeError, AttributeError) as exc:
        raise TransientError("guardrail_answer_invalid") from exc
    findings = tuple(
        finding_line(line if count == 1 else f"{line} (x{count})")
        for line, count in list(lines.items())[:MAX_FINDINGS]
    )
    return Screening(
        intervened=action == INTERVENED,
        reason=alert_line(reason, MAX_REASON_CHARS),
        findings=findings,
        guardrail=guardrail.shown,
    )


def _findings(assessment: Mapping[str, Any]) -> Iterator[str]:
    """One line per entry that acted, in the order of botocore's GuardrailAssessment."""
    for topic in _acted(assessment, "topicPolicy", "topics"):
        yield f"denied topic {topic['name']}: {topic['action']}"
    for entry in _acted(assessment, "contentPolicy", "filters"):
        yield f"content filter {entry['type']} ({entry['confidence']}): {entry['action']}"
    for entry in _acted(assessment, "wordPolicy", "customWords"):
        yield f"custom word: {entry['action']}"
    for entry in _acted(assessment, "wordPolicy", "managedWordLists"):
        yield f"managed word list {entry['type']}: {entry['action']}"
    for entry in _acted(assessment, "sensitiveInformationPolicy", "piiEntities"):
        yield f"sensitive information {entry['type']}: {entry['action']}"
    for entry in _acted(assessment, "sensitiveInformationPolicy", "regexes"):
        yield f"regex {entry.get('name') or '(unnamed)'}: {entry['action']}"
    for entry in _acted(assessment, "contextualGroundingPolicy", "filters"):
        yield f"contextual grounding {entry['type']}: {entry['action']}"
    reasoning = assessment.get("automatedReasoningPolicy") or {}
    if reasoning.get("findings"):
        yield f"automated reasoning: {len(reasoning['findings'])} finding(s)"


def _acted(assessment: Mapping[str, Any], policy: str, entries: str) -> Iterator[Any]:
    """The policy's entries whose action is not ``NONE`` (with ``outputScope`` FULL, the
    answer lists what did not act too)."""
    for entry in (assessment.get(policy) or {}).get(entries) or []:
        if entry.get("action", "NONE") != "NONE":
            yield entry
