"""The worker handler against moto, the SDK's MCP server and the notify sink."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from functions.core import env_names, metric_names
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.work_queue import (
    DEAD_LETTER_FAILURE_ATTRIBUTE,
    DEAD_LETTERED_ATTRIBUTE,
)
from functions.core.models import InboxItem, State, WorkItem
from functions.core.retry_policy import retry_delay, retry_schedule
from local.event_sources import sqs_event
from local.mcp_server import RunningServer
from local.notify_sink import NotifySinkServer
from local.testkit.moto_world import (
    BUCKET,
    MAX_ATTEMPTS,
    REGION,
    RETRY_HORIZON_SECONDS,
    TABLE,
    MotoWorld,
)
from local.testkit.worker_rig import LEASE_SECONDS, WorkerRig, make_worker
from tests.integration.conftest import BlackHole
from tests.processing_harness import emitted_metrics

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef


@pytest.fixture
def sink() -> Iterator[NotifySinkServer]:
    with NotifySinkServer() as server:
        yield server


@pytest.fixture
def worker(aws: MotoWorld, mcp_server: RunningServer, sink: NotifySinkServer) -> WorkerRig:
    return make_worker(aws, token=mcp_server.token, notify_url=sink.url)


def work(mcp_server: RunningServer, n: int = 0, package: str | None = None) -> WorkItem:
    return WorkItem(
        f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}",
        "package.received",
        package or f"pkg_{n:04d}",
        mcp_server.url,
    )


def submit(aws: MotoWorld, item: WorkItem) -> None:
    aws.accept(item)
    aws.enqueue(item)


@pytest.fixture
def item(aws: MotoWorld, mcp_server: RunningServer) -> WorkItem:
    """One delivery, accepted and on the work queue."""
    delivery = work(mcp_server)
    submit(aws, delivery)
    return delivery


def assert_nothing_secret(aws: MotoWorld, output: str, token: str) -> None:
    stored = json.dumps(aws.items())
    assert token not in stored
    assert token not in output
    assert all(token not in body for body in aws.dead_letters())


def test_worker_completes_and_notifies_once(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    capsys: pytest.CaptureFixture[str],
    item: WorkItem,
) -> None:
    _, response = worker.run_visible()
    assert response == {"batchItemFailures": []}
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.attempts, inbox.completed_at) == (
        State.COMPLETED,
        1,
        aws.clock.value,
    )
    assert sink.sink.counts() == {f"{item.delivery_id}:notify": 1}
    archived = json.loads(
        aws.s3.get_object(Bucket=BUCKET, Key=f"packages/{item.delivery_id}.json")["Body"].read()
    )
    assert archived["package"]["package_id"] == item.package_id
    assert sink.sink.body(f"{item.delivery_id}:notify")["package_id"] == item.package_id
    assert aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    output = capsys.readouterr().out
    assert emitted_metrics(output)[metric_names.METRIC_WORK_COMPLETED] == 1
    assert_nothing_secret(aws, output, mcp_server.token)


def test_worker_acknowledges_a_completed_delivery_without_work(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    item: WorkItem,
) -> None:
    worker.run_visible()
    requests = mcp_server.requests
    aws.enqueue(item)  # a duplicate message
    _, response = worker.run_visible()
    assert response == {"batchItemFailures": []}
    assert mcp_server.requests == requests  # no fetch at all
    assert sink.sink.counts() == {f"{item.delivery_id}:notify": 1}


def redeliver(aws: MotoWorld, worker: WorkerRig, attempt: int) -> list[MessageTypeDef]:
    """Run the one visible message; on a retry, wait out its back-off on the clock."""
    messages, response = worker.run_visible()
    assert len(messages) == 1, attempt
    if response["batchItemFailures"]:
        aws.clock.advance(retry_delay(attempt))
        aws.make_visible(messages)
    return messages


def test_mcp_5xx_is_retried_past_max_attempts_until_the_server_is_back(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    item: WorkItem,
) -> None:
    mcp_server.set_failure_rate(1.0)
    messages, response = worker.run_visible()
    assert response == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.last_error, inbox.attempts) == (
        State.PENDING,
        "mcp_unavailable",
        1,
    )
    # The back-off hid the message (the queue's own visibility timeout would too, but
    # moto's default is 30 s; the back-off of attempt 1 is 15 s: both hide it now).
    assert aws.queue_counts()["visible"] == 0
    aws.clock.advance(retry_delay(1))
    aws.make_visible(messages)
    # Known-transient failures do not use WORKER_MAX_ATTEMPTS: within the world's 120 s
    # horizon the attempts at 15 s and 45 s fail too, the one at 105 s completes.
    for attempt in range(2, MAX_ATTEMPTS + 1):
        redeliver(aws, worker, attempt)
    mcp_server.set_failure_rate(0.0)
    redeliver(aws, worker, MAX_ATTEMPTS + 1)
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.attempts, inbox.transient_failures) == (
        State.COMPLETED,
        MAX_ATTEMPTS + 1,
        MAX_ATTEMPTS,
    )
    assert sink.sink.counts() == {f"{item.delivery_id}:notify": 1}
    assert aws.dead_letters() == []


def test_mcp_timeout_is_transient(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    item: WorkItem,
) -> None:
    mcp_server.set_latency_ms(3000)  # over MCP_TIMEOUT_SECONDS=2
    worker.run_visible()
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.last_error) == (State.PENDING, "mcp_timeout")
    assert sink.sink.counts() == {}


def test_wrong_token_is_retried_and_counted(
    aws: MotoWorld,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wrong = "not-the-token-0000"
    worker = make_worker(aws, token=wrong, notify_url=sink.url)
    item = work(mcp_server)
    submit(aws, item)
    messages, response = worker.run_visible()
    assert response["batchItemFailures"] == [{"itemIdentifier": messages[0]["MessageId"]}]
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.last_error) == (State.PENDING, "mcp_auth_failed")
    output = capsys.readouterr().out
    assert emitted_metrics(output)[metric_names.METRIC_MCP_AUTH_FAILURES] == 1
    assert_nothing_secret(aws, output, wrong)
    assert_nothing_secret(aws, output, mcp_server.token)


@pytest.mark.parametrize(
    ("package", "code"),
    [("pkg_missing_1", "package_not_found"), ("pkg_oversized_1", "mcp_result_too_large")],
)
def test_permanent_mcp_failures_fail_at_once(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    package: str,
    code: str,
) -> None:
    item = work(mcp_server, package=package)
    submit(aws, item)
    _, response = worker.run_visible()
    assert response == {"batchItemFailures": []}  # acknowledged: no retry
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.last_error, inbox.attempts) == (State.FAILED, code, 1)
    assert aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    assert sink.sink.counts() == {}


def test_host_not_on_the_allowlist_is_never_contacted(aws: MotoWorld, worker: WorkerRig) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        # Loopback, but by a name that is not on the allowlist ("127.0.0.1" is).
        item = WorkItem(
            "6f1c2a9e-3b7d-4c1e-9a52-000000000077",
            "package.received",
            "pkg_0077",
            f"http://localhost:{port}/mcp",
        )
        submit(aws, item)
        _, response = worker.run_visible()
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody ever connected
    assert response == {"batchItemFailures": []}
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.last_error) == (State.FAILED, "mcp_host_not_allowed")


def test_leased_delivery_is_deferred_without_burning_an_attempt(
    aws: MotoWorld, worker: WorkerRig, item: WorkItem
) -> None:
    worker.deps.processor.claims.claim(
        item.delivery_id, owner="other", now=aws.clock.value, lease_seconds=LEASE_SECONDS
    )
    _, response = worker.run_visible()
    assert response == {"batchItemFailures": []}
    assert aws.inbox(item.delivery_id).attempts == 1  # the other worker's attempt only
    # The original was acknowledged; a fresh copy (receive count 0) waits out the lease.
    assert aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 1}


def test_dead_letter_at_the_retry_horizon(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    capsys: pytest.CaptureFixture[str],
    item: WorkItem,
) -> None:
    mcp_server.set_failure_rate(1.0)
    schedule = retry_schedule(RETRY_HORIZON_SECONDS)
    assert len(schedule) > MAX_ATTEMPTS
    for attempt in range(1, len(schedule) + 1):
        messages = redeliver(aws, worker, attempt)
    # The message was received more often than WORKER_MAX_ATTEMPTS, yet the worker, not
    # the queue's redrive, made the decision.
    assert int(messages[0]["Attributes"]["ApproximateReceiveCount"]) == len(schedule)
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.last_error, inbox.attempts) == (
        State.FAILED,
        "mcp_unavailable",
        len(schedule),
    )
    assert aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    assert aws.dead_letters() == [item.to_json()]
    output = capsys.readouterr().out
    assert emitted_metrics(output)[metric_names.METRIC_WORK_DEAD_LETTERED] == 1
    assert_nothing_secret(aws, output, mcp_server.token)
    assert sink.sink.counts() == {}


def test_two_workers_racing_on_one_delivery_apply_one_effect(
    aws: MotoWorld, mcp_server: RunningServer, sink: NotifySinkServer
) -> None:
    workers = [make_worker(aws, token=mcp_server.token, notify_url=sink.url) for _ in range(2)]
    item = work(mcp_server)
    aws.accept(item)
    aws.enqueue(item)
    aws.enqueue(item)  # the relay sent it twice
    messages = aws.receive()
    assert len(messages) == 2
    mcp_server.set_latency_ms(500)  # the first worker is inside its fetch for a while
    responses: list[dict[str, Any]] = []
    first = threading.Thread(target=lambda: responses.append(workers[0].run([messages[0]])))
    first.start()
    # The second message arrives while the first worker holds the claim. (Claims at
    # the very same instant are DynamoDB's conditional-write atomicity, which moto
    # does not promise across threads; the unit contract covers their outcome.)
    deadline = time.monotonic() + 10
    while aws.inbox(item.delivery_id).state is not State.PROCESSING:
        assert time.monotonic() < deadline, "the first worker never claimed"
    second = workers[1].run([messages[1]])
    first.join()
    assert second == {"batchItemFailures": []}
    assert responses == [{"batchItemFailures": []}]
    assert sink.sink.counts() == {f"{item.delivery_id}:notify": 1}
    inbox = aws.inbox(item.delivery_id)
    assert (inbox.state, inbox.attempts) == (State.COMPLETED, 1)
    # The loser left a fresh copy waiting out the lease; it will find the delivery done.
    assert aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 1}


def test_one_batch_of_ten_shares_one_mcp_session(
    aws: MotoWorld, worker: WorkerRig, mcp_server: RunningServer, sink: NotifySinkServer
) -> None:
    def batch(items: list[WorkItem]) -> tuple[int, int]:
        for item in items:
            submit(aws, item)
        messages = aws.receive()
        assert len(messages) == len(items)
        requests, calls = mcp_server.requests, mcp_server.controls.tool_calls
        assert worker.run(messages) == {"batchItemFailures": []}
        return mcp_server.requests - requests, mcp_server.controls.tool_calls - calls

    single_requests, single_calls = batch([work(mcp_server, 100)])
    requests, calls = batch([work(mcp_server, n) for n in range(10)])
    print(f"MCP HTTP requests: batch of 1: {single_requests}, batch of 10: {requests}")
    assert (single_calls, calls) == (1, 10)
    # The session's own cost (handshake) is paid once per batch, whatever its size.
    assert requests - calls == single_requests - single_calls
    assert requests - calls <= 3
    assert sum(sink.sink.counts().values()) == 11


@dataclass
class RemainingTime:
    """The part of Lambda's context the worker reads."""

    remaining_ms: int

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def invoke(
    worker: WorkerRig, messages: Sequence[MessageTypeDef], remaining_ms: int
) -> dict[str, Any]:
    """Through ``lambda_handler``, with ``remaining_ms`` left in the invocation."""
    from functions.worker import handler  # noqa: PLC0415 (imports mcp: only when used)

    handler.container_deps.set(worker.deps)
    try:
        response: dict[str, Any] = handler.lambda_handler(
            sqs_event(messages, worker.world.queue_arn, REGION), RemainingTime(remaining_ms)
        )
    finally:
        handler.container_deps.reset()
    return response


