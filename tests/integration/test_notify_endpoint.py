"""The notify endpoint in a Secrets Manager secret (moto), its POSTs signed for a
Standard Webhooks receiver: the local sink, verifying as the receiver does."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import boto3
import pytest

from functions.core.clock import SystemClock
from functions.core.effects import EffectLedger
from functions.core.errors import NotApplied, PermanentError, TransientError
from functions.core.models import WorkItem
from functions.core.workflow import WorkflowContext
from functions.workflows.notify import NotifyWorkflow
from functions.workflows.wiring import build_notify
from local.notify_sink import NotifySinkServer
from local.stack import generate_signing_secret
from local.testkit.clock import FakeClock
from local.testkit.moto_world import REGION
from tests.fakes import FakeEffects
from tests.integration.test_agent_adapters import PACKAGE

SIGNING_SECRET = generate_signing_secret()
_NAMES = itertools.count()
DELIVERY = "dlv_notify_secret"
KEY = f"{DELIVERY}:notify"
WORK = WorkItem(
    delivery_id=DELIVERY,
    event="package.received",
    package_id=PACKAGE.package_id,
    mcp_url="https://mcp.example.com/mcp",
)


@pytest.fixture
def sink() -> Iterator[NotifySinkServer]:
    with NotifySinkServer(signing_secret=SIGNING_SECRET) as server:
        yield server


@pytest.fixture
def aws(moto_aws: None) -> None:
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="archive")


def secret(value: object) -> str:
    client = boto3.client("secretsmanager", region_name=REGION)
    text = value if isinstance(value, str) else json.dumps(value)
    return client.create_secret(Name=f"notify-{next(_NAMES)}", SecretString=text)["ARN"]


def put(arn: str, value: object) -> None:
    client = boto3.client("secretsmanager", region_name=REGION)
    client.put_secret_value(SecretId=arn, SecretString=json.dumps(value))


# How long a read secret is used in these tests; the sink accepts a signature this far
# ahead of its own clock.
MAX_AGE_SECONDS = 60


class SteppedClock:
    """The second it was made, set ahead by hand only: a secret ages without a wait, and
    never by the real clock crossing a second mid-test (the sink takes a signature up to
    five minutes from its own clock)."""

    def __init__(self) -> None:
        self._start = SystemClock().now()
        self.ahead = 0

    def now(self) -> int:
        return self._start + self.ahead


def workflow(
    arn: str, notify_url: str | None = None, clock: SteppedClock | None = None
) -> NotifyWorkflow:
    """``build_notify`` as a new container runs it (the secret is read on first use)."""
    built = build_notify(
        WorkflowContext(
            notify_url=notify_url,
            archive_bucket="archive",
            allow_insecure_loopback=True,
            timeout_seconds=2,
            clock=clock or SteppedClock(),
            settings={"notify_secret_arn": arn},
            secrets_max_age_seconds=MAX_AGE_SECONDS,
        )
    )
    assert isinstance(built, NotifyWorkflow)
    return built


def run(notify: NotifyWorkflow, store: FakeEffects | None = None) -> None:
    ledger = EffectLedger(DELIVERY, store=store or FakeEffects(), clock=FakeClock(), expires_at=0)
    notify.run(WORK, PACKAGE, ledger)


def test_notify_posts_to_the_url_in_its_secret_signed_and_the_sink_verifies_it(
    aws: None, sink: NotifySinkServer
) -> None:
    run(workflow(secret({"url": sink.url, "signing_secret": SIGNING_SECRET})))
    assert sink.sink.counts() == {KEY: 1}
    assert sink.sink.unsigned == 0
    assert sink.sink.body(KEY)["title"] == PACKAGE.title


def test_a_signing_secret_alone_signs_posts_to_the_plain_notify_url(
    aws: None, sink: NotifySinkServer
) -> None:
    run(workflow(secret({"signing_secret": SIGNING_SECRET}), notify_url=sink.url))
    assert sink.sink.counts() == {KEY: 1}


def test_the_sink_refuses_a_post_signed_with_another_key_and_nothing_is_applied(
    aws: None, sink: NotifySinkServer
) -> None:
    other = generate_signing_secret()
    with pytest.raises(PermanentError, match="notify_rejected"):
        run(workflow(secret({"url": sink.url, "signing_secret": other})))
    with pytest.raises(PermanentError, match="notify_rejected"):
        run(workflow(secret({"url": sink.url})))  # unsigned
    assert sink.sink.unsigned == 2
    assert sink.sink.counts() == {}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("not json", "notify_secret_arn: the secret is not a JSON object"),
        ({}, "the secret holds no url or signing_secret"),
        ({"url": "https://x.example", "token": "t"}, "fields not known: ['token']"),
        ({"url": "ftp://hooks.example/T000/credential"}, "notify_secret_arn must be https"),
        ({"signing_secret": "whsec_c2hvcnQ="}, "signing secret's key must be 24 to 64 bytes"),
        ({"signing_secret": SIGNING_SECRET}, "needs NOTIFY_URL or a url in its secret"),
    ],
)
def test_a_notify_secret_that_is_malformed_sends_nothing_and_names_no_value(
    aws: None, sink: NotifySinkServer, value: object, says: str
) -> None:
    notify = workflow(secret(value))
    with pytest.raises(NotApplied, match="notify_secret_unavailable") as refused:
        run(notify)
    assert says in str(refused.value.__cause__)
    assert "T000" not in str(refused.value.__cause__)
    with pytest.raises(TransientError, match="notify_secret_unavailable"):
        notify._notifier.was_applied(KEY)  # the lookup of a later attempt: asked again
    assert sink.sink.requests == 0


def test_a_url_both_in_the_secret_and_in_notify_url_is_refused(
    aws: None, sink: NotifySinkServer
) -> None:
    with pytest.raises(NotApplied, match="notify_secret_unavailable") as refused:
        run(workflow(secret({"url": sink.url}), notify_url=sink.url))
    assert "NOTIFY_URL and the url in notify_secret_arn: one or the other" in str(
        refused.value.__cause__
    )
    assert sink.sink.requests == 0


def test_an_unreadable_secret_is_read_again_and_a_read_one_is_kept_for_its_max_age(
    aws: None, sink: NotifySinkServer
) -> None:
    arn = secret("{")
    clock = SteppedClock()
    notify = workflow(arn, clock=clock)
    with pytest.raises(NotApplied, match="notify_secret_unavailable"):
        run(notify)
    with pytest.raises(NotApplied, match="notify_secret_unavailable") as unread:
        run(workflow(arn + "x"))
    assert "notify_secret_arn: the secret cannot be read" in str(unread.value.__cause__)
    put(arn, {"url": sink.url, "signing_secret": SIGNING_SECRET})
    run(notify)  # a failed read is not kept: the retry reads the fixed secret
    assert sink.sink.counts() == {KEY: 1}
    # Rotated: this container keeps the endpoint it read until that is MAX_AGE_SECONDS
    # old, then reads the new one; a new container reads the new one at once.
    with NotifySinkServer(signing_secret=SIGNING_SECRET) as moved:
        put(arn, {"url": moved.url, "signing_secret": SIGNING_SECRET})
        clock.ahead = MAX_AGE_SECONDS - 1
        run(notify, FakeEffects())
        assert sink.sink.counts() == {KEY: 2}
        run(workflow(arn))
        assert moved.sink.counts() == {KEY: 1}
        clock.ahead = MAX_AGE_SECONDS
        run(notify, FakeEffects())
        assert moved.sink.counts() == {KEY: 2}
        assert sink.sink.counts() == {KEY: 2}
        # Aged again and unreadable: nothing is sent, not even to the endpoint it knew.
        put(arn, "{")
        clock.ahead = 2 * MAX_AGE_SECONDS
        with pytest.raises(NotApplied, match="notify_secret_unavailable"):
            run(notify, FakeEffects())
        assert moved.sink.counts() == {KEY: 2}


def test_a_rotated_signing_key_reaches_a_warm_container_once_its_read_has_aged(
    aws: None,
) -> None:
    new_key = generate_signing_secret()
    with NotifySinkServer(signing_secret=new_key) as rotated:
        arn = secret({"url": rotated.url, "signing_secret": SIGNING_SECRET})
        clock = SteppedClock()
        notify = workflow(arn, clock=clock)
        with pytest.raises(PermanentError, match="notify_rejected"):
            run(notify, FakeEffects())  # the old key, which the endpoint takes no more
        put(arn, {"url": rotated.url, "signing_secret": new_key})
        clock.ahead = MAX_AGE_SECONDS
        run(notify, FakeEffects())
        assert rotated.sink.counts() == {KEY: 1}
        assert rotated.sink.unsigned == 1
