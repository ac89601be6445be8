"""Console routes on the shared real host: tokens over TLS, the supervisor's telemetry sampler,
the redacted log and the v1 status and log pages."""

from __future__ import annotations

import re
import time

import pytest

pytestmark = pytest.mark.e2e


def test_token_lifecycle_over_tls(live_host, admin_auth):
    with live_host.client() as c:
        r = c.post(
            "/api/tokens", json={"name": "e2e-console", "scopes": ["logs:get"]}, auth=admin_auth
        )
        assert r.status_code == 200, r.text
        token = r.json()["token"]
        auth = {"Authorization": f"Bearer {token}"}
        assert c.get("/api/sessions", headers=auth).status_code == 200
        assert c.get("/api/tokens", headers=auth).status_code == 403
        listed = c.get("/api/tokens", auth=admin_auth).json()["tokens"]
        assert {"name": "e2e-console", "scopes": ["logs:get"]} in listed
        assert c.delete("/api/tokens/e2e-console", auth=admin_auth).status_code == 200
        assert c.get("/api/sessions", headers=auth).status_code == 401
        assert c.delete("/api/tokens/e2e-console", auth=admin_auth).status_code == 404


def test_supervisor_samples_telemetry(live_host, admin_auth):
    deadline = time.monotonic() + 15
    with live_host.client() as c:
        while True:
            body = c.get("/api/stream/telemetry", auth=admin_auth).json()
            cpu = body["telemetry"]["host_cpu_pct"]
            if cpu or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert cpu, "no telemetry sample within 15 s"
    assert all(0 <= v <= 100 for v in cpu)
    assert body["telemetry"]["host_ram_used_mb"][-1] > 0
    assert body["telemetry"]["window_s"] == 120


def test_logs_are_served_and_never_hold_the_tokens(live_host, admin_auth):
    with live_host.client() as c:
        # a failed bearer attempt carrying the real token in a bad header must not leak it
        c.get("/api/logs", headers={"Authorization": f"Bearer {live_host.mgmt_token}x"})
        text = c.get("/api/logs", auth=admin_auth)
        assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
        assert live_host.mgmt_token not in text.text
        assert live_host.plugin_token not in text.text
        page = c.get(
            "/api/v1/logs?limit=5", headers={"Authorization": f"Bearer {live_host.mgmt_token}"}
        )
        assert page.status_code == 200
        body = page.json()
        assert len(body["entries"]) <= 5 and body["dropped"] is False
        assert all(
            re.fullmatch(r"ERROR|WARN|INFO|DEBUG|TRACE", e["level"]) for e in body["entries"]
        )
    on_disk = (live_host.state_dir / "logs" / "host.log").read_text(errors="replace")
    assert live_host.mgmt_token not in on_disk


def test_status_and_update_status(live_host):
    with live_host.mgmt() as c:
        status = c.get("/api/v1/status")
        assert status.status_code == 200
        assert status.json()["active_sessions"] == 0
        update = c.get("/api/v1/update/status").json()
        assert update["apply"] == "manual" and update["current_version"].startswith("v")
