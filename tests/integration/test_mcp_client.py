"""McpPackageFetcher against the SDK's real MCP server on 127.0.0.1 (Streamable HTTP)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, TypeVar

import anyio
import pytest

from functions.core import errors
from functions.core.adapters.mcp_fetcher import McpPackageFetcher
from functions.core.deadline import Deadline
from functions.core.host_policy import HostPolicy
from functions.core.package import Package
from local.loopback_http import LoopbackHTTPServer
from local.mcp_server import RunningServer, demo_package
from tests.integration.conftest import BlackHole

LOOPBACK_POLICY = HostPolicy(("127.0.0.1",), allow_insecure_loopback=True)
T = TypeVar("T")


class CountingToken:
    """A token source that counts how often it was asked."""

    def __init__(self, value: str) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return self.value


def _quiet_fetcher(**overrides: Any) -> McpPackageFetcher:
    """A fetcher for servers that never get as far as checking a token."""
    options: dict[str, Any] = {
        "token": CountingToken("t"),
        "policy": LOOPBACK_POLICY,
        "connect_timeout": 1.0,
        "read_timeout": 1.0,
        "max_result_bytes": 1024,
    }
    options.update(overrides)
    return McpPackageFetcher(**options)


def _fetcher(server: RunningServer, **overrides: Any) -> McpPackageFetcher:
    options: dict[str, Any] = {
        "token": CountingToken(server.token),
        "policy": LOOPBACK_POLICY,
        "connect_timeout": 2.0,
        "read_timeout": 5.0,
        "max_result_bytes": 256 * 1024,
    }
    options.update(overrides)
    return McpPackageFetcher(**options)


def _run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def _fetch_one(fetcher: McpPackageFetcher, url: str, package_id: str) -> Package:
    async def go() -> Package:
        async with fetcher:
            return await fetcher.get_package(url, package_id)

    return _run(go)


def _error_of(fetcher: McpPackageFetcher, url: str, package_id: str) -> errors.ProcessingError:
    with pytest.raises(errors.ProcessingError) as caught:
        _fetch_one(fetcher, url, package_id)
    return caught.value


@pytest.fixture
def silent_listener() -> Iterator[socket.socket]:
    """A listening socket on loopback that records nothing but whether anyone connected."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    yield listener
    listener.close()


def _was_contacted(listener: socket.socket) -> bool:
    try:
        connection, _ = listener.accept()
    except BlockingIOError:
        return False
    connection.close()
    return True


def test_fetcher_returns_the_structured_package(mcp_server: RunningServer) -> None:
    package = _fetch_one(_fetcher(mcp_server), mcp_server.url, "pkg_01JE7Q9V5K3M8N2P4R6T")
    assert package == Package.from_mapping(demo_package("pkg_01JE7Q9V5K3M8N2P4R6T"))
    assert mcp_server.controls.tool_calls == 1


def test_fetcher_falls_back_to_json_text_content(mcp_server: RunningServer) -> None:
    package = _fetch_one(_fetcher(mcp_server), mcp_server.url, "pkg_textonly_7")
    assert package == Package.from_mapping(demo_package("pkg_textonly_7"))


def test_fetcher_wrong_token_is_an_auth_error(mcp_server: RunningServer) -> None:
    wrong = "wrong-token-value"
    error = _error_of(_fetcher(mcp_server, token=CountingToken(wrong)), mcp_server.url, "pkg_1")
    assert isinstance(error, errors.McpAuthError)
    assert isinstance(error, errors.TransientError)  # retried: an operator fixes the token
    assert error.code == "mcp_auth_failed"
    assert wrong not in str(error.args)
    assert mcp_server.controls.unauthorized >= 1
    assert mcp_server.controls.tool_calls == 0


def test_fetcher_server_5xx_is_transient_and_the_next_call_opens_a_fresh_session(
    mcp_server: RunningServer,
) -> None:
    fetcher = _fetcher(mcp_server)

    async def go() -> tuple[errors.ProcessingError, Package]:
        async with fetcher:
            mcp_server.set_failure_rate(1.0)
            with pytest.raises(errors.TransientError) as caught:
                await fetcher.get_package(mcp_server.url, "pkg_1")
            mcp_server.set_failure_rate(0.0)
            return caught.value, await fetcher.get_package(mcp_server.url, "pkg_2")

    error, package = _run(go)
    assert error.code == "mcp_unavailable"
    assert package.package_id == "pkg_2"
    assert mcp_server.controls.failures_injected >= 1
    assert fetcher.sessions_opened == 2


