"""The example plugin on a real host, end to end: its wheel built by the test and installed into
the host's plugin environment, the runtime switched on, the plugin registers (plugins.changed
on SSE) and feeds the library, its UI answers through the console proxy in Chromium, `kill -9`
gets it restarted with a new pid, and the runtime switched off leaves no plugin process.
Screenshots: `tests.support.console_live.artifacts()` (plugins-page, plugins-ui)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from plugins import runner_control, wheel
from tests.support.console_live import console, shot

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXAMPLE = Path(__file__).resolve().parents[2] / "plugins" / "examples" / "desktop_folder"
INSTALL = """
import subprocess, sys
from plugins import env
python = env.ensure_env()
subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                "--no-index", sys.argv[1]], check=True, timeout=170)
"""
DESKTOP = """[Desktop Entry]
Type=Application
Name={name}
Exec={cmd} %U
"""


def _until(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} not met in {timeout} s")


def _plugins_changed(host, plugin_id: str, timeout: float = 30.0) -> dict | None:
    headers = {"Authorization": f"Bearer {host.mgmt_token}"}
    deadline = time.monotonic() + timeout
    with host.client(headers=headers) as c:
        try:
            with c.stream("GET", "/api/v1/events?since=0&kinds=plugins.*",
                          timeout=httpx.Timeout(timeout, read=timeout)) as r:  # fmt: skip
                assert r.status_code == 200
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        event = json.loads(line[5:])
                        if event.get("id") == plugin_id:
                            return event
                    if time.monotonic() > deadline:
                        break
        except httpx.ReadTimeout:
            pass
    return None


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_example_plugin_runs_registers_feeds_and_is_supervised(tmp_path, monkeypatch):
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "solitaire.desktop").write_text(DESKTOP.format(name="Solitaire", cmd="sol"))
    (apps / "chess.desktop").write_text(DESKTOP.format(name="Chess", cmd="gnome-chess"))
    (apps / "hidden.desktop").write_text(
        DESKTOP.format(name="Hidden", cmd="x") + "NoDisplay=true\n"
    )
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    built = wheel.build_wheel(EXAMPLE, tmp_path / "dist")
    monkeypatch.setenv("HOST_STATE_DIR", str(state))
    # The plugin environment is made and the wheel installed while the host starts (the host
    # does not look at it until the runtime is switched on).
    install = subprocess.Popen(
        [sys.executable, "-c", INSTALL, str(built)],
        env={**os.environ, "HOST_STATE_DIR": str(state)},
        cwd=EXAMPLE.parents[2],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    # the plugin is confined: the folder it reads is shown to it read-only (HOST_PLUGIN_READ_PATHS)
    env = {"DESKTOP_FOLDER_DIR": str(apps), "HOST_PLUGIN_READ_PATHS": str(apps)}
    with console(state_dir=state, env=env) as (host, page):
        out, _ = install.communicate(timeout=180)
        assert install.returncode == 0, out
        runner_control.request_rescan()
        with host.mgmt() as c:
            r = c.post("/api/v1/store/runtime", json={"enabled": True})
            assert r.status_code == 200 and r.json()["enabled"] is True

            event = _plugins_changed(host, "desktop-folder")
            assert event is not None, host.log_tail()
            listed = c.get("/api/v1/plugins").json()
            assert [p["id"] for p in listed] == ["desktop-folder"]
            assert "secret" not in json.dumps(listed)

            def entries():
                r = c.get("/api/v1/library", params={"provider": "desktop-folder"})
                return sorted(e["title"] for e in r.json()) if r.status_code == 200 else None

            assert _until(lambda: entries() == ["Chess", "Solitaire"], what="library entries")
            status = runner_control.status()["desktop-folder"]
            assert status["running"] and status["restarts"] == 0
            first_pid = status["pid"]

            # the console: the Plugins page and the plugin's UI through the proxy
            page.goto("/plugins")
            row = page.locator('#plugins tr[data-plugin="desktop-folder"]')
            expect(row.locator(".process")).to_contain_text(f"pid {first_pid}")
            expect(row.locator(".registered")).to_contain_text("Desktop folder")
            shot(page, "plugins-page")
            href = row.get_by_role("link", name="Open").get_attribute("href")
            page.goto(href)
            expect(page.locator("h1")).to_have_text("Desktop folder")
            expect(page.locator("body")).to_contain_text("Solitaire")
            shot(page, "plugins-ui")
            # the plugin refuses a caller without the secret (its port is loopback, but anyone
            # on the machine could try)
            port = listed[0]["ui"]["port"]
            assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 403

            # kill -9: restarted with a new pid within a few seconds
            os.kill(first_pid, 9)
            again = _until(
                lambda: (s := runner_control.status().get("desktop-folder", {})).get("running")
                and s.get("pid") != first_pid and s,
                timeout=15, what="restart after kill -9",
            )  # fmt: skip
            assert again["restarts"] == 1 and again["last_exit"] == -9

            # the new process registers again (a new UI port and secret: plugins.changed)
            _until(
                lambda: [p["ui"]["port"] for p in c.get("/api/v1/plugins").json()] not in
                ([port], []),
                timeout=15, what="re-registration after the restart",
            )  # fmt: skip

            # runtime off: the process goes (and deregisters on SIGTERM)
            r = c.post("/api/v1/store/runtime", json={"enabled": False})
            assert r.status_code == 200 and r.json()["enabled"] is False
            _until(lambda: _gone(again["pid"]), timeout=15, what="plugin process gone")
            _until(lambda: c.get("/api/v1/plugins").json() == [], timeout=15,
                   what="deregistered")  # fmt: skip
        assert re.search(r"plugin\.desktop-folder: desktop-folder: published 2 entries",
                         host.log_tail(400))  # fmt: skip
