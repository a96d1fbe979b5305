"""The HTTP effects (the alert POST, the notify POST) against a loopback endpoint.

One test per row of the table in :mod:`functions.core.adapters.http_effect`: what
each answer proves, for both adapters; then the ledger over them, where an answer
after the endpoint acted must never lead to a second POST (unless it is keyed).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest

from functions.core.adapters.http_effect import MAX_ANSWER_BYTES
from functions.core.adapters.notifier_http import HttpNotifier
from functions.core.effects import EffectLedger
from functions.core.errors import NotApplied, PermanentError, TransientError, UncertainEffect
from functions.core.models import WorkItem
from functions.core.ports.effects import EffectStatus
from functions.workflows.adapters.alert_http import HttpAlerts
from functions.workflows.notify import NOTIFY_EFFECT, NotifyWorkflow
from local.loopback_http import LoopbackHTTPServer
from local.notify_sink import NotifySinkServer
from local.testkit.clock import FakeClock
from tests.fakes import FakeEffects
from tests.integration.conftest import BlackHole
from tests.integration.test_agent_adapters import ALERT, DELIVERY, KEY, PACKAGE, refused_endpoint
from tests.polling import poll

ALERT_KEY = KEY
WORK = WorkItem(
    delivery_id=DELIVERY,
    event="package.received",
    package_id=PACKAGE.package_id,
    mcp_url="https://mcp.example.com/mcp",
)
# The statuses of each row of the table.
NOT_PROCESSED = [429, 425]
REFUSED = [400, 401, 403, 404, 405, 410, 413, 422]
UNKNOWN = [408, 409, 500, 502, 503, 504]
REDIRECTS = [301, 302, 303, 307, 308]


def alerts(url: str, **kwargs: Any) -> HttpAlerts:
    return HttpAlerts(url=url, timeout_seconds=2, allow_insecure_loopback=True, **kwargs)


def notifier(url: str) -> HttpNotifier:
    return HttpNotifier(url=url, timeout_seconds=2, allow_insecure_loopback=True)


def post_alert(url: str) -> None:
    alerts(url).send(ALERT, idempotency_key=ALERT_KEY)


def post_notify(url: str) -> None:
    notifier(url).notify({"delivery_id": DELIVERY}, idempotency_key=f"{DELIVERY}:notify")


POSTS: list[tuple[str, Callable[[str], None]]] = [("alert", post_alert), ("notify", post_notify)]


@pytest.fixture(scope="module")
def _sink_module() -> Iterator[NotifySinkServer]:
    with NotifySinkServer() as server:
        yield server


@pytest.fixture
def sink(_sink_module: NotifySinkServer) -> NotifySinkServer:
    """The module's loopback endpoint, forgetting what earlier tests sent."""
    _sink_module.sink.reset()
    return _sink_module


def answered(
    sink: NotifySinkServer, status: int, post: Callable[[str], None], *, applied: bool = False
) -> Exception:
    """What ``post`` raises when the endpoint answers ``status`` (after acting, if ``applied``)."""
    sink.sink.fail_next(1, status, applied=applied)
    with pytest.raises(Exception) as raised:
        post(sink.url)
    assert sum(sink.sink.posts.values()) == 1  # one request, never a second by itself
    return raised.value


# --- each row of the table, for each adapter ---------------------------------------------


@pytest.mark.parametrize(("effect", "post"), POSTS)
def test_http_effect_2xx_is_applied(
    sink: NotifySinkServer, effect: str, post: Callable[[str], None]
) -> None:
    post(sink.url)
    assert sum(sink.sink.counts().values()) == 1


@pytest.mark.parametrize("status", NOT_PROCESSED)
@pytest.mark.parametrize(("effect", "post"), POSTS)
def test_http_effect_not_processed_answer_is_not_applied(
    sink: NotifySinkServer, effect: str, post: Callable[[str], None], status: int
) -> None:
    error = answered(sink, status, post)
    assert isinstance(error, NotApplied)
    assert error.code == f"{effect}_throttled"


@pytest.mark.parametrize("status", REFUSED)
@pytest.mark.parametrize(("effect", "post"), POSTS)
def test_http_effect_definite_refusal_is_rejected_not_retried(
    sink: NotifySinkServer, effect: str, post: Callable[[str], None], status: int
) -> None:
    error = answered(sink, status, post)
    assert isinstance(error, PermanentError)  # Rejected: the ledger clears the intent
    assert type(error).__name__ == "Rejected"
    assert error.code == f"{effect}_rejected"