def test_fetcher_5xx_mid_batch_drops_the_session(mcp_server: RunningServer) -> None:
    fetcher = _fetcher(mcp_server)

    async def go() -> list[str]:
        outcomes: list[str] = []
        async with fetcher:
            for index in range(3):
                mcp_server.set_failure_rate(1.0 if index == 1 else 0.0)
                try:
                    await fetcher.get_package(mcp_server.url, f"pkg_{index}")
                    outcomes.append("ok")
                except errors.TransientError as exc:
                    outcomes.append(exc.code)
        return outcomes

    assert _run(go) == ["ok", "mcp_unavailable", "ok"]
    assert fetcher.sessions_opened == 2


def test_fetcher_times_out_on_a_slow_server(mcp_server: RunningServer) -> None:
    mcp_server.set_latency_ms(3000)
    fetcher = _fetcher(mcp_server, read_timeout=0.3)
    started = time.monotonic()
    error = _error_of(fetcher, mcp_server.url, "pkg_1")
    elapsed = time.monotonic() - started
    assert isinstance(error, errors.TransientError)
    assert error.code == "mcp_timeout"
    assert elapsed < 2.0  # bounded by our timeout, not by the server's latency


def test_fetcher_unknown_package_is_not_found(mcp_server: RunningServer) -> None:
    error = _error_of(_fetcher(mcp_server), mcp_server.url, "pkg_missing_42")
    assert isinstance(error, errors.PackageNotFound)
    assert error.code == "package_not_found"


def test_fetcher_other_tool_error_is_transient_and_keeps_the_session(
    mcp_server: RunningServer,
) -> None:
    fetcher = _fetcher(mcp_server)

    async def go() -> tuple[str, Package]:
        async with fetcher:
            with pytest.raises(errors.TransientError) as caught:
                await fetcher.get_package(mcp_server.url, "pkg_toolfail_1")
            return caught.value.code, await fetcher.get_package(mcp_server.url, "pkg_3")

    code, package = _run(go)
    assert code == "mcp_tool_error"
    assert package.package_id == "pkg_3"
    assert fetcher.sessions_opened == 1


def test_fetcher_malformed_result_is_invalid(mcp_server: RunningServer) -> None:
    error = _error_of(_fetcher(mcp_server), mcp_server.url, "pkg_malformed_1")
    assert isinstance(error, errors.InvalidPackage)


def test_fetcher_oversized_result_is_invalid(mcp_server: RunningServer) -> None:
    error = _error_of(_fetcher(mcp_server), mcp_server.url, "pkg_oversized_1")
    assert isinstance(error, errors.InvalidPackage)
    assert error.code == "mcp_result_too_large"


def test_fetcher_size_cap_counts_the_real_response(mcp_server: RunningServer) -> None:
    # An ordinary package is a few hundred bytes: a cap below that refuses it.
    error = _error_of(_fetcher(mcp_server, max_result_bytes=200), mcp_server.url, "pkg_1")
    assert isinstance(error, errors.InvalidPackage)
    assert error.code == "mcp_result_too_large"


@pytest.mark.parametrize(
    "url_template",
    [
        "http://127.0.0.1:{port}/mcp",  # loopback, but not on this allowlist
        "https://127.0.0.1:{port}/mcp",
        "http://localhost:{port}/mcp",
        "https://mcp.relaylink.example@127.0.0.1:{port}/mcp",
    ],
)
def test_fetcher_never_contacts_a_host_off_the_allowlist(
    silent_listener: socket.socket, url_template: str
) -> None:
    port = silent_listener.getsockname()[1]
    token = CountingToken("token-that-must-stay-home")
    fetcher = McpPackageFetcher(
        token=token,
        policy=HostPolicy(("*.relaylink.example",), allow_insecure_loopback=True),
        connect_timeout=1.0,
        read_timeout=1.0,
        max_result_bytes=1024,
    )
    with pytest.raises(errors.HostNotAllowed):
        _fetch_one(fetcher, url_template.format(port=port), "pkg_1")
    assert not _was_contacted(silent_listener)
    assert token.calls == 0
    assert fetcher.http_requests == 0


def test_fetcher_refuses_plain_http_to_loopback_unless_allowed(mcp_server: RunningServer) -> None:
    strict = HostPolicy(("127.0.0.1",), allow_insecure_loopback=False)
    error = _error_of(_fetcher(mcp_server, policy=strict), mcp_server.url, "pkg_1")
    assert isinstance(error, errors.HostNotAllowed)
    assert error.code == "mcp_insecure_not_allowed"
    assert mcp_server.requests == 0


def test_fetcher_connection_refused_is_transient(silent_listener: socket.socket) -> None:
    port = silent_listener.getsockname()[1]
    silent_listener.close()  # nothing listens on the port any more
    fetcher = _quiet_fetcher()
    error = _error_of(fetcher, f"http://127.0.0.1:{port}/mcp", "pkg_1")
    assert isinstance(error, errors.TransientError)
    assert error.code == "mcp_unavailable"


