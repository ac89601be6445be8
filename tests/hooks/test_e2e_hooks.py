"""Hooks on a real host: PUT /hooks, real `sh` commands, a real HTTPS receiver, the in-flight
cap under a burst, the built-in on-connect hook, stream webhooks through Celery."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.hooks import helpers

pytestmark = pytest.mark.e2e

CLIENT = {"client": {"name": "Deck", "fingerprint": "ab" * 32, "plane": "native"}}


def _wait_for(path: Path, timeout: float = 20, lines: int = 1) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear")


def _put(host, doc) -> object:
    with host.mgmt() as c:
        return c.put("/api/v1/hooks", json=doc)


@pytest.fixture
def hooks_doc(hooks_host):
    yield
    assert _put(hooks_host, {"hooks": []}).status_code == 200


def test_configured_hook_runs_with_documented_environment(hooks_host, emit_in, hooks_doc, tmp_path):
    doc = {
        "hooks": [
            {
                "on": "stream.*",
                "run": f"cat > {tmp_path}/event.json; env > {tmp_path}/event.env",
                "filter": {"client": "Deck"},
            }
        ]
    }
    r = _put(hooks_host, doc)
    assert r.status_code == 200 and r.json() == doc
    with hooks_host.mgmt() as c:
        assert c.get("/api/v1/hooks").json() == doc
    stream = {
        "mode": "1920x1080@60",
        "hdr": True,
        "client": "TV",
        "app": "steam:1",
        "plane": "compat",
    }
    emit_in("stream.started", {"stream": stream})  # filtered out: other client
    emit_in("stream.started", {"stream": {**stream, "client": "Deck"}})
    env_text = _wait_for(tmp_path / "event.env", lines=5)
    event = json.loads((tmp_path / "event.json").read_text())
    assert event["stream"]["client"] == "Deck"
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    assert env["PF_EVENT_KIND"] == "stream.started"
    assert env["PF_EVENT_SEQ"] == str(event["seq"])
    assert env["PF_EVENT_STREAM_MODE"] == "1920x1080@60"
    assert env["PF_EVENT_STREAM_HDR"] == "true"
    assert env["PF_EVENT_STREAM_APP"] == "steam:1"
    assert env["PF_EVENT_STREAM_PLANE"] == "compat"
    assert json.loads(env["PF_EVENT_JSON"]) == event
    assert "HOST_MGMT_TOKEN" not in env_text


BAD_DOCS = [
    {"hooks": [{"on": "", "run": "x"}]},
    {"hooks": [{"on": "host.*"}]},
    {"hooks": [{"on": "host.*", "run": "x", "timeout_s": 0}]},
    {"hooks": [{"on": "host.*", "run": "x", "timeout_s": 601}]},
    {"hooks": [{"on": "host.*", "webhook": "ftp://example.com/"}]},
    {"hooks": [{"on": "host.*", "webhook": "http://2130706433/"}]},
    {"hooks": [{"on": "host.*", "webhook": "http://0x7f.1/"}]},
    {"hooks": [{"on": "host.*", "webhook": "http://[::ffff:127.0.0.1]/"}]},
    {"hooks": [{"on": "host.*", "webhook": "http://169.254.169.254/"}]},
    {"hooks": [{"on": "host.*", "webhook": "http://localhost:9/"}]},
    {"hooks": [{"on": "host.*", "run": ["x"]}]},
    {"hooks": [{"on": "host.*", "run": "x", "surprise": True}]},
    {"hooks": "nope"},
]


def test_bad_documents_change_nothing(live_host):
    """On the shared host (no loopback escape hatch): every mistake is a 400 with fields."""
    path = live_host.state_dir / "hooks.json"
    before = path.read_bytes() if path.exists() else None
    with live_host.mgmt() as c:
        good_before = c.get("/api/v1/hooks").json()
        for doc in BAD_DOCS:
            r = c.put("/api/v1/hooks", json=doc)
            assert r.status_code == 400, doc
            body = r.json()
            assert body["error"] and body["fields"], doc
        r = c.put(
            "/api/v1/hooks", content=b"{bad json", headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 400
        big = {"hooks": [{"on": "host.*", "run": "x" * 4000}] * 500}  # ~2 MB
        r = c.put("/api/v1/hooks", json=big)
        assert r.status_code == 400 and r.json()["fields"]
        assert c.get("/api/v1/hooks").json() == good_before
    assert (path.read_bytes() if path.exists() else None) == before


def test_plugin_token_may_not_touch_hooks(hooks_host):
    with hooks_host.client(headers={"Authorization": f"Bearer {hooks_host.plugin_token}"}) as c:
        assert c.get("/api/v1/hooks").status_code == 403
        assert c.put("/api/v1/hooks", json={"hooks": []}).status_code == 403


def test_hand_edited_invalid_file_disables_hooks(hooks_host, emit_in, hooks_doc, tmp_path):
    marker = tmp_path / "ran"
    bad = {"hooks": [{"on": "plugins.*", "run": f"touch {marker}"}, {"on": "", "run": "x"}]}
    (hooks_host.state_dir / "hooks.json").write_text(json.dumps(bad))
    with hooks_host.mgmt() as c:
        doc = c.get("/api/v1/hooks").json()
    assert doc["hooks"] == [] and "invalid" in doc
    emit_in("plugins.changed", {"id": "x"})
    time.sleep(2)
    assert not marker.exists()
    fixed = {"hooks": bad["hooks"][:1]}
    (hooks_host.state_dir / "hooks.json").write_text(json.dumps(fixed))  # no restart
    emit_in("plugins.changed", {"id": "y"})
    _wait_for(marker, lines=0)


def test_signed_webhook_to_https_receiver(hooks_host, emit_in, hooks_doc, receiver_tls, tmp_path):
    rec = helpers.start_receiver(receiver_tls.ip, receiver_tls)
    secret = tmp_path / "secret"
    secret.write_bytes(b"hook-secret")
    try:
        doc = {
            "hooks": [
                {"on": "plugins.changed", "webhook": rec.url, "hmac_secret_file": str(secret)}
            ]
        }
        assert _put(hooks_host, doc).status_code == 200
        emit_in("plugins.changed", {"id": "signed"})
        got = rec.get(timeout=20)
        assert json.loads(got.body)["id"] == "signed"
        assert helpers.verify_signature(b"hook-secret", got.body, got.headers["X-Mgmt-Signature"])
        assert not helpers.verify_signature(b"wrong", got.body, got.headers["X-Mgmt-Signature"])
    finally:
        rec.close()


@pytest.mark.slow
def test_burst_of_100_with_slow_hooks_drops_beyond_eight(hooks_host, emit_in, hooks_doc, tmp_path):
    ran = tmp_path / "ran"
    doc = {"hooks": [{"on": "display.released", "run": f"echo $PF_EVENT_SEQ >> {ran}; sleep 4"}]}
    assert _put(hooks_host, doc).status_code == 200
    emit_in("display.released", {"count": 1}, count=100)
    _wait_for(ran, lines=8)
    time.sleep(6)  # queued firings would start once the first eight finish; there are none
    assert len(ran.read_text().splitlines()) == 8
    counts = helpers.run_in_host(
        hooks_host,
        "from hooks.models import Delivery as D;"
        "print(D.objects.filter(event_kind='display.released', outcome='dropped').count())",
    )
    assert int(counts.strip().splitlines()[-1]) == 92


def test_builtin_on_connect_hook(hooks_host, emit_in):
    emit_in("client.connected", CLIENT)
    event = json.loads(_wait_for(hooks_host.out_dir / "on-connect.json"))
    assert event["kind"] == "client.connected" and event["client"]["name"] == "Deck"
    env = _wait_for(hooks_host.out_dir / "on-connect.env", lines=3)
    assert "PF_EVENT_CLIENT_FINGERPRINT=" + "ab" * 32 in env


def test_stream_webhooks_signed_and_retried(hooks_host, receiver_tls):
    rec = helpers.start_receiver(receiver_tls.ip, receiver_tls, statuses=[503, 502])
    try:
        helpers.run_in_host(
            hooks_host,
            "from hostconfig import store;"
            f"store.write({{'webhook_url_0': '{rec.url}', 'webhook_secret': 'stream-secret'}});"
            "from hooks import stream_webhooks;"
            "print(stream_webhooks.notify('stream.start', {'app_name': 'Doom', 'fps': 60}))",
        )
        attempts = [rec.get(timeout=20) for _ in range(3)]  # two 5xx answers, then 200
        for got in attempts:
            body = json.loads(got.body)
            assert body["event"] == "stream.start" and body["app_name"] == "Doom"
            assert helpers.verify_signature(
                b"stream-secret", got.body, got.headers["X-Host-Signature"]
            )
        assert rec.none_within(1.5)  # 200: no further retry
    finally:
        helpers.run_in_host(
            hooks_host,
            "from hostconfig import store;"
            "store.write({'webhook_url_0': None, 'webhook_secret': None})",
        )
        rec.close()