def test_a_server_that_never_answers_costs_one_wait_and_no_unstarted_attempt(
    aws: MotoWorld, mcp_server: RunningServer, sink: NotifySinkServer, black_hole: BlackHole
) -> None:
    # MCP timeout 2 s (connect 2, read 2): a message needs at most 12 s of fetch plus
    # the 1 s workflow allowance; 20 s left, less the 5 s margin, leaves 15 s.
    worker = make_worker(
        aws,
        token=mcp_server.token,
        notify_url=sink.url,
        environment={env_names.ENV_WORKFLOW_SECONDS: "1"},
    )
    items = [
        WorkItem(
            f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}", "package.received", f"pkg_{n}", black_hole.url
        )
        for n in range(10)
    ]
    for item in items:
        submit(aws, item)
    messages = aws.receive()
    assert len(messages) == 10
    started = time.monotonic()
    response = invoke(worker, messages, remaining_ms=20_000)
    elapsed = time.monotonic() - started
    print(f"black-hole batch of 10: {elapsed:.2f} s")
    assert elapsed < 15  # before the deadline, let alone the invocation's end
    inboxes = [aws.inbox(item.delivery_id) for item in items]
    attempted = [i for i in inboxes if i.attempts]
    assert [(i.state, i.attempts, i.last_error) for i in attempted] == [
        (State.PENDING, 1, "mcp_timeout")
    ]
    # The probe comes back after its back-off; the other nine were replaced by fresh
    # copies (receive count 0), delayed by the first retry's delay.
    (probe,) = [m for m in messages if attempted[0].delivery_id in m["Body"]]
    assert response["batchItemFailures"] == [{"itemIdentifier": probe["MessageId"]}]
    assert aws.queue_counts()["delayed"] == 9
    assert all((i.state, i.attempts) == (State.PENDING, 0) for i in inboxes if not i.attempts)
    assert sink.sink.counts() == {}


