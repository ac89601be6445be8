"""The web console in a real headless Chromium: a signed-in page on a live host, and
screenshots kept as test artifacts (look at them: a layout bug passes every assertion).

Screenshots go to `$TEST_ARTIFACTS_DIR/console/` (default `test-artifacts/console/` in the
repository, ignored by git).
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

from tests.support.browser import ARGS, CHROMIUM
from tests.support.livehost import ROOT

USER, PASSWORD = "operator", "a long console password"
TIMEOUT_MS = 15_000


def artifacts_dir() -> Path:
    base = Path(os.environ.get("TEST_ARTIFACTS_DIR") or ROOT / "test-artifacts")
    out = base / "console"
    out.mkdir(parents=True, exist_ok=True)
    return out


def shot(page, name: str) -> Path:
    """A full-page PNG of what the operator sees now; returns its path."""
    path = artifacts_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def logged_in(page, user: str = USER, password: str = PASSWORD):
    """`page` signed in: through /welcome on a fresh host, else through /login."""
    page.goto("/")
    if page.url.endswith("/welcome"):
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", password)
        page.fill("input[name=confirm]", password)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/$"))
    elif "/login" in page.url:
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/$"))
    return page


@contextmanager
def browser_page(host):
    """A fresh headless Chromium page on `host` (TLS errors of its self-signed certificate
    ignored), closed with its browser and Playwright afterwards. Script exceptions and CSP
    refusals are collected in `page.script_errors` (a test asserts it stays empty)."""
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = None
    try:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(
            ignore_https_errors=True, base_url=host.url, viewport={"width": 1200, "height": 900}
        )
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.script_errors = []

        def console(msg):
            if msg.type == "error" and "Content Security Policy" in msg.text:
                page.script_errors.append(msg.text)

        page.on("console", console)
        page.on("pageerror", lambda exc: page.script_errors.append(str(exc)))
        yield page
    finally:
        if browser is not None:
            browser.close()
        pw.stop()
