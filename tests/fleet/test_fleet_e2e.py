"""Two real hosts on loopback: one joins the other as a member over the member's own v1 API.

The member mints a fleet token (API and `manage.py mint_fleet_token`) and shows its identity
(`manage.py fleet_identity`); the fleet host refuses a wrong fingerprint and the member's
plugin and management tokens, accepts the fleet token, refreshes the member's version and
sessions, shows it on its Fleet page (screenshots, light and dark), reports a revoked token,
and forgets the member and its token on removal. No token reaches a page or a log. A stand-in
member (tests/fleet/fake_member.py, real TLS) with a live session: the Fleet page lists the
session, its capacity and relay state, and its End button ends the session on the member.
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import subprocess
import sys
import time

import pytest
from playwright.sync_api import expect

from access import mgmt
from tests.fleet import fake_member
from tests.support.console_live import console, shot
from tests.support.livehost import ROOT, running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
MEMBERS = "/api/v1/fleet/members"


def manage(host, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.pop("REDIS_URL", None)
    env.update({"HOST_STATE_DIR": str(host.state_dir), "HOST_PORT": str(host.base_port),
                "DJANGO_SETTINGS_MODULE": "hostmgmt.settings"})  # fmt: skip
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def served_fingerprint(host) -> str:
    pem = ssl.get_server_certificate(("127.0.0.1", host.mgmt_port))
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()


def wait_member(fleet, member_id, check, timeout=30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        with fleet.mgmt() as c:
            shown = c.get(f"/api/v1/fleet/members/{member_id}").json()
        if check(shown) or time.monotonic() > deadline:
            return shown
        time.sleep(0.5)


def test_two_hosts_join_refresh_and_part(tmp_path):
    with running_host() as member, console(env={"HOST_FLEET_REFRESH_S": "1"}) as (fleet, page):
        # the member: its identity and a fleet token
        ident = manage(member, "fleet_identity")
        assert ident.returncode == 0, ident.stderr
        fingerprint = served_fingerprint(member)
        assert f"fingerprint {fingerprint}" in ident.stdout
        assert f":{member.mgmt_port}" in ident.stdout
        minted = manage(member, "mint_fleet_token", "cli-made")
        assert minted.returncode == 0 and len(minted.stdout.strip()) == 64, minted.stderr
        with member.mgmt() as c:
            r = c.post("/api/v1/fleet/tokens", json={"name": "fleet-host"})
            assert r.status_code == 201
            token = r.json()["token"]
            names = {t["name"] for t in c.get("/api/v1/fleet/tokens").json()}
            assert names == {"cli-made", "fleet-host"}
        # the fleet token's reach on the real member
        headers = {"Authorization": f"Bearer {token}"}
        with member.client(headers=headers) as c:
            assert c.get("/api/v1/status").status_code == 200
            assert c.get("/api/v1/fleet/whoami").json()["role"] == "fleet"
            refused = c.get("/api/v1/host/config")
            assert refused.status_code == 403
            assert refused.json() == {"error": mgmt.FLEET_FORBIDDEN}
            assert c.get("/api/v1/fleet/tokens").status_code == 403
            with c.stream("GET", "/api/v1/events") as events:
                assert events.status_code == 200
                assert events.headers["content-type"].startswith("text/event-stream")

        url = member.url
        with fleet.mgmt() as c:
            wrong = c.post(MEMBERS, json={"url": url, "token": token, "fingerprint": "0" * 64})
            assert wrong.status_code == 422 and "nothing was sent" in wrong.json()["error"]
            for other, words in ((member.mgmt_token, "over-scoped"),
                                 (member.plugin_token, "under-scoped"),
                                 ("5" * 64, "refused the token")):  # fmt: skip
                r = c.post(MEMBERS, json={"url": url, "token": other, "fingerprint": fingerprint})
                assert r.status_code == 422 and words in r.json()["error"], r.text
                assert other not in r.text
            own = served_fingerprint(fleet)
            r = c.post(MEMBERS, json={"url": fleet.url, "token": token, "fingerprint": own})
            assert r.status_code == 400 and "itself" in r.json()["error"]
            joined = c.post(MEMBERS, json={"url": url, "token": token, "fingerprint": fingerprint})
            assert joined.status_code == 201, joined.text
            member_id = joined.json()["id"]
            assert token not in joined.text
            assert c.get("/api/v1/fleet/members").status_code == 200

        with member.mgmt() as c:
            version = c.get("/api/v1/host").json()["version"]
        shown = wait_member(fleet, member_id, lambda m: m["reachable"])
        assert shown["reachable"] and shown["version"] == version, shown
        assert shown["live_sessions"] == 0 and shown["displays"]["total"] >= 0
        assert shown["refresh_ms"] is not None and shown["name"]

        shown = wait_member(
            fleet, member_id, lambda m: (m["relay"] or {}).get("state") == "connected"
        )
        assert shown["relay"] == {"state": "connected", "error": ""}, shown
        assert shown["max_sessions"] >= 1 and shown["free_slots"] == shown["max_sessions"]
        assert len(shown["titles"]) >= 1 and shown["encoder"], shown  # the Desktop at least

        # a stand-in member with one live session: listed on the page, ended from it
        stand_in_token = "ab" * 32
        stand_in = fake_member.start(tmp_path, stand_in_token, seed=9, name="den")
        try:
            with fleet.mgmt() as c:
                r = c.post(MEMBERS, json={"url": stand_in.url, "token": stand_in_token,
                                          "fingerprint": stand_in.fingerprint})  # fmt: skip
                assert r.status_code == 201, r.text
                stand_in_id = r.json()["id"]
            shown = wait_member(fleet, stand_in_id, lambda m: m["live_sessions"] == 1)
            assert shown["free_slots"] == 1 and shown["encoder"] == "nvenc", shown
            assert [t["name"] for t in shown["titles"]] == ["Desktop", "Dota 2"], shown
            # it serves no event stream: its relay backs off and says why
            shown = wait_member(fleet, stand_in_id, lambda m: m["relay"] and m["relay"]["error"])
            assert shown["relay"]["state"] == "backing_off", shown

            page.goto("/fleet")
            expect(
                page.locator(f"#members tr[data-id='{member_id}'] .badge.ok").first
            ).to_be_visible()
            stand_in_row = page.locator(f"#members tr[data-id='{stand_in_id}']")
            expect(stand_in_row).to_contain_text("1 live, 1 of 2 free")
            expect(stand_in_row).to_contain_text("nvenc, 2 titles")
            expect(stand_in_row).to_contain_text("events: retrying")
            session = page.locator(
                f"tr.member-sessions[data-member='{stand_in_id}'] tr[data-session='0000abcd']"
            )
            expect(session).to_contain_text("Den TV")
            expect(session).to_contain_text("Dota 2")
            for theme in ("light", "dark"):
                page.emulate_media(color_scheme=theme)
                shot(page, f"fleet-{theme}")
            page.emulate_media(color_scheme="light")
            html = page.content()
            assert token not in html and fingerprint in html and stand_in_token not in html

            page.once("dialog", lambda d: d.accept())
            session.get_by_role("button", name="End").click()
            expect(page.locator("#flash")).to_contain_text("Ended the session on den")
            assert stand_in.ended == ["0000abcd"]
            ends = [a for p, a in stand_in.seen if p == "DELETE /api/v1/session?id=0000abcd"]
            assert ends == [f"Bearer {stand_in_token}"]
            expect(page.locator(f"tr.member-sessions[data-member='{stand_in_id}']")).to_have_count(
                0
            )
            with fleet.mgmt() as c:
                assert c.delete(f"{MEMBERS}/{stand_in_id}").status_code == 204
        finally:
            stand_in.stop()

        # revoked on the member: the fleet host says so
        with member.mgmt() as c:
            assert c.delete("/api/v1/fleet/tokens/fleet-host").status_code == 204
        shown = wait_member(fleet, member_id, lambda m: not m["reachable"])
        assert not shown["reachable"] and "401" in shown["error"], shown

        with fleet.mgmt() as c:
            assert c.delete(f"/api/v1/fleet/members/{member_id}").status_code == 204
            assert c.get(f"/api/v1/fleet/members/{member_id}").status_code == 404
        kept = json.loads((fleet.state_dir / "fleet" / "tokens.json").read_text())
        assert str(member_id) not in kept

        for host in (fleet, member):
            logs = host.log_path.read_text(errors="replace")
            for path in (host.state_dir / "logs").glob("*.log*"):
                logs += path.read_text(errors="replace")
            assert token not in logs
        fleet_logs = fleet.log_path.read_text(errors="replace")
        for path in (fleet.state_dir / "logs").glob("*.log*"):
            fleet_logs += path.read_text(errors="replace")
        assert member.mgmt_token not in fleet_logs and member.plugin_token not in fleet_logs
