"""The plugin store on a real host (runhost: daphne over TLS, Redis, Celery) with a real HTTPS
catalog server and test CA: a source added through the API, a tampered catalog and a tampered
wheel refused, the plugin installed from the console's Store page in headless Chromium (the
job followed to `done`, the package in the host's plugin environment, `store.changed` on the
event stream), then uninstalled cleanly."""

from __future__ import annotations

import json
import time

import httpx
import psutil
import pytest
from playwright.sync_api import expect

from plugins import env
from plugins.store import signing
from tests.plugins import store_support as ss
from tests.support.consolepage import PASSWORD, USER, browser_page, logged_in, shot
from tests.support.livehost import running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _job(api, ref, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = api.get(f"/api/v1/store/jobs/{ref}").json()
        if job["state"] != "running":
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {ref} still running: {job}")


def _packages(host, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(host.state_dir))
    return {(p.pkg, p.version) for p in env.installed()}


def _store_changed_count(host) -> int:
    """store.changed events the host's replay ring holds, read through the SSE route (the
    replay comes at once; the stream then idles until the read timeout ends it)."""
    seen = 0
    headers = {"Authorization": f"Bearer {host.mgmt_token}", "Accept": "text/event-stream"}
    params = {"since": "0", "kinds": "store.changed"}
    with httpx.Client(base_url=host.url, verify=host.ssl_context(), timeout=3) as c:
        try:
            with c.stream("GET", "/api/v1/events", params=params, headers=headers) as r:
                assert r.status_code == 200
                for line in r.iter_lines():
                    seen += line.startswith("event: store.changed")
        except httpx.ReadTimeout:
            pass
    return seen


@pytest.mark.timeout(300)
def test_store_install_from_console_and_refusals(tmp_path, monkeypatch):
    ca, cert, key_pem = ss.make_ca(tmp_path)
    server = ss.FileServer(cert, key_pem)
    key = signing.new_private_key()
    wheel = ss.build_plugin(tmp_path)
    good_wheel = wheel.read_bytes()
    server.files["/w/" + wheel.name] = good_wheel
    body, sig = ss.signed_catalog([ss.entry(wheel, "w/" + wheel.name)], key)
    server.files.update({"/catalog.json": body, "/catalog.json.sig": sig})
    host_env = {"HOST_STORE_CA_FILE": str(ca),
                "HOST_STORE_BUILTIN_URL": "https://127.0.0.1:9/catalog.json"}  # fmt: skip
    try:
        with running_host(admin=(USER, PASSWORD), env=host_env) as host, host.mgmt() as api:
            r = api.put(
                "/api/v1/store/sources/local",
                json={"url": server.base + "/catalog.json", "public_key": ss.public_key(key)},
            )
            assert r.status_code == 204, r.text
            cat = api.get("/api/v1/store/catalog").json()
            assert [p["id"] for p in cat["plugins"]] == ["hello"]

            # A tampered catalog: its entries vanish, the source says why.
            server.files["/catalog.json"] = body.replace(b'"tests"', b'"evil"')
            cat = api.post("/api/v1/store/refresh").json()
            local = next(s for s in cat["sources"] if s["name"] == "local")
            assert cat["plugins"] == [] and "signature does not verify" in local["error"]
            server.files["/catalog.json"] = body
            assert api.post("/api/v1/store/refresh").json()["plugins"]

            # A tampered wheel: the job fails at verifying, the environment is untouched.
            before = _packages(host, monkeypatch)
            server.files["/w/" + wheel.name] = good_wheel[:-10] + b"0123456789"
            ref = api.post("/api/v1/store/install", json={"source": "local", "id": "hello"})
            assert ref.status_code == 202, ref.text
            job = _job(api, ref.json()["job"])
            assert job["state"] == "failed" and "differs from the catalog" in job["error"]
            assert _packages(host, monkeypatch) == before
            server.files["/w/" + wheel.name] = good_wheel

            # With the runner on, the job's health check waits for the real runner to run it.
            r = api.post("/api/v1/store/runtime", json={"enabled": True})
            assert r.status_code == 200 and r.json()["enabled"], r.text

            # The operator installs it from the Store page and watches the job end.
            with browser_page(host) as page:
                page.set_default_timeout(60_000)  # a loaded 2-core machine: login took > 15 s
                logged_in(page)
                page.goto("/store")
                row = page.locator("#catalog tr[data-id=hello]")
                expect(row).to_contain_text("external")
                row.get_by_role("button", name="Install Host-Plugin-Hello").click()
                expect(page.locator("#job-state")).to_have_attribute(
                    "data-state", "done", timeout=120_000
                )
                expect(page.locator("#installed tr[data-pkg=host-plugin-hello]")).to_be_visible()
                shot(page, "store-installed")
                assert page.script_errors == []
            assert ("host-plugin-hello", "1.0.0") in _packages(host, monkeypatch)
            rows = api.get("/api/v1/store/installed").json()
            assert [(r["pkg"], r["tier"], r["source"]) for r in rows] == [
                ("host-plugin-hello", "external", "local")
            ]
            done = api.get("/api/v1/store/jobs").json()[-1]
            runs = [ln for ln in done["log"] if ln.startswith("hello runs (pid ")]
            assert done["state"] == "done" and runs, done["log"]
            pid = int(runs[0].removeprefix("hello runs (pid ").rstrip(")"))
            assert psutil.pid_exists(pid)
            # Source put, two refreshes, the failed job, the runtime switch and the install job.
            assert _store_changed_count(host) >= 6

            ref = api.post("/api/v1/store/uninstall", json={"pkg": "host-plugin-hello"})
            assert ref.status_code == 202
            job = _job(api, ref.json()["job"])
            assert job["state"] == "done", json.dumps(job)
            assert _packages(host, monkeypatch) == before
            assert api.get("/api/v1/store/installed").json() == []
            # The runner stops the uninstalled plugin.
            deadline = time.monotonic() + 20
            while psutil.pid_exists(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    finally:
        server.close()
