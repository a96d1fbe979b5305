"""Standard Webhooks signatures on our POSTs (alert, notify): the specification's own example."""

from __future__ import annotations

import pytest

from functions.core.adapters.notifier_http import HttpNotifier
from functions.core.adapters.webhook_signing import WebhookSigner, parse_secret
from functions.core.signature import SignatureRejected, SigningSecret, read_headers, sign, verify
from local.testkit.clock import FakeClock

# The example of the Standard Webhooks specification (standard-webhooks/spec.md).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_signature_is_the_specifications_for_its_example() -> None:
    key = SigningSecret(parse_secret(SPEC_SECRET))
    assert sign(key, delivery_id=SPEC_ID, timestamp=str(SPEC_TIMESTAMP), body=SPEC_BODY) == (
        SPEC_SIGNATURE
    )
    signer = WebhookSigner(secret=f"  {SPEC_SECRET}\n", clock=FakeClock(SPEC_TIMESTAMP))
    assert signer.headers(SPEC_ID, SPEC_BODY) == {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TIMESTAMP),
        "webhook-signature": SPEC_SIGNATURE,
    }


@pytest.mark.parametrize(
    "secret",
    [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",  # no prefix
        "whsec_not*base64",
        "whsec_" + "QUJD",  # 3 bytes
        "whsec_" + "QUJD" * 30,  # 90 bytes
    ],
)
def test_a_secret_of_another_form_is_refused_without_quoting_it(secret: str) -> None:
    with pytest.raises(ValueError, match="signing secret") as refused:
        WebhookSigner(secret=secret, clock=FakeClock(0))
    assert secret.removeprefix("whsec_") not in str(refused.value)


def test_a_notify_post_carries_the_signature_of_its_exact_body() -> None:
    signer = WebhookSigner(secret=SPEC_SECRET, clock=FakeClock(SPEC_TIMESTAMP))
    notifier = HttpNotifier(
        url="http://127.0.0.1:9/notify",
        timeout_seconds=1,
        allow_insecure_loopback=True,
        signer=signer,
    )
    request = notifier.request({"title": "Q3", "delivery_id": "d"}, idempotency_key="d:notify")
    headers = {name.lower(): value for name, value in request.header_items()}
    assert isinstance(request.data, bytes)
    signed = read_headers(
        delivery_id=headers["webhook-id"],
        timestamp=headers["webhook-timestamp"],
        signature=headers["webhook-signature"],
        now=SPEC_TIMESTAMP,
    )
    assert signed.delivery_id == headers["idempotency-key"] == "d:notify"
    verify(signed, request.data, [SigningSecret(parse_secret(SPEC_SECRET))])
    with pytest.raises(SignatureRejected):
        verify(
            signed, request.data.replace(b"Q3", b"Q4"), [SigningSecret(parse_secret(SPEC_SECRET))]
        )


def test_a_notify_post_without_a_signer_carries_no_signature_headers() -> None:
    notifier = HttpNotifier(
        url="http://127.0.0.1:9/notify", timeout_seconds=1, allow_insecure_loopback=True
    )
    request = notifier.request({"delivery_id": "d"}, idempotency_key="d:notify")
    assert not any(name.lower().startswith("webhook-") for name, _ in request.header_items())