def test_fetcher_malformed_token_sends_nothing(mcp_server: RunningServer) -> None:
    error = _error_of(
        _fetcher(mcp_server, token=CountingToken("two words\r\n")), mcp_server.url, "pkg_1"
    )
    assert isinstance(error, errors.McpTokenUnavailable)
    assert mcp_server.requests == 0


def _batch_requests(server: RunningServer, ids: list[str]) -> tuple[int, int, int]:
    """Fetch ``ids`` in one batch; (requests the server saw, the fetcher's count, sessions)."""
    before = server.requests
    fetcher = _fetcher(server)

    async def go() -> None:
        async with fetcher:
            for package_id in ids:
                assert (await fetcher.get_package(server.url, package_id)).package_id == package_id

    _run(go)
    return server.requests - before, fetcher.http_requests, fetcher.sessions_opened


@pytest.mark.parametrize("legacy_only", [False, True], ids=["stateless-2026", "legacy-handshake"])
def test_fetcher_reuses_one_session_for_a_batch(
    mcp_server: RunningServer, legacy_only: bool
) -> None:
    mcp_server.set_legacy_only(legacy_only)
    ids = [f"pkg_batch_{index}" for index in range(10)]
    server_seen, client_sent, sessions = _batch_requests(mcp_server, ids)
    assert sessions == 1
    assert server_seen == client_sent
    assert mcp_server.controls.tool_calls == 10
    setup = server_seen - len(ids)  # requests that are not tools/call
    if legacy_only:
        # discover probe (refused), initialize, initialized, tools/list, DELETE
        assert setup <= 5
    else:
        assert server_seen <= 13  # target for 10 calls to one server: one session's set-up

    # For comparison: a new session for every message repeats the set-up each time.
    per_message = sum(_batch_requests(mcp_server, [package_id])[0] for package_id in ids)
    assert per_message == len(ids) * (setup + 1)
    assert per_message > server_seen


def test_fetcher_maps_errors_the_same_on_a_legacy_server(mcp_server: RunningServer) -> None:
    mcp_server.set_legacy_only(True)
    assert _fetch_one(_fetcher(mcp_server), mcp_server.url, "pkg_l1").package_id == "pkg_l1"
    assert isinstance(
        _error_of(_fetcher(mcp_server), mcp_server.url, "pkg_missing"), errors.PackageNotFound
    )
    wrong = _fetcher(mcp_server, token=CountingToken("nope"))
    assert isinstance(_error_of(wrong, mcp_server.url, "pkg_1"), errors.McpAuthError)
    mcp_server.set_failure_rate(1.0)
    error = _error_of(_fetcher(mcp_server), mcp_server.url, "pkg_1")
    assert isinstance(error, errors.TransientError)
    assert error.code == "mcp_unavailable"


def _fetch_together(fetcher: McpPackageFetcher, url: str, ids: list[str]) -> dict[str, object]:
    """Fetch ``ids`` concurrently in one block; each id's package or error."""
    outcomes: dict[str, object] = {}

    async def fetch(package_id: str) -> None:
        try:
            outcomes[package_id] = await fetcher.get_package(url, package_id)
        except errors.ProcessingError as exc:
            outcomes[package_id] = exc

    async def go() -> None:
        async with fetcher, anyio.create_task_group() as tasks:
            for package_id in ids:
                tasks.start_soon(fetch, package_id)

    _run(go)
    return outcomes


def test_concurrent_first_calls_share_one_session(mcp_server: RunningServer) -> None:
    fetcher = _fetcher(mcp_server)
    ids = [f"pkg_c{index}" for index in range(4)]
    outcomes = _fetch_together(fetcher, mcp_server.url, ids)
    assert all(isinstance(outcomes[i], Package) for i in ids)
    assert all(getattr(outcomes[i], "package_id", None) == i for i in ids)
    assert fetcher.sessions_opened == 1


def test_calls_on_one_session_run_at_the_same_time(mcp_server: RunningServer) -> None:
    mcp_server.set_latency_ms(1000)
    fetcher = _fetcher(mcp_server)
    started = time.monotonic()
    outcomes = _fetch_together(fetcher, mcp_server.url, [f"pkg_s{index}" for index in range(4)])
    elapsed = time.monotonic() - started
    assert all(isinstance(outcome, Package) for outcome in outcomes.values())
    assert fetcher.sessions_opened == 1
    assert elapsed < 3.0  # one after another: at least 4 s


