"""Updater status against a signed manifest served over HTTP, restart, Windows-only routes,
and the runtime snapshot."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.test import Client

from common.statedir import state_path
from console import platform, updater
from hostconfig import store
from tests.support.events import emitted
from tests.support.release_signing import signed

NEWER = "v2099.101.0-stable"


@pytest.fixture
def release(settings, redis_db):
    """A release server on loopback, a pinned key, a clean update state, and the tests' Redis
    emptied so the bus's ring holds only what this test announced (`emitted`)."""
    key = Ed25519PrivateKey.generate()
    raw_pub = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    settings.UPDATE_PUBLIC_KEY = base64.b64encode(raw_pub).decode()
    served = {"body": b"", "status": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(served["status"])
            self.end_headers()
            self.wfile.write(served["body"])

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    store.write({"update_manifest_url": f"http://127.0.0.1:{server.server_port}/m.json"})
    state_path(updater.STATE_FILE).unlink(missing_ok=True)
    yield key, served
    server.shutdown()
    state_path(updater.STATE_FILE).unlink(missing_ok=True)


def manifest(version=NEWER, serial=1):
    return {
        "version": version,
        "channel": "stable",
        "serial": serial,
        "published_at": "2099-01-01T00:00:00Z",
        "notes_url": "https://example.invalid/notes",
    }


def test_version_order():
    assert updater.is_newer("v2026.1201.0-x", "v2026.1126.5-dev")
    assert updater.is_newer("v2026.1126.1-x", "v2026.1126.0-dev")
    assert not updater.is_newer("v2026.1126.0-x", "v2026.1126.0-dev")
    assert not updater.is_newer("garbage", "v2026.1126.0-dev")


def test_newer_release_is_reported_and_announced_once(release):
    key, served = release
    served["body"] = signed(manifest(), key)
    status = updater.check()
    assert status["available"] is True
    assert status["manifest"]["version"] == NEWER and status["manifest"]["stale"] is False
    assert status["last_error"] is None and status["apply"] == "manual"
    updater.check()
    announced = emitted("update.available")
    assert len(announced) == 1
    assert announced[0]["version"] == NEWER and announced[0]["install_kind"] == "source"


def test_bad_signature_is_never_believed(release):
    key, served = release
    served["body"] = signed(manifest(), Ed25519PrivateKey.generate())
    status = updater.check()
    assert status["available"] is False and status["manifest"] is None
    assert "signature" in status["last_error"]
    assert emitted("update.available") == []


@pytest.mark.parametrize("body", [b"", b"{}", b"[1]", b'{"payload": "!!", "signature": "x"}'])
def test_garbage_manifest_is_an_error_not_a_crash(release, body):
    _, served = release
    served["body"] = body
    assert updater.check()["last_error"]


def test_older_release_is_not_available(release):
    key, served = release
    served["body"] = signed(manifest("v2020.101.0-stable"), key)
    status = updater.check()
    assert status["available"] is False and status["manifest"]["version"].startswith("v2020")


def test_not_published_404(release):
    _, served = release
    served["status"] = 404
    status = updater.check()
    assert status["not_published"] is True and status["last_error"] is None


OLDER = "v2098.101.0-stable"
NEWEST = "v2099.102.0-stable"


@pytest.mark.parametrize(
    "version,serial",
    [
        (OLDER, 5),  # older in both
        (OLDER, 11),  # older version, newer serial
        (NEWER, 10),  # the same version and serial, other fields changed below
        (NEWER, 11),  # same version, newer serial
        (NEWEST, 10),  # newer version, same serial
        (NEWEST, 9),  # newer version, older serial
    ],
)
def test_a_signed_manifest_not_newer_than_the_last_accepted_is_refused(release, version, serial):
    key, served = release
    served["body"] = signed(manifest(NEWER, 10), key)
    assert updater.check()["last_error"] is None
    replay = manifest(version, serial)
    replay["notes_url"] = "https://example.invalid/replayed"
    served["body"] = signed(replay, key)
    status = updater.check()
    assert "rollback" in status["last_error"]
    assert status["manifest"]["version"] == NEWER and status["manifest"]["serial"] == 10
    assert status["manifest"]["notes_url"] == "https://example.invalid/notes"
    assert status["available"] is True
    # The high-water mark is on disk, so a restarted host refuses the replay too.
    on_disk = json.loads(state_path(updater.STATE_FILE).read_text())
    assert on_disk["accepted"] == {"version": NEWER, "serial": 10}


def test_the_same_manifest_again_and_a_newer_one_are_accepted(release):
    key, served = release
    served["body"] = signed(manifest(NEWER, 10), key)
    updater.check()
    assert updater.check()["last_error"] is None  # a re-fetch of the accepted manifest
    served["body"] = signed(manifest(NEWEST, 11), key)
    status = updater.check()
    assert status["last_error"] is None and status["manifest"]["version"] == NEWEST
    served["body"] = signed(manifest(NEWER, 10), key)  # the first one, replayed
    assert "rollback" in updater.check()["last_error"]
    announced = [e["version"] for e in emitted("update.available")]
    assert announced == [NEWER, NEWEST]


def test_an_older_manifest_is_refused_after_upgrading_from_a_state_without_accepted(release):
    key, served = release
    # A state file written before `accepted` existed: its manifest is the last accepted.
    state_path(updater.STATE_FILE).write_text(json.dumps({"manifest": manifest(NEWER, 10)}))
    served["body"] = signed(manifest(OLDER, 5), key)
    assert "rollback" in updater.check()["last_error"]


@pytest.mark.parametrize("serial", [None, 0, -1, "12", True, 1.5])
def test_a_manifest_without_a_valid_serial_is_refused(release, serial):
    key, served = release
    payload = manifest()
    if serial is None:
        del payload["serial"]
    else:
        payload["serial"] = serial
    served["body"] = signed(payload, key)
    status = updater.check()
    assert "serial" in status["last_error"] and status["manifest"] is None


@pytest.mark.django_db
def test_routes_and_forced_check_rate_limit(release, admin, mgmt):
    key, served = release
    served["body"] = signed(manifest(), key)
    c = Client()
    r = c.post("/api/v1/update/check", **mgmt)
    assert r.status_code == 200 and r.json()["available"] is True
    assert c.post("/api/v1/update/check", **mgmt).status_code == 429
    admin_body = c.get("/api/update", **admin).json()
    assert admin_body["status"] is True and admin_body["available"] is True
    assert admin_body["apply_supported"] is True
    v1 = c.get("/api/v1/update/status", **mgmt).json()
    assert v1["current_version"] and "status" not in v1


def test_unconfigured_url_is_reported(settings):
    state_path(updater.STATE_FILE).unlink(missing_ok=True)
    store.write({"update_manifest_url": None})
    status = updater.check()
    assert "update_manifest_url" in status["last_error"]
    state_path(updater.STATE_FILE).unlink(missing_ok=True)


@pytest.mark.parametrize(
    "value",
    [
        "https://updates.example.com/stable/manifest.json",
        "http://127.0.0.1:8080/m.json",  # loopback mirror: http allowed
        "http://[::1]/m.json",
        "http://localhost/m.json",
    ],
)
def test_manifest_url_key_accepts_https_and_loopback_http(value):
    from hostconfig import schema

    spec = schema.key("update_manifest_url")
    assert (spec.type, spec.default, spec.file_only, spec.env) == (
        "url",
        None,
        True,
        "HOST_UPDATE_MANIFEST_URL",
    )
    assert store.validate({"update_manifest_url": value}, allow_file_only=True) == {
        "update_manifest_url": value
    }
    store.write({"update_manifest_url": value})
    assert updater.manifest_url() == value


@pytest.mark.parametrize(
    "value, rule",
    [
        ("http://updates.example.com/m.json", "https://"),
        ("http://10.0.0.5/m.json", "https://"),
        ("ftp://updates.example.com/m.json", "http:// or https://"),
        ("updates.example.com/m.json", "http:// or https://"),
        ("https://", "http:// or https://"),
        ("https://ok.example/\x07", "control characters"),
    ],
)
def test_manifest_url_key_refuses_what_breaks_the_rule(value, rule):
    with pytest.raises(store.ConfigError) as err:
        store.validate({"update_manifest_url": value}, allow_file_only=True)
    assert rule in err.value.fields["update_manifest_url"]
    # Through the APIs it is file-only: no token can point the host's fetches elsewhere.
    with pytest.raises(store.ConfigError) as err:
        store.validate({"update_manifest_url": "https://updates.example.com/m.json"})
    assert "file-only" in err.value.fields["update_manifest_url"]


@pytest.mark.django_db
def test_admin_api_cannot_set_the_manifest_url(admin):
    before = store.read_raw().get("update_manifest_url")
    r = Client().post(
        "/api/config",
        data={"update_manifest_url": "https://evil.example/m.json"},
        content_type="application/json",
        **admin,
    )
    assert r.status_code == 400
    assert store.read_raw().get("update_manifest_url") == before


def test_manifest_url_env_fallback_goes_through_the_schema(settings, monkeypatch):
    store.write({"update_manifest_url": None})
    state_path(updater.STATE_FILE).unlink(missing_ok=True)
    monkeypatch.setenv("HOST_UPDATE_MANIFEST_URL", "https://env.example/m.json")
    assert updater.manifest_url() == "https://env.example/m.json"
    store.write({"update_manifest_url": "https://file.example/m.json"})
    assert updater.manifest_url() == "https://file.example/m.json"  # the file wins
    store.write({"update_manifest_url": None})
    monkeypatch.setenv("HOST_UPDATE_MANIFEST_URL", "http://env.example/m.json")
    status = updater.check()
    assert "https://" in status["last_error"] and "HOST_UPDATE_MANIFEST_URL" in status["last_error"]
    store.write({"update_manifest_url": "http://file.example/m.json"})  # hand-edited, invalid
    status = updater.check()
    assert "https://" in status["last_error"] and "host.conf" in status["last_error"]
    state_path(updater.STATE_FILE).unlink(missing_ok=True)


@pytest.mark.django_db
def test_without_a_pinned_key_updates_are_refused_and_the_console_says_why(
    release, admin, django_capture_on_commit_callbacks
):
    from django.conf import settings

    from access import credentials

    key, served = release
    served["body"] = signed(manifest(), key)  # a good manifest, but no key to believe it by
    settings.UPDATE_PUBLIC_KEY = ""
    # The test runs in a transaction; commit hooks run here, so an emit would reach the ring.
    with django_capture_on_commit_callbacks(execute=True):
        status = updater.check()
    assert status["available"] is False and status["manifest"] is None
    assert "no release signing key is pinned" in status["last_error"]
    assert status["refused"] == updater.NO_KEY_REASON
    assert emitted("update.available") == []
    v1 = Client().get("/api/update", **admin).json()
    assert v1["refused"] == updater.NO_KEY_REASON
    credentials.set_credentials("admin", "s3cret")
    browser = Client()
    assert browser.post("/login", {"username": "admin", "password": "s3cret"}).status_code == 302
    page = browser.get("/").content.decode()
    assert "not checked: no release signing key is pinned in this build" in page
    assert "HOST_UPDATE_PUBLIC_KEY" in page


def test_with_a_pinned_key_nothing_is_refused(release):
    assert updater.refused_reason() is None
    assert updater.check()["refused"] is None


@pytest.mark.django_db
def test_windows_only_routes_answer_on_linux(admin):
    c = Client()
    status = c.get("/api/vigembus/status", **admin)
    assert status.status_code == 200
    assert status.json()["status"] is False and status.json()["installed"] is False
    for path in ("/api/vigembus/install", "/api/reset-display-device-persistence"):
        r = c.post(path, **admin)
        assert r.status_code == 404
        assert r.json()["status"] is False and r.json()["status_code"] == 404
        assert r.json()["error"].startswith("Windows only: ")


@pytest.mark.django_db
def test_restart_goes_through_the_supervisor(admin, monkeypatch):
    calls = []
    monkeypatch.setenv("HOST_SUPERVISOR_PID", "1")
    monkeypatch.setattr("common.supervisorctl.request_restart", lambda: calls.append(1))
    monkeypatch.setattr(platform, "RESTART_DELAY_S", 0.01)
    r = Client().post("/api/restart", **admin)
    assert r.status_code == 200 and r.json()["restarting"] is True
    deadline = time.monotonic() + 2
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == [1]


@pytest.mark.django_db
def test_restart_outside_runhost_is_409_and_needs_admin(admin, monkeypatch):
    monkeypatch.delenv("HOST_SUPERVISOR_PID", raising=False)
    assert Client().post("/api/restart", **admin).status_code == 409
    from access import api_tokens

    token = api_tokens.mint("logs", ["logs:get"])
    r = Client().post("/api/restart", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert r.status_code == 403


@pytest.mark.django_db
def test_runtime_status_shape(mgmt):
    body = Client().get("/api/v1/status", **mgmt).json()
    for field in (
        "video_streaming",
        "audio_streaming",
        "pin_pending",
        "paired_clients",
        "native_paired_clients",
        "active_sessions",
        "session",
        "stream",
        "games",
    ):
        assert field in body
    assert isinstance(body["games"], list) and isinstance(body["paired_clients"], int)