@pytest.mark.parametrize("status", UNKNOWN)
@pytest.mark.parametrize(("effect", "post"), POSTS)
def test_http_effect_5xx_408_409_are_unknown(
    sink: NotifySinkServer, effect: str, post: Callable[[str], None], status: int
) -> None:
    error = answered(sink, status, post, applied=True)
    assert isinstance(error, TransientError)
    assert not isinstance(error, NotApplied)
    assert error.code == f"{effect}_unconfirmed"


@pytest.mark.parametrize("status", REDIRECTS)
@pytest.mark.parametrize(("effect", "post"), POSTS)
def test_http_effect_redirect_is_not_followed_and_stays_unknown(
    sink: NotifySinkServer, effect: str, post: Callable[[str], None], status: int
) -> None:
    error = answered(sink, status, post, applied=True)
    assert type(error) is PermanentError  # not Rejected: a 303 may follow the action
    assert error.code == f"{effect}_redirected"


@pytest.mark.parametrize(("effect", "post"), POSTS)
def test_http_effect_refused_connection_is_not_applied(
    effect: str, post: Callable[[str], None]
) -> None:
    with pytest.raises(NotApplied) as raised:
        post(refused_endpoint())
    assert raised.value.code == f"{effect}_unavailable"


def test_http_effect_silence_after_sending_is_unknown(black_hole: BlackHole) -> None:
    silent_alerts = HttpAlerts(
        url=black_hole.url, timeout_seconds=0.5, allow_insecure_loopback=True
    )
    silent_notifier = HttpNotifier(
        url=black_hole.url, timeout_seconds=0.5, allow_insecure_loopback=True
    )
    with pytest.raises(TransientError, match="alert_unconfirmed") as raised:
        silent_alerts.send(ALERT, idempotency_key=ALERT_KEY)
    assert not isinstance(raised.value, NotApplied)
    with pytest.raises(TransientError, match="notify_unconfirmed") as raised:
        silent_notifier.notify({}, idempotency_key="k")
    assert not isinstance(raised.value, NotApplied)


class LongAnswer:
    """What a loopback endpoint answering 200 and a long body managed to send."""

    CHUNK: ClassVar[int] = 64 * 1024

    def __init__(self) -> None:
        self.sent = 0
        self.done = threading.Event()
        self.url = ""


@contextlib.contextmanager
def long_answer(*, length: int, cut_after: int | None = None) -> Iterator[LongAnswer]:
    """An endpoint that answers 200 with a body of ``length`` bytes, counting the bytes
    it sent before the caller hung up; with ``cut_after``, it sends that many and closes."""
    answer = LongAnswer()

    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            # A small send buffer: what the kernel holds for the caller stays small.
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, answer.CHUNK)
            super().setup()

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            limit = length if cut_after is None else cut_after
            try:
                while answer.sent < limit:
                    chunk = min(answer.CHUNK, limit - answer.sent)
                    self.wfile.write(b"x" * chunk)
                    answer.sent += chunk
            except ConnectionError:
                pass  # the caller hung up: what we count is what it could have read
            finally:
                self.close_connection = True
                answer.done.set()

    server = LoopbackHTTPServer(("127.0.0.1", 0), Handler)
    answer.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield answer
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(("effect", "post"), POSTS)
def test_http_effect_reads_a_huge_answer_only_up_to_its_bound(
    effect: str, post: Callable[[str], None]
) -> None:
    huge = 256 * 1024 * 1024
    with long_answer(length=huge) as endpoint:
        post(endpoint.url)  # a 2xx is applied, however long its body
        poll(endpoint.done.is_set, bool, deadline_seconds=10)
    assert endpoint.done.is_set()
    # The bound and what the kernels' socket buffers held, not the 256 MiB answer.
    assert endpoint.sent < MAX_ANSWER_BYTES + 16 * 1024 * 1024


@pytest.mark.parametrize(("effect", "post"), POSTS)
def test_http_effect_2xx_whose_body_is_cut_off_is_applied(
    effect: str, post: Callable[[str], None]
) -> None:
    # The status says what happened; a body that ends early is only lost diagnostics.
    with long_answer(length=10_000, cut_after=100) as endpoint:
        post(endpoint.url)


