"""The console dashboard's "Live sessions" table in a real headless Chromium against a real
host: a paired client launches an app (a real compat session: display, app process, armed
stream), the table shows it with its client, app, plane and state, and its End button ends
that session (DELETE /api/v1/session?id= with the operator's console login)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.compat.test_launch_control import KEYS, app_id, status_of
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import events, owned_processes, pair, wait_for
from tests.support.browser import ARGS, CHROMIUM

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def shot_path(tmp_path: Path, name: str) -> Path:
    """Screenshots go to $CONSOLE_SHOTS when set (to look at them), else the test's tmp."""
    folder = Path(os.environ.get("CONSOLE_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def test_the_dashboard_lists_a_live_session_and_ends_it(stream_host, tmp_path):
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="9753", name="Living room")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = browser.new_context(ignore_https_errors=True, base_url=host.url,
                                          viewport={"width": 1280, "height": 900})  # fmt: skip
            context.set_default_timeout(15_000)
            page = context.new_page()
            page.goto("/login")
            page.fill("input[name=username]", ADMIN_USER)
            page.fill("input[name=password]", ADMIN_PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"/$"))
            expect(page.locator("#no-sessions")).to_be_visible()

            # A real session: armed (no video client yet) until the arm timeout (20 s).
            xml = ml.https("launch", f"appid={app_id(ml, 'Probe')}&mode=1280x720x60&{KEYS}")
            assert status_of(xml) == 200, xml
            with host.mgmt() as c:
                (live,) = c.get("/api/v1/status").json()["sessions"]
            page.goto("/")
            row = page.locator(f"#live-sessions tr[data-session='{live['id']}']")
            expect(row).to_be_visible()
            cells = row.locator("td").all_inner_texts()
            assert cells[:5] == ["Living room", "Probe", "compat", "1280x720@60", "armed"], cells
            expect(page.locator("#no-sessions")).to_be_hidden()
            page.screenshot(path=str(shot_path(tmp_path, "dashboard-live-sessions.png")),
                            full_page=True)  # fmt: skip

            page.once("dialog", lambda d: d.accept())
            row.get_by_role("button", name="End").click()
            expect(page.locator("#flash")).to_contain_text("ended")
            expect(row).to_have_count(0)
            expect(page.locator("#no-sessions")).to_be_visible()
        finally:
            browser.close()
    with host.mgmt() as c:
        assert c.get("/api/v1/status").json()["sessions"] == []
    ended = events(host, "session.*", lambda ev: any(e["kind"] == "session.ended" for e in ev))
    (mine,) = [e for e in ended if e["kind"] == "session.ended"
               and e["session"]["id"] == live["id"]]  # fmt: skip
    assert mine["reason"] == "api"  # ended by the button, not by the arm timeout
    assert wait_for(lambda: not owned_processes(host.state_dir), 10)
