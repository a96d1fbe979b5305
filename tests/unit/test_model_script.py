"""The model script file format, and the Bedrock emulator answering from it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from local.bedrock_emulator import DEFAULT_MODEL_ID, BedrockEmulator
from local.model_script import ModelScript, ModelScriptError, load_model_script

EXAMPLE = Path(__file__).parents[2] / "examples" / "team_agent" / "model-script.json"
TOOLS: dict[str, Any] = {
    "tools": [{"toolSpec": {"name": n, "inputSchema": {"json": {}}}} for n in ("look", "act")]
}
SCRIPT = {
    "deliveries": [
        {
            "match": {"title_contains": "Outage"},
            "turns": [
                {"tool_use": [{"name": "look", "input": {"customer": "acme"}}]},
                {
                    "text": "Opening one.",
                    "tool_use": [{"name": "act", "input": {"priority": "high"}}],
                    "usage": {"input_tokens": 900, "output_tokens": 40},
                },
                {"text": "Ticket opened for acme."},
            ],
        },
        {"match": {"package_id": "pkg_quiet"}, "turns": [{"text": "Nothing to do."}]},
    ],
    "turns": [{"text": "Routine."}],
}


def _request(package: dict[str, Any], assistant_turns: int = 0, *, tools: bool = True) -> bytes:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"text": "Triage this.\n" + json.dumps(package)}]}
    ]
    for _ in range(assistant_turns):
        messages += [
            {"role": "assistant", "content": [{"text": "..."}]},
            {"role": "user", "content": [{"text": "result"}]},
        ]
    body: dict[str, Any] = {
        "messages": messages,
        "requestMetadata": {"delivery_id": "d1"},
        **({"toolConfig": TOOLS} if tools else {}),
    }
    return json.dumps(body).encode()


def _answer(emulator: BedrockEmulator, body: bytes) -> dict[str, Any]:
    reply = emulator.converse(DEFAULT_MODEL_ID, body)
    assert reply.status == 200, reply.payload
    return dict(reply.payload)


def _emulator(script: object = SCRIPT) -> BedrockEmulator:
    emulator = BedrockEmulator()
    emulator.use_script(ModelScript.parse(script))
    return emulator


def test_a_matched_delivery_gets_its_turns_in_order_then_the_summary() -> None:
    emulator = _emulator()
    package = {"package_id": "pkg_1", "title": "Outage at acme", "briefing": "db down"}
    first = _answer(emulator, _request(package))
    assert first["stopReason"] == "tool_use"
    (use,) = first["output"]["message"]["content"]
    assert (use["toolUse"]["name"], use["toolUse"]["input"]) == ("look", {"customer": "acme"})
    second = _answer(emulator, _request(package, 1))
    text, act = second["output"]["message"]["content"]
    assert text == {"text": "Opening one."} and act["toolUse"]["name"] == "act"
    assert (second["usage"]["inputTokens"], second["usage"]["outputTokens"]) == (900, 40)
    third = _answer(emulator, _request(package, 2))
    assert third["stopReason"] == "end_turn"
    assert third["output"]["message"]["content"] == [{"text": "Ticket opened for acme."}]
    fourth = _answer(emulator, _request(package, 3))
    assert fourth["output"]["message"]["content"][0]["text"].startswith("Summary of Outage")


def test_match_by_package_id_and_the_top_level_turns_for_the_rest() -> None:
    emulator = _emulator()
    quiet = _answer(emulator, _request({"package_id": "pkg_quiet", "title": "x"}))
    other = _answer(emulator, _request({"package_id": "pkg_2", "title": "Routine work"}))
    assert quiet["output"]["message"]["content"] == [{"text": "Nothing to do."}]
    assert other["output"]["message"]["content"] == [{"text": "Routine."}]


def test_tool_uses_are_asked_only_when_the_request_offers_tools() -> None:
    emulator = _emulator()
    package = {"package_id": "pkg_1", "title": "Outage", "briefing": ""}
    answer = _answer(emulator, _request(package, tools=False))
    assert answer["stopReason"] == "end_turn"
    assert answer["output"]["message"]["content"][0]["text"].startswith("Summary of Outage")


def test_a_tool_the_request_does_not_offer_is_a_validation_error() -> None:
    emulator = _emulator({"turns": [{"tool_use": [{"name": "missing"}]}]})
    reply = emulator.converse(DEFAULT_MODEL_ID, _request({"title": "t"}))
    assert reply.status == 400
    assert "missing" in reply.payload["message"]


def test_watchers_hear_each_tool_use_answered() -> None:
    emulator = _emulator()
    heard: list[tuple[str, str, str]] = []
    emulator.watch_tool_uses(lambda *use: heard.append(use))
    answer = _answer(emulator, _request({"title": "Outage"}))
    ((delivery_id, name, tool_use_id),) = heard
    assert (delivery_id, name) == ("d1", "look")
    assert tool_use_id == answer["output"]["message"]["content"][0]["toolUse"]["toolUseId"]


def test_script_tools_is_a_script_of_tool_turns_for_every_delivery() -> None:
    emulator = BedrockEmulator()
    emulator.script_tools([[("look", {"customer": "acme"})]])
    first = _answer(emulator, _request({"title": "Anything"}))
    assert first["stopReason"] == "tool_use"
    emulator.script_tools([])
    assert _answer(emulator, _request({"title": "Anything"}))["stopReason"] == "end_turn"


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({}, "script.json: has neither deliveries nor turns"),
        ({"turn": []}, "script.json: unknown key 'turn' (did you mean 'turns'?)"),
        ({"turns": [{}]}, "script.json: turns[0]: needs a non-blank text or at least one"),
        (
            {"turns": [{"text": "a", "tool_uses": []}]},
            "script.json: turns[0]: unknown key 'tool_uses' (did you mean 'tool_use'?)",
        ),
        (
            {"turns": [{"tool_use": [{"input": {}}]}]},
            "script.json: turns[0].tool_use[0].name: must be a non-empty string",
        ),
        (
            {"turns": [{"text": "a", "usage": {"input_tokens": -1}}]},
            "script.json: turns[0].usage.input_tokens: must be a whole number >= 0",
        ),
        (
            {"deliveries": [{"match": {"title_contains": "x", "package_id": "p"}, "turns": []}]},
            "script.json: deliveries[0].match: must name exactly one of",
        ),
        (
            {"deliveries": [{"turns": []}]},
            "script.json: deliveries[0]: needs both match and turns",
        ),
        ([], "script.json: must be an object with deliveries, turns"),
    ],
)
def test_an_invalid_script_is_refused_in_one_line_naming_the_entry(
    tmp_path: Path, document: object, problem: str
) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ModelScriptError) as refused:
        load_model_script(path)
    message = str(refused.value)
    assert message.startswith(str(tmp_path) + "/" + problem)
    assert "\n" not in message


def test_a_file_that_is_not_json_names_where(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('{"turns": [\n  {"text": "a",}\n]}')
    with pytest.raises(ModelScriptError, match=r"script.json: not JSON: .*line 2"):
        load_model_script(path)
    with pytest.raises(ModelScriptError, match="cannot read it"):
        load_model_script(tmp_path / "absent.json")


def test_the_example_script_loads() -> None:
    script = load_model_script(EXAMPLE)
    assert script.entries or script.turns


def test_tool_definitions_and_tool_blocks_count_as_input() -> None:
    emulator = _emulator({"turns": [{"text": "ok"}]})
    package = {"title": "t"}
    without = _answer(emulator, _request(package, tools=False))["usage"]["inputTokens"]
    offered = _answer(emulator, _request(package))["usage"]["inputTokens"]
    assert offered - without == math.ceil(len(json.dumps(TOOLS)) / 4)
