"""A real host with a signed-in headless Chromium on its console, for the console pages'
browser tests; screenshots go to `HOST_TEST_ARTIFACTS` (default: the system temp dir)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from tests.support.browser import ARGS, CHROMIUM
from tests.support.livehost import ROOT, running_host

USER, PASSWORD = "operator", "a long console password"
# Generous: a CI box may be busy (a page's first load took over 15 s at load average 20).
TIMEOUT_MS = 30_000


def artifacts() -> Path:
    path = Path(os.environ.get("HOST_TEST_ARTIFACTS") or tempfile.gettempdir()) / "console"
    path.mkdir(parents=True, exist_ok=True)
    return path


def shot(page, name: str) -> Path:
    """A full-page screenshot, for the reviewer to look at."""
    path = artifacts() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def host_shell(host, code: str) -> str:
    """Run Python in `manage.py shell` on the test host's state dir (another process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "REDIS_URL"):
        env.pop(name, None)
    env.update({"HOST_STATE_DIR": str(host.state_dir), "HOST_PORT": str(host.base_port),
                "DJANGO_SETTINGS_MODULE": "hostmgmt.settings", **host.extra_env})  # fmt: skip
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), "shell", "-c", code],
                          cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextmanager
def console(**host_kwargs):
    """(host, page): a host with admin credentials and a page signed in to its console."""
    expect.set_options(timeout=TIMEOUT_MS / 2)
    with running_host(admin=(USER, PASSWORD), **host_kwargs) as host:
        pw = sync_playwright().start()
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(ignore_https_errors=True, base_url=host.url,
                                          viewport={"width": 1280, "height": 860})  # fmt: skip
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            page.goto("/login")
            page.fill("input[name=username]", USER)
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"/$"))
            try:
                yield host, page
            finally:
                context.close()
                browser.close()
        finally:
            pw.stop()