def test_messages_of_a_batch_run_concurrently_over_one_session(
    aws: MotoWorld, mcp_server: RunningServer, sink: NotifySinkServer
) -> None:
    size = 10
    together = threading.Barrier(size, timeout=20)
    fetchers: list[Any] = []

    class MeetingWorkflow:
        """The default workflow, after every message of the batch has reached it."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def run(self, work: WorkItem, package: Any, effects: Any) -> None:
            together.wait()
            self._inner.run(work, package, effects)

    def meeting(deps: Any) -> Any:
        packages = deps.packages

        def counted(deadline: Any) -> Any:
            fetchers.append(packages(deadline))
            return fetchers[-1]

        processor = dataclasses.replace(
            deps.processor, workflow=MeetingWorkflow(deps.processor.workflow)
        )
        return dataclasses.replace(deps, processor=processor, packages=counted)

    worker = make_worker(aws, token=mcp_server.token, notify_url=sink.url, wrap=meeting)
    items = [work(mcp_server, n) for n in range(size)]
    for item in items:
        submit(aws, item)
    messages = aws.receive()
    assert invoke(worker, messages, remaining_ms=180_000) == {"batchItemFailures": []}
    assert all(aws.inbox(item.delivery_id).state is State.COMPLETED for item in items)
    assert sink.sink.counts() == {f"{item.delivery_id}:notify": 1 for item in items}
    assert [fetcher.sessions_opened for fetcher in fetchers] == [1]
    assert mcp_server.controls.tool_calls == size


def redrive_dead_letters(aws: MotoWorld) -> int:
    """What SQS's dead-letter-queue redrive (StartMessageMoveTask) does, which moto lacks:
    each dead letter moves back to its source queue with its body and message attributes."""
    moved = 0
    for letter in aws.receive(queue_url=aws.dlq_url):
        aws.sqs.send_message(
            QueueUrl=aws.queue_url,
            MessageBody=letter["Body"],
            MessageAttributes=letter.get("MessageAttributes", {}),
        )
        aws.sqs.delete_message(QueueUrl=aws.dlq_url, ReceiptHandle=letter["ReceiptHandle"])
        moved += 1
    return moved


def dead_letter_at_the_horizon(aws: MotoWorld, worker: WorkerRig, server: RunningServer) -> None:
    """The MCP server fails every attempt until the worker dead-letters the delivery."""
    server.set_failure_rate(1.0)
    for attempt in range(1, len(retry_schedule(RETRY_HORIZON_SECONDS)) + 1):
        redeliver(aws, worker, attempt)


def redrive_and_run(
    aws: MotoWorld, worker: WorkerRig, server: RunningServer, item: WorkItem
) -> InboxItem:
    """The server is back; the console redrives the dead letter and a worker runs it."""
    server.set_failure_rate(0.0)
    assert redrive_dead_letters(aws) == 1
    _, response = worker.run_visible()
    assert response == {"batchItemFailures": []}
    return aws.inbox(item.delivery_id)


def test_a_console_redrive_reopens_the_delivery_and_completes_it(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    item: WorkItem,
) -> None:
    dead_letter_at_the_horizon(aws, worker, mcp_server)
    assert aws.inbox(item.delivery_id).state is State.FAILED
    failure = aws.raw_inbox(item.delivery_id)[dynamodb_items.FAILED_BY]["S"]
    letters = aws.receive(queue_url=aws.dlq_url)
    assert [m["MessageAttributes"] for m in letters] == [
        {
            DEAD_LETTERED_ATTRIBUTE: {"StringValue": "mcp_unavailable", "DataType": "String"},
            DEAD_LETTER_FAILURE_ATTRIBUTE: {"StringValue": failure, "DataType": "String"},
        }
    ]
    for letter in letters:  # back to visible for the redrive
        aws.sqs.change_message_visibility(
            QueueUrl=aws.dlq_url, ReceiptHandle=letter["ReceiptHandle"], VisibilityTimeout=0
        )

    inbox = redrive_and_run(aws, worker, mcp_server, item)
    assert (inbox.state, inbox.attempts) == (State.COMPLETED, 1)
    assert sink.sink.counts() == {f"{item.delivery_id}:notify": 1}
    assert aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}


def test_a_console_redrive_of_an_old_letter_leaves_a_later_failure_alone(
    aws: MotoWorld,
    worker: WorkerRig,
    mcp_server: RunningServer,
    sink: NotifySinkServer,
    item: WorkItem,
) -> None:
    dead_letter_at_the_horizon(aws, worker, mcp_server)
    claims = DynamoDbClaims(client=aws.dynamodb, table_name=TABLE)
    # An operator requeued it; it failed again, for another reason (an effect in doubt,
    # which the operator then settled by hand and left failed).
    assert claims.reopen(item.delivery_id, now=aws.clock.now())
    attempt = claims.claim(
        item.delivery_id, owner="later-attempt", now=aws.clock.now(), lease_seconds=60
    )
    assert attempt.claim is not None
    claims.fail(attempt.claim, now=aws.clock.now(), error_code="uncertain_effect")

    inbox = redrive_and_run(aws, worker, mcp_server, item)  # the first failure's letter
    assert (inbox.state, inbox.last_error) == (State.FAILED, "uncertain_effect")
    assert sink.sink.counts() == {}
    assert aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
