"""The library on a real host (runhost: daphne over TLS, Redis, Celery) with fixture stores.

Own host: the scanner roots, the art CDN and the cover host point at this module's fixtures.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.library import stores
from tests.support.livehost import start_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def lib_host(tmp_path_factory):
    sandbox = tmp_path_factory.mktemp("library-e2e")
    base = sandbox / "stores"
    base.mkdir()
    stores.make_steam(base, {570: "Dota 2"}, {292030: "The Witcher 3: Wild Hunt"})
    stores.make_heroic(base, {"Fortnite": "Fortnite"})
    stores.make_lutris(base, [(7, "Diablo II", 1)])
    cdn = stores.CDN()
    cdn.files["/steam/apps/570/header.jpg"] = stores.jpeg_bytes(color=(0, 200, 0))
    cdn.files["/steam/apps/292030/logo.png"] = stores.png_bytes()
    cdn.files["/covers/c.jpg"] = stores.jpeg_bytes()
    env = {
        **stores.store_env(base),
        "HOST_ART_CDN_URL": cdn.url,
        "HOST_COVER_URL_PREFIX": cdn.url + "/covers/",
        "HOST_LIBRARY_POLL_S": "1",
        "HOST_ART_FETCH_TIMEOUT_S": "5",
    }
    host = start_host(state_dir=sandbox / "state", env=env)
    try:
        host.set_first_admin(ADMIN_USER, ADMIN_PASSWORD)
        host.sandbox, host.stores, host.cdn = sandbox, base, cdn
        yield host
    finally:
        host.stop()
        cdn.close()


def _wait_for(fn, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError("condition not met in time")


def _ids(c):
    r = c.get("/api/v1/library")
    assert r.status_code == 200
    return {e["id"] for e in r.json()}


def test_fixture_steam_library_shows_up_with_working_art(lib_host):
    with lib_host.mgmt() as c:
        _wait_for(lambda: {"steam:570", "steam:292030", "lutris:7"} <= _ids(c))
        entry = next(e for e in c.get("/api/v1/library").json() if e["id"] == "steam:570")
        header = c.get(entry["art"]["header"])
        assert header.status_code == 200 and header.headers["content-type"] == "image/jpeg"
        assert header.content.startswith(b"\xff\xd8\xff")
        logo = c.get("/api/v1/library/art/steam:292030/logo")
        assert logo.status_code == 200 and logo.content.startswith(b"\xff\xd8\xff")
        assert c.get("/api/v1/library/art/steam:292030/hero").status_code == 404
        assert c.get("/api/v1/library/art/lutris:7/portrait").status_code == 404
    with lib_host.client() as anon:
        assert anon.get("/api/v1/library/art/steam:570/header").status_code == 401


def test_the_start_rescan_runs_once_per_host_not_once_per_worker(lib_host):
    """Both workers (the shared one and the hooks one) are up; one start rescan was queued."""
    log = lib_host.log_path

    def both_ready():
        text = log.read_text(errors="replace")
        return "celery.apps.worker: host-" in text and "celery.apps.worker: hooks-" in text

    _wait_for(both_ready)
    time.sleep(1.0)  # a rescan queued from a worker's start would be received by now
    received = re.findall(r"Task library\.tasks\.rescan_all\[\S+\] received", log.read_text())
    assert len(received) == 1, received


def test_store_change_is_picked_up_by_the_poller(lib_host):
    stores.write_manifest(lib_host.stores / "SteamLibrary2", 413150, "Stardew Valley")
    with lib_host.mgmt() as c:
        _wait_for(lambda: "steam:413150" in _ids(c))
        r = c.post("/api/v1/library/scan")
        assert r.status_code == 202


def test_custom_entry_with_prep_round_trips(lib_host):
    body = {"title": "Retro", "platform": "SNES", "prep": [{"do": "echo a", "undo": "echo b"}]}
    with lib_host.mgmt() as c:
        r = c.post("/api/v1/library/custom", json=body)
        assert r.status_code == 201
        cid = r.json()["id"]
        one = c.get(f"/api/v1/library/custom/{cid}").json()
        assert one["prep"] == body["prep"] and one["platform"] == "SNES"
        listed = c.get("/api/v1/library", params={"platform": "snes"}).json()
        assert [e["id"] for e in listed] == [f"custom:{cid}"] and "prep" not in listed[0]
    with lib_host.client(headers={"Authorization": f"Bearer {lib_host.plugin_token}"}) as p:
        assert p.get(f"/api/v1/library/custom/{cid}").status_code == 403
        assert p.get("/api/v1/library").status_code == 200


def test_library_changes_reach_the_event_stream(lib_host):
    seen = []
    with (
        lib_host.mgmt() as c,
        c.stream("GET", "/api/v1/events", params={"since": 0, "kinds": "library.*"}) as s,
    ):
        assert s.status_code == 200
        with lib_host.mgmt() as writer:
            assert (
                writer.post("/api/v1/library/custom", json={"title": "Evented"}).status_code == 201
            )
        for line in s.iter_lines():
            if line.startswith("data:"):
                seen.append(json.loads(line[5:]))
                if any(e.get("source") == "manual" for e in seen):
                    break
    assert {e["kind"] for e in seen} == {"library.changed"}
    assert {e.get("source") for e in seen} >= {"manual", "steam"}


def test_apps_catalog_over_the_admin_api_with_csrf(lib_host, admin_auth):
    with lib_host.client(auth=admin_auth) as c:
        assert [a["name"] for a in c.get("/api/apps").json()["apps"]] == ["Desktop"]
        evil = {"Origin": "https://evil.example"}
        r = c.post("/api/apps", json={"index": -1, "name": "Game"}, headers=evil)
        assert r.status_code == 403
        token = c.get("/api/csrf-token").json()["csrf_token"]
        r = c.post(
            "/api/apps",
            json={"index": -1, "name": "Game", "cmd": "game"},
            headers={**evil, "X-CSRF-Token": token},
        )
        assert r.status_code == 200, r.text
        r = c.post(
            "/api/covers/upload", json={"key": "c", "url": lib_host.cdn.url + "/covers/c.jpg"}
        )
        assert r.status_code == 200, r.text
        r = c.post("/api/apps", json={"index": 1, "name": "Game", "image-path": r.json()["path"]})
        assert r.status_code == 200
        cover = c.get("/api/covers/1")
        assert cover.status_code == 200 and cover.headers["content-type"] == "image/png"
        # a hand edit is what the API serves next
        path = lib_host.state_dir / "apps.json"
        doc = json.loads(path.read_text())
        doc["apps"].append({"name": "Hand", "cmd": "x"})
        path.write_text(json.dumps(doc))
        assert "Hand" in [a["name"] for a in c.get("/api/apps").json()["apps"]]
        assert c.delete("/api/apps/2").status_code == 200
        assert c.delete("/api/apps/x").status_code == 404


def test_hostile_input_writes_nothing_outside_the_state_dir(lib_host, admin_auth):
    before = _snapshot(lib_host.sandbox, lib_host.state_dir)
    png = base64.b64encode(stores.png_bytes()).decode()
    with lib_host.client(auth=admin_auth) as c:
        for key in ("../../escape", "/tmp/escape", "a/../../../escape", "x\x00y", ".."):
            r = c.post("/api/covers/upload", json={"key": key, "data": png})
            assert r.status_code == 400, key
        r = c.post("/api/covers/upload", json={"key": "big", "data": "A" * (1024 * 1024 + 10)})
        assert r.status_code == 413
        zip_b64 = base64.b64encode(stores.zip_named_png()).decode()
        assert c.post("/api/covers/upload", json={"key": "z", "data": zip_b64}).status_code == 400
        r = c.post("/api/covers/upload", json={"key": "u", "url": "http://example.com/a.jpg"})
        assert r.status_code == 400
        assert c.get("/api/browse", params={"path": "/no/such"}).status_code == 400
    with lib_host.mgmt() as m:
        for bad in ("steam:..%2F..%2Fetc", "steam:570%00", "..%2F..", "custom:..", "steam:-1"):
            assert m.get(f"/api/v1/library/art/{bad}/portrait").status_code == 404, bad
        assert m.get("/api/v1/library/art/steam:570/..%2F..%2Fx").status_code == 404
        assert m.get("/api/v1/library/custom/..%2F..%2Fetc%2Fpasswd").status_code == 404
        r = m.post("/api/v1/library/custom", json={"title": "t" * 100_000})
        assert r.status_code in (400, 413)
    assert _snapshot(lib_host.sandbox, lib_host.state_dir) == before
    assert not os.path.exists("/tmp/escape.png") and not os.path.exists("/escape.png")


def _snapshot(root, state):
    out = set()
    for dirpath, _dirs, files in os.walk(root):
        if dirpath == str(state) or dirpath.startswith(str(state) + os.sep):
            continue
        for name in files:
            if not name.endswith(".out"):
                out.add(os.path.join(dirpath, name))
    return out
