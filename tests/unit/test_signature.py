"""Signature verification, against the shared vectors and against hand-made requests."""

from __future__ import annotations

import base64

import pytest

from functions.core import signature
from functions.core.signature import RejectReason, SignatureRejected, SigningSecret
from local.testkit import builders, vectors

NOW = 1_764_687_845
VECTORS = vectors.load_vectors()
# The vector cases whose outcome is decided by the signature alone.
SIGNATURE_CASES = [c for c in VECTORS.cases if c.request.expect_outcome != "invalid"]


def _verify(headers: dict[str, str], body: bytes, secrets: list[str], *, now: int = NOW) -> None:
    lowered = {k.lower(): v for k, v in headers.items()}
    signed = signature.read_headers(
        delivery_id=lowered.get("x-relaylink-delivery"),
        timestamp=lowered.get("x-relaylink-timestamp"),
        signature=lowered.get("x-relaylink-signature"),
        now=now,
    )
    signature.verify(signed, body, [SigningSecret.parse(s) for s in secrets])


@pytest.mark.parametrize("case", SIGNATURE_CASES, ids=lambda c: c.name)
def test_signature_matches_vector_verdict(case: vectors.VectorCase) -> None:
    expect_rejected = case.request.expect_outcome == "rejected"
    if expect_rejected:
        with pytest.raises(SignatureRejected):
            _verify(case.request.headers, case.request.body, case.secrets, now=VECTORS.now)
    else:
        _verify(case.request.headers, case.request.body, case.secrets, now=VECTORS.now)


def test_signature_sign_reproduces_every_vector_signature_made_by_the_reference() -> None:
    secret = SigningSecret.parse(VECTORS.cases[0].secrets[0])
    h = {k.lower(): v for k, v in VECTORS.cases[0].request.headers.items()}
    produced = signature.sign(
        secret,
        delivery_id=h["x-relaylink-delivery"],
        timestamp=h["x-relaylink-timestamp"],
        body=VECTORS.cases[0].request.body,
    )
    assert produced == h["x-relaylink-signature"]


@pytest.mark.parametrize("offset", [-300, -1, 0, 1, 300])
def test_signature_accepts_timestamps_within_tolerance(offset: int) -> None:
    request = builders.signed_request(timestamp=NOW + offset)
    _verify(request.headers, request.body, [builders.SECRET])


@pytest.mark.parametrize("offset", [-301, 301, -10_000, NOW])
def test_signature_rejects_timestamps_outside_tolerance(offset: int) -> None:
    request = builders.signed_request(timestamp=NOW + offset)
    with pytest.raises(SignatureRejected) as caught:
        _verify(request.headers, request.body, [builders.SECRET])
    assert caught.value.reason is RejectReason.STALE_TIMESTAMP


@pytest.mark.parametrize("text", ["", "+1764687845", " 1764687845", "01764687845", "1e9", "x"])
def test_signature_rejects_non_canonical_timestamps(text: str) -> None:
    request = builders.signed_request(timestamp=NOW)
    headers = {**request.headers, "X-RelayLink-Timestamp": text}
    with pytest.raises(SignatureRejected) as caught:
        _verify(headers, request.body, [builders.SECRET])
    expected = RejectReason.MISSING_HEADERS if not text else RejectReason.BAD_TIMESTAMP
    assert caught.value.reason is expected


@pytest.mark.parametrize(
    "header", ["X-RelayLink-Delivery", "X-RelayLink-Timestamp", "X-RelayLink-Signature"]
)
def test_signature_rejects_a_missing_header(header: str) -> None:
    request = builders.signed_request(timestamp=NOW)
    headers = {k: v for k, v in request.headers.items() if k != header}
    with pytest.raises(SignatureRejected) as caught:
        _verify(headers, request.body, [builders.SECRET])
    assert caught.value.reason is RejectReason.MISSING_HEADERS


def test_signature_accepts_any_known_secret_and_any_entry() -> None:
    request = builders.signed_request(
        timestamp=NOW, secrets=[builders.OTHER_SECRET, builders.SECRET]
    )
    _verify(request.headers, request.body, [builders.SECRET])
    _verify(request.headers, request.body, [builders.OTHER_SECRET])
    _verify(request.headers, request.body, [builders.OTHER_SECRET, builders.SECRET])


def test_signature_rejects_when_no_secret_is_known() -> None:
    request = builders.signed_request(timestamp=NOW)
    with pytest.raises(SignatureRejected) as caught:
        _verify(request.headers, request.body, [])
    assert caught.value.reason is RejectReason.NO_MATCH


@pytest.mark.parametrize(
    "make_header",
    [
        lambda good: good.replace("v1,", "v2,"),  # right bytes, unknown version
        lambda good: good.replace("v1,", "v1 "),  # entry split by space, no comma
        lambda good: good[:-4] + "AAA=",  # one signature byte changed
        lambda good: good + "A",  # trailing garbage
        lambda good: "v1,é" + good[4:],  # non-ASCII must not raise
        lambda good: good.replace("v1,", "V1,"),  # the version is case-sensitive
        lambda good: "v1," + base64.b64encode(b"\x00" * 32).decode(),
        lambda good: ",",
        lambda good: "   ",
    ],
)
def test_signature_rejects_tampered_signature_headers(make_header: object) -> None:
    request = builders.signed_request(timestamp=NOW)
    good = request.headers["X-RelayLink-Signature"]
    headers = {**request.headers, "X-RelayLink-Signature": make_header(good)}  # type: ignore[operator]
    with pytest.raises(SignatureRejected):
        _verify(headers, request.body, [builders.SECRET])


def test_signature_skips_unknown_versions_and_empty_entries() -> None:
    request = builders.signed_request(timestamp=NOW)
    good = request.headers["X-RelayLink-Signature"]
    headers = {**request.headers, "X-RelayLink-Signature": f"v0,abc  {good} v9,{good[3:]}"}
    _verify(headers, request.body, [builders.SECRET])


def test_signature_covers_each_signed_part() -> None:
    request = builders.signed_request(timestamp=NOW)
    for headers, body in [
        ({**request.headers, "X-RelayLink-Delivery": builders.new_delivery_id()}, request.body),
        ({**request.headers, "X-RelayLink-Timestamp": str(NOW + 1)}, request.body),
        (request.headers, request.body + b" "),
        (request.headers, request.body.replace(b"pkg_", b"pkh_")),
    ]:
        with pytest.raises(SignatureRejected) as caught:
            _verify(headers, body, [builders.SECRET])
        assert caught.value.reason is RejectReason.NO_MATCH


@pytest.mark.parametrize("text", ["", "whsec_", "c2VjcmV0", "whsec_!!!x", "WHSEC_AAAA"])
def test_signing_secret_parse_refuses_malformed_secrets_without_echoing_them(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        SigningSecret.parse(text)
    if text.removeprefix("whsec_"):
        assert text.removeprefix("whsec_") not in str(caught.value)


def test_signing_secret_repr_hides_the_key() -> None:
    secret = SigningSecret.parse(builders.SECRET)
    assert secret.key == b"relaylink-test-secret-number-one"
    assert "relaylink" not in repr(secret)
