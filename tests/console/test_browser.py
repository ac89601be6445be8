"""The web console in a real headless Chromium against a real host of its own (first run).

Covers what an operator does: create credentials at /welcome, log in, fix a config value the
host refuses, watch a live event arrive, unpair a client, mint and revoke a token, open a
session's chart and read the log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from tests.support.browser import ARGS, CHROMIUM
from tests.support.livehost import ROOT, start_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

USER, PASSWORD = "operator", "a long console password"
TIMEOUT_MS = 15_000


def host_manage(host, *args: str) -> str:
    """Run a management command against the test host's state dir (another process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.update({"HOST_STATE_DIR": str(host.state_dir), "HOST_PORT": str(host.base_port)})
    env["DJANGO_SETTINGS_MODULE"] = "hostmgmt.settings"
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


SEED = textwrap.dedent(
    """
    from datetime import timedelta
    from django.utils import timezone
    from pairing.models import PairedClient
    from streaming import history
    PairedClient.objects.create(fingerprint="ab" * 32, cert_pem="-", name="living-room-tv")
    now = timezone.now()
    history.record_session(
        t_start=now - timedelta(minutes=30), t_end=now, app_name="Desktop",
        client_name="living-room-tv", codec="hevc", width=1920, height=1080, fps=60,
        avg_bitrate_kbps=18000, avg_rtt_ms=3.5, avg_encode_ms=2.1,
        samples=[{"t": i, "bitrate_kbps": 17000 + 50 * i, "rtt_ms": 3 + i % 3,
                  "encode_ms": 2} for i in range(60)],
    )
    """
)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    h = start_host(state_dir=tmp_path_factory.mktemp("console-host"))
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    context = browser.new_context(ignore_https_errors=True, base_url=h.url)
    context.set_default_timeout(TIMEOUT_MS)
    h.page = context.new_page()
    try:
        yield h
    finally:
        context.close()
        browser.close()
        pw.stop()
        h.stop()


def signed_in(host):
    """The shared page, signed in (through /welcome on a fresh host, else /login)."""
    page = host.page
    page.goto("/")
    if page.url.endswith("/welcome"):
        first_run(page)
    elif "/login" in page.url:
        page.fill("input[name=username]", USER)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/$"))
    return page


