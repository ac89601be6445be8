"""Console pages in process: who gets in, headers, the config form, the Django admin."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client

from access import credentials, throttle
from hostconfig import store
from streaming import history

pytestmark = pytest.mark.django_db

PAGES = ["/", "/clients", "/apps", "/library", "/hooks", "/config", "/sessions", "/tokens",
         "/fleet", "/logs"]  # fmt: skip


@pytest.fixture
def browser():
    credentials.set_credentials("admin", "s3cret")
    c = Client()
    r = c.post("/login", {"username": "admin", "password": "s3cret"})
    assert r.status_code == 302
    return c


def test_first_run_sends_every_page_to_welcome():
    for path in PAGES + ["/login"]:
        r = Client().get(path)
        assert r.status_code == 302 and r["Location"] == "/welcome", path


def test_pages_need_the_session_and_send_to_login():
    credentials.set_credentials("admin", "s3cret")
    for path in PAGES:
        r = Client().get(path)
        assert r.status_code == 302 and r["Location"] == f"/login?next={path}"
    assert Client().get("/console/status").status_code == 401


def test_pages_render_with_a_strict_policy(browser):
    for path in PAGES:
        r = browser.get(path)
        assert r.status_code == 200, path
        csp = r["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert r["X-Frame-Options"] == "DENY" and r["Cache-Control"] == "no-store"
        assert b"<script>" not in r.content  # no inline script: the policy would block it


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "javascript:1"])
def test_login_never_redirects_off_site(target):
    credentials.set_credentials("admin", "s3cret")
    r = Client().post("/login", {"username": "admin", "password": "s3cret", "next": target})
    assert r["Location"] == "/"


def test_login_failures_are_throttled():
    credentials.set_credentials("admin", "s3cret")
    c = Client()
    for _ in range(throttle.MAX_FAILURES):
        assert c.post("/login", {"username": "admin", "password": "no"}).status_code == 400
    assert c.post("/login", {"username": "admin", "password": "s3cret"}).status_code == 429


def test_status_relay_shape(browser):
    body = browser.get("/console/status").json()
    assert set(body) == {"status", "health", "telemetry"}
    assert body["status"]["games"] == [] and body["health"]["status"] == "ok"


def test_event_relay_needs_the_session():
    credentials.set_credentials("admin", "s3cret")
    assert Client().get("/console/events").status_code == 401


def test_console_static_files_are_served():
    r = Client().get("/static/console/console.js")
    assert r.status_code == 200
    assert b"X-CSRFToken" in b"".join(r.streaming_content)
    assert Client().get("/static/../hostmgmt/settings.py").status_code == 404


def test_config_form_reports_each_bad_field_and_saves_nothing(browser):
    r = browser.post("/config", {"rate_cap_pct": "20", "busy_poll_us": "abc", "dscp_qos": "true"})
    assert r.status_code == 400
    page = r.content.decode()
    assert page.count('class="field-error"') == 2
    assert "rate_cap_pct" not in store.read_raw() and "dscp_qos" not in store.read_raw()


def test_config_form_saves_only_changes_and_resets_with_empty(browser):
    store.write({"busy_poll_us": "100"})
    r = browser.post("/config", {"rate_cap_pct": "70", "busy_poll_us": "100"})
    assert r.status_code == 302 and r["Location"] == "/config?restart=1"
    assert store.get("rate_cap_pct") == 70
    r = browser.post("/config", {"rate_cap_pct": ""})
    assert r.status_code == 302
    assert "rate_cap_pct" not in store.read_raw()
    assert store.get("busy_poll_us") == 100


def test_config_page_hides_secrets_and_file_only_keys(browser):
    store.write({"webhook_secret": "topsecretvalue"})
    page = browser.get("/config").content.decode()
    assert "topsecretvalue" not in page
    assert 'name="api_tokens"' not in page
    # posting the mask back unchanged keeps the secret
    r = browser.post("/config", {"webhook_secret": "********"})
    assert r.status_code == 302
    assert store.read_raw()["webhook_secret"] == "topsecretvalue"


def test_session_history_in_the_django_admin(browser):
    history.record_session(
        t_start=datetime(2026, 11, 1, tzinfo=UTC), app_name="Steam", client_name="deck"
    )
    r = browser.get("/admin/streaming/sessionrecord/")
    assert r.status_code == 200
    assert b"deck" in r.content
    assert browser.get("/admin/streaming/sessionrecord/add/").status_code == 403


def test_config_form_keeps_hand_written_spellings_of_untouched_keys(browser):
    store.write({"dscp_qos": "no", "rate_cap_pct": "60"})
    page = browser.get("/config").content.decode()
    assert '<option value="false" selected>' in page
    # the browser posts back every field as shown; only the edited one changes
    r = browser.post("/config", {"dscp_qos": "false", "rate_cap_pct": "61"})
    assert r.status_code == 302
    assert store.read_raw()["dscp_qos"] == "no" and store.get("rate_cap_pct") == 61


def test_config_page_says_which_encoders_an_encoder_key_reaches(browser, monkeypatch):
    from media import encoders

    table = {"nvenc": {"h264": True, "hevc": False, "av1": False},
             "software": {"h264": True, "hevc": True, "av1": True}}  # fmt: skip
    monkeypatch.setattr(encoders, "available", lambda: table)
    page = browser.get("/config").content.decode()
    assert 'id="reach-sw_tune" class="reach">reaches libx264; opens here: libx264<' in page
    assert "reaches libx264, libx265, libsvtav1, h264_nvenc, hevc_nvenc" in page  # qp
    assert "opens here: libx264, libx265, libsvtav1, h264_nvenc<" in page
    assert 'id="reach-rate_cap_pct"' not in page  # not an encoder key


def test_dashboard_says_which_capture_is_used_and_what_to_fix(browser, monkeypatch):
    import html

    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.delenv("HOST_CAPTURE_METHOD", raising=False)
    page = html.unescape(browser.get("/").content.decode())
    assert 'id="capture-status">using ' in page  # the backend a session would use, and why
    monkeypatch.setenv("HOST_CAPTURE_METHOD", "portal")  # nothing answers: said, with the fix
    page = html.unescape(browser.get("/").content.decode())
    assert "capture = portal: DBUS_SESSION_BUS_ADDRESS is not set" in page
    assert "To fix: fix the capture setting" in page and "Not usable:" not in page