def test_each_concurrent_call_is_judged_by_its_own_exchange(mcp_server: RunningServer) -> None:
    # The oversized answer is cut by the transport's cap: only its own call may fail.
    fetcher = _fetcher(mcp_server, max_result_bytes=64 * 1024)
    ids = ["pkg_oversized_1", *(f"pkg_fine_{index}" for index in range(5))]
    outcomes = _fetch_together(fetcher, mcp_server.url, ids)
    oversized = outcomes.pop("pkg_oversized_1")
    assert isinstance(oversized, errors.InvalidPackage)
    assert oversized.code == "mcp_result_too_large"
    assert all(isinstance(outcome, Package) for outcome in outcomes.values()), outcomes


def test_an_unreachable_server_is_not_contacted_again(black_hole: BlackHole) -> None:
    fetcher = _quiet_fetcher(connect_timeout=0.5, read_timeout=0.5)

    async def go() -> tuple[list[str], float, bool]:
        codes: list[str] = []
        async with fetcher:
            for index in range(2):
                started = time.monotonic()
                with pytest.raises(errors.TransientError) as caught:
                    await fetcher.get_package(black_hole.url, f"pkg_{index}")
                codes.append(caught.value.code)
            return codes, time.monotonic() - started, fetcher.unreachable(black_hole.url)

    connections_before = black_hole.connections
    codes, second_call_seconds, unreachable = _run(go)
    assert codes == ["mcp_timeout", "mcp_timeout"]
    assert unreachable
    assert second_call_seconds < 0.2  # failed at once
    assert fetcher.sessions_opened == 1
    assert black_hole.connections - connections_before >= 1


def test_the_deadline_bounds_opening_a_session(black_hole: BlackHole) -> None:
    # Opening alone could take 20 s.
    fetcher = _quiet_fetcher(connect_timeout=5.0, read_timeout=5.0, deadline=Deadline.after(0.5))
    started = time.monotonic()
    error = _error_of(fetcher, black_hole.url, "pkg_1")
    assert time.monotonic() - started < 2.0
    assert error.code == "mcp_timeout"


def test_a_server_error_is_not_a_transport_failure(mcp_server: RunningServer) -> None:
    fetcher = _fetcher(mcp_server)
    mcp_server.set_failure_rate(1.0)
    assert _error_of(fetcher, mcp_server.url, "pkg_1").code == "mcp_unavailable"
    assert not fetcher.unreachable(mcp_server.url)  # it answered 503: it is there


def test_fetcher_outside_its_block_refuses(mcp_server: RunningServer) -> None:
    fetcher = _fetcher(mcp_server)

    async def go() -> None:
        await fetcher.get_package(mcp_server.url, "pkg_1")

    with pytest.raises(RuntimeError):
        _run(go)
    assert mcp_server.requests == 0


def test_the_server_counts_the_bytes_clients_send(mcp_server: RunningServer) -> None:
    """The cost model's data transfer out: request lines, headers and bodies."""

    def sent(package_id: str) -> int:
        before = mcp_server.request_bytes
        _fetch_one(_fetcher(mcp_server), mcp_server.url, package_id)
        return mcp_server.request_bytes - before

    short, long = sent("pkg_bytes"), sent("pkg_bytes" + "x" * 100)
    # Only the tools/call body (and at most its Content-Length digits) differs.
    assert 100 <= long - short <= 103
    assert short > mcp_server.controls.tool_calls * len(b"POST / HTTP/1.1\r\n")


class RedirectingServer:
    """A loopback server that answers every request with ``status`` to ``location`` (its
    own URL when None), recording whether each request carried the bearer token."""

    def __init__(self, *, status: int, location: str | None = None) -> None:
        self.bearers: list[bool] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _redirect(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.bearers.append(self.headers.get("Authorization") == f"Bearer {TOKEN}")
                self.send_response(status)
                self.send_header("Location", location or server.url)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET = do_DELETE = _redirect

        self._http = LoopbackHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/mcp"

    @contextlib.contextmanager
    def serving(self) -> Iterator[RedirectingServer]:
        thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            thread.join()


TOKEN = "token-sent-once"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("elsewhere", [False, True], ids=["to-itself", "to-another-host"])
def test_fetcher_follows_no_redirect_and_sends_its_token_once(status: int, elsewhere: bool) -> None:
    location = "http://localhost:9/mcp" if elsewhere else None
    with RedirectingServer(status=status, location=location).serving() as server:
        error = _error_of(_quiet_fetcher(token=CountingToken(TOKEN)), server.url, "pkg_1")
    assert server.bearers == [True]  # one request, with the token; none followed it
    assert isinstance(error, errors.PermanentError)
    assert error.code == "mcp_redirected"
