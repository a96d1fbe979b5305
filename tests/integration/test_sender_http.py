"""The RelayLink simulator against a real HTTP server on 127.0.0.1.

The server (stdlib ``http.server``) verifies every request's signature with
``functions.core.signature`` and answers from a script per delivery: a status, a
stall (no answer until the test ends) or a dropped connection.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cli.state import LocalState, Resources
from functions.core.signature import SignatureRejected, SigningSecret, read_headers, verify
from local.sender import CONNECTION_ERROR, TIMEOUT, Delivery, SenderConfig, send_all, send_one
from local.testkit.builders import OTHER_SECRET, SECRET
from ops.cli import main

MCP = "http://127.0.0.1:9/mcp"
STALL = "stall"
DROP = "drop"


@dataclass(frozen=True)
class Seen:
    headers: dict[str, str]
    body: bytes
    verified_with: tuple[int, ...]  # indexes of the server's secrets each v1 entry matched
    stalled_in_flight: int  # stalled requests still open when this one arrived


@dataclass
class ScriptedReceiver:
    url: str
    secrets: list[str]
    script: dict[str, list[int | str]] = field(default_factory=dict)
    default: int | str = 202
    seen: dict[str, list[Seen]] = field(default_factory=lambda: defaultdict(list))
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stalled: int = 0

    def requests(self) -> list[Seen]:
        with self.lock:
            return [s for seen in self.seen.values() for s in seen]


def _matches(headers: dict[str, str], body: bytes, secrets: list[str]) -> tuple[int, ...]:
    matched: list[int] = []
    for entry in headers.get("x-relaylink-signature", "").split(" "):
        for index, secret in enumerate(secrets):
            try:
                signed = read_headers(
                    delivery_id=headers.get("x-relaylink-delivery"),
                    timestamp=headers.get("x-relaylink-timestamp"),
                    signature=entry,
                    now=int(time.time()),
                )
                verify(signed, body, [SigningSecret.parse(secret)])
            except SignatureRejected:
                continue
            matched.append(index)
    return tuple(matched)


@pytest.fixture
def receiver() -> Iterator[ScriptedReceiver]:
    state: ScriptedReceiver

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            headers = {k.lower(): v for k, v in self.headers.items()}
            delivery_id = headers.get("x-relaylink-delivery", "")
            with state.lock:
                state.seen[delivery_id].append(
                    Seen(headers, body, _matches(headers, body, state.secrets), state.stalled)
                )
                steps = state.script.get(delivery_id)
                action = steps.pop(0) if steps else state.default
                if action == STALL:
                    state.stalled += 1
            if action == STALL:
                state.release.wait(timeout=30)
                with state.lock:
                    state.stalled -= 1
                self.close_connection = True
                return
            if action == DROP:
                self.close_connection = True  # no answer at all
                return
            assert isinstance(action, int)
            self.send_response(action)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    state = ScriptedReceiver(url=f"http://{host!s}:{port}/relaylink", secrets=[SECRET])
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def config(url: str, **overrides: object) -> SenderConfig:
    values: dict[str, object] = {
        "url": url,
        "secrets": (SECRET,),
        "timeout_seconds": 2.0,
        "time_scale": 1000.0,
        "schedule": (1.0, 1.0, 1.0),
    }
    values.update(overrides)
    return SenderConfig(**values)  # type: ignore[arg-type]


def test_attempts_send_identical_bytes_each_validly_signed(receiver: ScriptedReceiver) -> None:
    delivery = Delivery.new(mcp_url=MCP)
    receiver.script[delivery.delivery_id] = [503, 500, 202]
    result = send_one(config(receiver.url), delivery)
    assert [a.answer for a in result.attempts] == ["503", "500", "202"]
    seen = receiver.seen[delivery.delivery_id]
    assert [s.body for s in seen] == [delivery.body] * 3
    assert all(s.verified_with == (0,) for s in seen)
    assert [s.headers["x-relaylink-attempt"] for s in seen] == ["1", "2", "3"]
    assert {s.headers["x-relaylink-delivery"] for s in seen} == {delivery.delivery_id}
    assert json.loads(seen[0].body)["delivery_id"] == delivery.delivery_id


def test_no_retry_after_a_2xx(receiver: ScriptedReceiver) -> None:
    delivery = Delivery.new(mcp_url=MCP)
    receiver.script[delivery.delivery_id] = [200]
    result = send_one(config(receiver.url), delivery)
    assert result.acknowledged and len(result.attempts) == 1
    assert len(receiver.seen[delivery.delivery_id]) == 1


def test_4xx_is_retried_like_5xx(receiver: ScriptedReceiver) -> None:
    delivery = Delivery.new(mcp_url=MCP)
    receiver.script[delivery.delivery_id] = [400, 401, 202]
    result = send_one(config(receiver.url), delivery)
    assert result.final_answer == "202" and len(receiver.seen[delivery.delivery_id]) == 3


def test_timeout_retries_while_the_old_attempt_is_still_open(receiver: ScriptedReceiver) -> None:
    delivery = Delivery.new(mcp_url=MCP)
    receiver.script[delivery.delivery_id] = [STALL, 202]
    result = send_one(config(receiver.url, timeout_seconds=0.3), delivery)
    assert [a.answer for a in result.attempts] == [TIMEOUT, "202"]
    first, retry = receiver.seen[delivery.delivery_id]
    assert retry.stalled_in_flight == 1  # the receiver was still holding attempt 1
    assert retry.body == first.body


def test_dropped_connection_is_retried(receiver: ScriptedReceiver) -> None:
    delivery = Delivery.new(mcp_url=MCP)
    receiver.script[delivery.delivery_id] = [DROP, 202]
    result = send_one(config(receiver.url), delivery)
    assert [a.answer for a in result.attempts] == [CONNECTION_ERROR, "202"]


def test_connection_refused_retries_the_whole_schedule_then_gives_up() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port now: every attempt is refused.
    result = send_one(config(f"http://127.0.0.1:{port}/relaylink"), Delivery.new(mcp_url=MCP))
    assert [a.answer for a in result.attempts] == [CONNECTION_ERROR] * 4
    assert result.gave_up and not result.acknowledged


def test_rotation_sends_two_entries_each_matching_one_secret(receiver: ScriptedReceiver) -> None:
    receiver.secrets = [SECRET, OTHER_SECRET]
    delivery = Delivery.new(mcp_url=MCP)
    send_one(config(receiver.url, secrets=(SECRET, OTHER_SECRET)), delivery)
    (seen,) = receiver.seen[delivery.delivery_id]
    assert len(seen.headers["x-relaylink-signature"].split(" ")) == 2
    assert seen.verified_with == (0, 1)


def test_duplicate_rate_is_honoured_with_identical_bodies(receiver: ScriptedReceiver) -> None:
    deliveries = [Delivery.new(mcp_url=MCP) for _ in range(20)]
    summary = send_all(config(receiver.url, duplicate_rate=0.25, seed=3, concurrency=4), deliveries)
    assert summary.all_acknowledged
    counts = {d.delivery_id: len(receiver.seen[d.delivery_id]) for d in deliveries}
    assert sorted(counts.values()) == [1] * 15 + [2] * 5
    for delivery in deliveries:
        assert {s.body for s in receiver.seen[delivery.delivery_id]} == {delivery.body}
        assert all(s.verified_with == (0,) for s in receiver.seen[delivery.delivery_id])


def test_send_command_json_summary_and_exit_status(
    receiver: ScriptedReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["send", "--url", receiver.url, "--secret", SECRET, "--mcp-url", MCP]
    status = main([*argv, "--count", "5", "--duplicate-rate", "0.4", "--seed", "1", "--json"])
    assert status == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["deliveries"] == 5 and summary["acknowledged"] == 5
    assert summary["attempts"] == 7 and summary["extra_attempts"] == 2
    assert summary["answers"] == {"202": 7}
    assert len(receiver.requests()) == 7
    for result in summary["results"]:
        assert result["package_id"].startswith("pkg_")
        assert len(receiver.seen[result["delivery_id"]]) == result["attempts"]


def test_send_command_exits_1_when_a_delivery_is_never_acknowledged(
    receiver: ScriptedReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    receiver.default = 503
    argv = ["send", "--url", receiver.url, "--secret", SECRET, "--mcp-url", MCP]
    # 1e6 compresses the 3-day schedule (11 attempts) to a quarter of a second.
    assert main([*argv, "--time-scale", "1000000"]) == 1
    out = capsys.readouterr().out
    assert "gave up       1" in out
    assert "attempts      11" in out
    assert receiver.url not in out


def test_send_command_user_errors_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RELAYLINK_SIGNING_SECRET", raising=False)
    assert main(["send", "--url", "http://127.0.0.1:9/x", "--mcp-url", MCP]) == 2
    assert "--secret is required" in capsys.readouterr().err
    assert main(["send", "--url", "ftp://x", "--secret", SECRET, "--mcp-url", MCP]) == 2
    bad = main(["send", "--url", "http://127.0.0.1:9/x", "--secret", "nope", "--mcp-url", MCP])
    assert bad == 2
    assert "nope" not in capsys.readouterr().err.split(":", 1)[1]


def test_send_command_takes_its_targets_from_a_state_file_and_shows_progress(
    receiver: ScriptedReceiver, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = LocalState(
        webhook_url=receiver.url,
        mcp_url=MCP,
        effects_url="http://127.0.0.1:9/effects",
        aws_endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        signing_secrets=[SECRET],
        mcp_token="",
        resources=Resources(*([""] * 7)),
    )
    state.write(tmp_path / "state.json")
    status = main(["send", "--local", str(tmp_path / "state.json"), "--count", "3", "--progress"])
    assert status == 0
    captured = capsys.readouterr()
    assert "[" + "#" * 30 + "] 3/3 done, 3 acknowledged, 3 attempts" in captured.err
    assert "acknowledged  3" in captured.out
    assert receiver.url not in captured.out + captured.err
    bodies = [json.loads(s.body) for s in receiver.requests()]
    assert len(bodies) == 3 and {b["mcp_url"] for b in bodies} == {MCP}
    assert all(s.verified_with == (0,) for s in receiver.requests())