def first_run(page):
    page.fill("input[name=username]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=confirm]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))


def test_first_run_welcome_leads_to_the_dashboard(host):
    page = host.page
    page.goto("/")
    assert page.url.endswith("/welcome")
    page.fill("input[name=username]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=confirm]", PASSWORD + "typo")
    page.click("button[type=submit]")
    assert "do not match" in page.inner_text("[role=alert]")
    first_run(page)
    assert page.locator("nav[aria-label=Console]").is_visible()
    expect(page.locator("[data-field=active_sessions]")).to_have_text("0")
    response = page.goto("/")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp


def test_login_page_refuses_a_wrong_password_then_lets_the_admin_in(host):
    signed_in(host)
    browser = host.page.context.browser
    context = browser.new_context(ignore_https_errors=True, base_url=host.url)
    try:
        page = context.new_page()
        page.goto("/tokens")
        assert "/login?next=/tokens" in page.url
        page.fill("input[name=username]", USER)
        page.fill("input[name=password]", "wrong")
        page.click("button[type=submit]")
        assert "Wrong username or password" in page.inner_text("[role=alert]")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/tokens$"))
        page.click("form.logout button")
        page.wait_for_url(re.compile(r"/login$"))
    finally:
        context.close()


def test_config_shows_the_error_next_to_the_field_then_saves_a_valid_value(host):
    page = signed_in(host)
    page.goto("/config")
    row = page.locator(".config-row[data-key=rate_cap_pct]")
    assert "restart" in row.inner_text()
    row.locator("input").fill("20")
    page.click("#config-form button[type=submit]")
    error = page.locator(".config-row[data-key=rate_cap_pct] .field-error")
    assert "50 to 95" in error.inner_text()
    conf = host.state_dir / "host.conf"
    assert not conf.exists() or "rate_cap_pct" not in conf.read_text(errors="replace")
    page.locator(".config-row[data-key=rate_cap_pct] input").fill("70")
    page.click("#config-form button[type=submit]")
    assert "Saved 1 value" in page.inner_text("[role=status].success")
    assert page.locator(".config-row[data-key=rate_cap_pct] input").input_value() == "70"
    assert "rate_cap_pct = 70" in (host.state_dir / "host.conf").read_text()


def test_config_disables_refused_keys_and_refused_values_with_the_reason(host, tmp_path):
    """A refused key is a disabled control holding its default, its reason beside it; a value
    the host cannot do is a disabled option of a key that acts."""
    from hostconfig.schema import CAPTURE_UNSUPPORTED, KEYS

    page = signed_in(host)
    page.goto("/config")
    perf = page.locator("#cfg-perf")
    expect(perf).to_be_disabled()
    assert perf.locator("option").all_inner_texts() == ["default (false)"]
    assert KEYS["perf"].refused_all in page.inner_text("#mark-perf")
    packetsize = page.locator("#cfg-packetsize")
    expect(packetsize).to_be_disabled()
    assert packetsize.input_value() == "1024"
    assert KEYS["packetsize"].refused_all in page.inner_text("#mark-packetsize")
    # An acting key: its working values are enabled, the refused ones disabled with the reason.
    capture = page.locator("#cfg-capture_method")
    expect(capture).to_be_enabled()
    expect(capture.locator("option[value=x11]")).to_be_enabled()
    kms = capture.locator("option[value=kms]")
    expect(kms).to_be_disabled()
    assert CAPTURE_UNSUPPORTED["kms"] in kms.inner_text()
    # Every refused key of the page is disabled; no enabled control of a refused key is left.
    refused = [n for n, s in KEYS.items() if s.refused_all and not s.file_only]
    for name in refused:
        expect(page.locator(f"#cfg-{name}")).to_be_disabled()
    enabled = page.locator(".config-row:has(.mark.refused) :is(select, input):enabled")
    assert enabled.count() == 0
    # The form still saves an acting key beside the disabled ones, which send nothing.
    capture.select_option("x11")
    page.click("#config-form button[type=submit]")
    assert "Saved 1 value" in page.inner_text("[role=status].success")
    conf = (host.state_dir / "host.conf").read_text()
    assert "capture_method = x11" in conf and "perf" not in conf
    page.locator(".config-row[data-key=perf]").scroll_into_view_if_needed()
    shot = Path(os.environ.get("TEST_ARTIFACTS", tmp_path)) / "config-refused.png"
    page.screenshot(path=str(shot), full_page=False)


def test_a_live_event_arrives_in_the_dashboard(host):
    page = signed_in(host)
    page.goto("/")
    expect(page.locator("#event-state")).to_have_text("live")
    payload = json.dumps(
        {"session": {"id": 7, "client": "browser-test", "mode": "1920x1080@60", "hdr": False}}
    )
    host_manage(host, "emit_event", "session.started", payload)
    item = page.locator("li.event[data-kind='session.started']").first
    item.wait_for()
    assert "browser-test" in item.inner_text()


def test_unpair_a_client_and_see_the_session_chart(host):
    page = signed_in(host)
    host_manage(host, "shell", "-c", SEED)
    page.goto("/clients")
    row = page.locator("#clients tbody tr", has_text="living-room-tv")
    row.wait_for()
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button.danger").click()
    page.locator("#no-clients").wait_for()
    assert page.locator("#clients tbody tr").count() == 0

    page.goto("/sessions")
    session = page.locator("#sessions tbody tr", has_text="Desktop")
    session.click()
    page.locator("#session-chart").wait_for()
    assert page.locator("#chart-empty").is_hidden()
    painted = page.evaluate(
        "() => { const c = document.getElementById('chart');"
        " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }"
    )
    assert painted > 500  # lines were drawn, not just the frame


def test_mint_use_and_revoke_a_token_in_the_browser(host):
    page = signed_in(host)
    page.goto("/tokens")
    page.fill("#mint input[name=name]", "grafana")
    page.check("#mint input[value='logs:get']")
    page.click("#mint button[type=submit]")
    expect(page.locator("#minted-token")).to_have_text(re.compile(r"^[0-9a-f]{64}$"))
    token = page.locator("#minted-token").inner_text()
    client = httpx.Client(base_url=host.url, verify=host.ssl_context(), timeout=10)
    auth = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/stream/telemetry", headers=auth).status_code == 200
    row = page.locator("#tokens tbody tr[data-name=grafana]")
    assert "logs:get" in row.inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button").click()
    page.locator("#no-tokens").wait_for()
    assert client.get("/api/stream/telemetry", headers=auth).status_code == 401


def test_logs_and_apps_pages_render(host):
    page = signed_in(host)
    page.goto("/logs")
    expect(page.locator("#log")).to_contain_text("started")
    text = page.inner_text("#log")
    assert "started" in text
    assert PASSWORD not in text
    page.goto("/apps")
    expect(page.locator("#apps tbody tr, #no-apps:not([hidden])").first).to_be_visible()


def test_the_dashboard_says_what_capture_a_session_gets_and_what_to_fix(host, tmp_path):
    page = signed_in(host)
    page.goto("/config")
    capture = page.locator("#cfg-capture_method")
    capture.select_option("portal")  # no session bus here: nothing answers
    page.click("#config-form button[type=submit]")
    assert "Saved" in page.inner_text("[role=status].success")
    try:
        page.goto("/")
        status = page.locator("#capture-status")
        expect(status).to_be_visible()
        text = status.inner_text()
        assert "capture = portal: DBUS_SESSION_BUS_ADDRESS is not set" in text, text
        assert "To fix: fix the capture setting" in text and "Not usable" not in text, text
        assert status.locator(".warning").is_visible()
        shot = Path(os.environ.get("TEST_ARTIFACTS", tmp_path)) / "dashboard-capture.png"
        page.screenshot(path=str(shot), full_page=False)
    finally:
        page.goto("/config")
        page.locator("#cfg-capture_method").select_option("auto")
        page.click("#config-form button[type=submit]")
    page.goto("/")
    assert page.locator("#capture-status").inner_text().startswith("using ")


def test_config_refuses_an_encoder_this_machine_cannot_open_with_the_reason(host, tmp_path):
    """`encoder = vaapi`: this PyAV build has no VA-API encoder, so the form says so beside the
    field and writes nothing (a session would refuse to stream rather than encode in software)."""
    page = signed_in(host)
    page.goto("/config")
    page.locator("#cfg-encoder").select_option("vaapi")
    page.click("#config-form button[type=submit]")
    error = page.locator(".config-row[data-key=encoder] .field-error")
    assert "vaapi: this PyAV/FFmpeg build has no h264_vaapi/hevc_vaapi/av1_vaapi encoder" in (
        error.inner_text()
    )
    conf = host.state_dir / "host.conf"
    assert not conf.exists() or "encoder" not in conf.read_text(errors="replace")
    page.locator(".config-row[data-key=encoder]").scroll_into_view_if_needed()
    shot = Path(os.environ.get("TEST_ARTIFACTS", tmp_path)) / "config-encoder-refused.png"
    page.screenshot(path=str(shot), full_page=False)
    page.locator("#cfg-encoder").select_option("software")
    page.click("#config-form button[type=submit]")
    assert "Saved 1 value" in page.inner_text("[role=status].success")
    assert "encoder = software" in conf.read_text()
