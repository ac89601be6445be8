"""Hook webhooks and stream webhooks against real HTTP(S) receivers."""

from __future__ import annotations

import json

import pytest

from hooks import services, ssrf, stream_webhooks, webhook_client
from hooks.models import Delivery
from tests.hooks import helpers

EVENT = {
    "seq": 9,
    "ts_ms": 1,
    "schema": 1,
    "kind": "host.started",
    "version": "v",
    "gamestream": True,
}


@pytest.fixture
def https_receiver(receiver_tls, monkeypatch):
    monkeypatch.setenv("HOST_WEBHOOK_CA_BUNDLE", str(receiver_tls.ca_path))
    rec = helpers.start_receiver(receiver_tls.ip, receiver_tls)
    yield rec
    rec.close()


@pytest.mark.django_db
def test_signed_https_post(https_receiver, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"s3cret")
    services.fire_webhook(EVENT, {"webhook": https_receiver.url, "hmac_secret_file": str(secret)})
    got = https_receiver.get()
    assert json.loads(got.body) == EVENT
    assert helpers.verify_signature(b"s3cret", got.body, got.headers["X-Mgmt-Signature"])
    assert "Authorization" not in got.headers and "Cookie" not in got.headers
    record = Delivery.objects.get()
    assert (record.outcome, record.http_status, record.event_seq) == ("ok", 200, 9)


@pytest.mark.django_db
def test_unreadable_secret_skips_the_post(https_receiver, tmp_path):
    services.fire_webhook(
        EVENT, {"webhook": https_receiver.url, "hmac_secret_file": str(tmp_path / "none")}
    )
    assert https_receiver.none_within(0.5)
    assert Delivery.objects.get().outcome == "skipped"


@pytest.mark.django_db
def test_untrusted_certificate_is_not_posted_to(receiver_tls, monkeypatch):
    monkeypatch.delenv("HOST_WEBHOOK_CA_BUNDLE", raising=False)
    rec = helpers.start_receiver(receiver_tls.ip, receiver_tls)
    try:
        services.fire_webhook(EVENT, {"webhook": rec.url})
        assert rec.none_within(0.3)
        record = Delivery.objects.get()
        assert record.outcome == "failed" and "TLS" in record.error
    finally:
        rec.close()


@pytest.mark.django_db
def test_redirect_is_not_followed(https_receiver, receiver_tls):
    target = helpers.start_receiver(receiver_tls.ip)
    https_receiver.redirect_to = target.url
    try:
        services.fire_webhook(EVENT, {"webhook": https_receiver.url})
        https_receiver.get()
        assert target.none_within(0.5)
        assert Delivery.objects.get().http_status == 307
    finally:
        target.close()


def test_send_time_check_refuses_loopback_even_if_validated_earlier():
    rec = helpers.start_receiver("127.0.0.1")
    try:
        for url in (rec.url, rec.url.replace("127.0.0.1", "localhost")):
            with pytest.raises(ssrf.UrlRefused):
                webhook_client.post_json(url, b"{}", {}, 2)
        assert rec.none_within(0.3)
    finally:
        rec.close()


@pytest.mark.django_db
def test_stream_webhook_body_signature_and_retry_rules(tls_material, monkeypatch):
    rec = helpers.start_receiver(tls_material.ip, statuses=[503, 404])
    try:
        body = stream_webhooks.body_for("stream.start", {"app_name": "Doom", "width": 1280})
        sig = services.sign(b"k", body)
        assert stream_webhooks.deliver(rec.url, body, sig, attempt=1) is True  # 503: retry
        assert stream_webhooks.deliver(rec.url, body, sig, attempt=2) is False  # 404: no retry
        assert stream_webhooks.deliver(rec.url, body, sig, attempt=3) is False  # 200
        got = rec.get()
        doc = json.loads(got.body)
        assert doc["event"] == "stream.start" and doc["app_name"] == "Doom" and doc["t_end"] is None
        assert set(doc) == {"event", *stream_webhooks.RECORD_FIELDS}
        assert helpers.verify_signature(b"k", got.body, got.headers["X-Host-Signature"])
        outcomes = list(Delivery.objects.order_by("id").values_list("http_status", "attempt"))
        assert outcomes == [(503, 1), (404, 2), (200, 3)]
    finally:
        rec.close()


def test_stream_webhook_backoff_grows(monkeypatch):
    monkeypatch.setenv("HOST_STREAM_WEBHOOK_BACKOFF_S", "1")
    assert [stream_webhooks.backoff_s(n) for n in range(2)] == [1.0, 3.0]