def test_alert_request_is_built_in_one_method() -> None:
    request = alerts("http://127.0.0.1:9/alerts").request(ALERT, idempotency_key=ALERT_KEY)
    assert request.get_method() == "POST"
    assert request.get_header("Idempotency-key") == ALERT_KEY
    assert request.get_header("Content-type") == "application/json"
    assert isinstance(request.data, bytes)
    assert json.loads(request.data) == ALERT.payload()


# --- through the ledger: an answer after the endpoint acted --------------------------------


def status_of(store: FakeEffects, name: str) -> EffectStatus | None:
    record = store.get(DELIVERY, name)
    return None if record is None else record.status


def alert_ledger(store: FakeEffects) -> EffectLedger:
    return EffectLedger(DELIVERY, store=store, clock=FakeClock(), expires_at=0)


@pytest.mark.parametrize("status", [502, 504])
def test_http_alert_answered_502_or_504_after_acting_is_not_sent_again(
    sink: NotifySinkServer, status: int
) -> None:
    store = FakeEffects()
    channel = alerts(sink.url)
    sink.sink.fail_next(1, status, applied=True)  # a gateway gave up after it acted

    def send(key: str) -> None:
        channel.send(ALERT, idempotency_key=key)

    with pytest.raises(TransientError):
        alert_ledger(store).run("alert.http", send, key=ALERT_KEY)
    with pytest.raises(UncertainEffect):
        alert_ledger(store).run("alert.http", send, key=ALERT_KEY)
    assert sink.sink.posts == {ALERT_KEY: 1}
    assert sink.sink.counts() == {ALERT_KEY: 1}
    assert status_of(store, "alert.http") is EffectStatus.INTENT  # in doubt


@pytest.mark.parametrize("status", [502, 504])
def test_keyed_http_alert_after_a_gateway_error_is_posted_again_and_dropped(
    sink: NotifySinkServer, status: int
) -> None:
    store = FakeEffects()
    sink.sink.reset(deduplicates=True)
    channel = alerts(sink.url, deduplicates=True)
    sink.sink.fail_next(1, status, applied=True)

    def send(key: str) -> None:
        channel.send(ALERT, idempotency_key=key)

    with pytest.raises(TransientError):
        alert_ledger(store).run("alert.http", send, key=ALERT_KEY, mode=channel.mode)
    assert alert_ledger(store).run("alert.http", send, key=ALERT_KEY, mode=channel.mode)
    assert sink.sink.posts == {ALERT_KEY: 2}
    assert sink.sink.counts() == {ALERT_KEY: 1}
    assert status_of(store, "alert.http") is EffectStatus.DONE


class FakeArchive:
    def put(self, key: str, body: bytes, *, content_type: str = "application/json") -> None:
        return None


def notify_once(store: FakeEffects, url: str, **kwargs: Any) -> None:
    workflow = NotifyWorkflow(archive=FakeArchive(), notifier=notifier(url), **kwargs)
    workflow.run(WORK, PACKAGE, alert_ledger(store))


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_notify_4xx_fails_the_delivery_without_leaving_it_in_doubt(
    sink: NotifySinkServer, status: int
) -> None:
    store = FakeEffects()
    sink.sink.fail_next(1, status)
    with pytest.raises(PermanentError, match="notify_rejected"):
        notify_once(store, sink.url)
    assert status_of(store, NOTIFY_EFFECT) is EffectStatus.NOT_APPLIED
    assert list(store.uncertain(intended_before=10**12, page_size=10)) == []
    notify_once(store, sink.url)  # fixed and requeued: applied as new
    assert sink.sink.counts() == {f"{DELIVERY}:notify": 1}


@pytest.mark.parametrize("deduplicates", [False, True])
def test_notify_unknown_outcome_is_checked_by_default_and_keyed_when_set(
    sink: NotifySinkServer, deduplicates: bool
) -> None:
    store = FakeEffects()
    sink.sink.reset(deduplicates=deduplicates)
    sink.sink.fail_next(1, 502, applied=True)
    with pytest.raises(TransientError, match="notify_unconfirmed"):
        notify_once(store, sink.url, deduplicates=deduplicates)
    notify_once(store, sink.url, deduplicates=deduplicates)
    key = f"{DELIVERY}:notify"
    assert sink.sink.counts() == {key: 1}
    # checked: the retry looked it up; keyed: it posted again and was dropped.
    assert sink.sink.posts == {key: 2 if deduplicates else 1}
    assert status_of(store, NOTIFY_EFFECT) is EffectStatus.DONE
