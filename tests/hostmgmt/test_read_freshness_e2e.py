"""The read routes' caches never answer with data older than a write.

`/host`, `/status`, `/library`, `/clients`, `/display/state` and `/gpus` keep what they derive
from the database (common/dbversion.py) and from files (common/filecache.py) instead of
recomputing it per request. Each test writes, then reads at once on the real host (daphne over
TLS, the bearer fast path, 16 request threads with a cache each), over several rounds so the
reads land on different threads: through the API (the same client's write), from another
process (the compat plane or Celery writing the database), and by hand-editing a file in place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 4

# Another process of the host writing the database and the games file, as the compat plane,
# Celery or the supervisor would: one JSON command per line, "ok" when it has committed.
WRITER = r"""
import json, sys
import django
django.setup()
from django.utils import timezone
from displays.models import VirtualDisplay
from games import registry
from pairing.models import PairedClient
from pairing import crypto
from tests.support import certs
for line in sys.stdin:
    cmd, arg = json.loads(line)
    if cmd == "add_client":
        _key, cert = certs.identity(arg)
        PairedClient.objects.create(
            fingerprint=crypto.fingerprint(cert), cert_pem=certs.pem(cert).decode(),
            name=f"fresh-{arg}", plane="compat")
        print(crypto.fingerprint(cert), flush=True)
        continue
    if cmd == "add_display":
        VirtualDisplay.objects.create(slot=arg, width=640, height=360, refresh=30,
                                      state="pinned", identity_key=f"fresh-{arg}")
    elif cmd == "del_display":
        VirtualDisplay.objects.filter(slot=arg).delete()
    elif cmd == "put_game":
        registry.put(arg, {"title": arg, "client": "fresh", "plane": "compat",
                           "state": "running", "started_at": 1})
    elif cmd == "del_game":
        registry.update(lambda records: records.pop(arg, None))
    print("ok", flush=True)
"""


class Writer:
    def __init__(self, host):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
        env.pop("REDIS_URL", None)
        env.update(
            HOST_STATE_DIR=str(host.state_dir),
            HOST_PORT=str(host.base_port),
            DJANGO_SETTINGS_MODULE="hostmgmt.settings",
            HOST_LOG_LEVEL="WARNING",
            PYTHONPATH=str(ROOT),
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def __call__(self, cmd: str, arg) -> str:
        self.proc.stdin.write(json.dumps([cmd, arg]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        assert line, "writer process died"
        return line

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def writer(live_host):
    w = Writer(live_host)
    yield w
    w.close()


@pytest.fixture(scope="module")
def v1(live_host):
    with live_host.mgmt() as client:
        yield client


def test_library_shows_each_api_write_on_the_next_read(v1):
    for n in range(ROUNDS):
        r = v1.post("/api/v1/library/custom", json={"title": f"Fresh {n}"})
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        try:
            titles = {e["title"] for e in v1.get("/api/v1/library").json()}
            assert f"Fresh {n}" in titles
            r = v1.put(f"/api/v1/library/custom/{cid}", json={"title": f"Renamed {n}"})
            assert r.status_code == 200, r.text
            titles = {e["title"] for e in v1.get("/api/v1/library").json()}
            assert f"Renamed {n}" in titles and f"Fresh {n}" not in titles
        finally:
            assert v1.delete(f"/api/v1/library/custom/{cid}").status_code in (200, 204)
        titles = {e["title"] for e in v1.get("/api/v1/library").json()}
        assert f"Renamed {n}" not in titles


def test_clients_and_status_follow_another_process_and_the_api(v1, writer):
    base = v1.get("/api/v1/status").json()["paired_clients"]
    for n in range(ROUNDS):
        fp = writer("add_client", 900 + n)  # committed by another process (the compat plane)
        listed = {c["fingerprint"]: c for c in v1.get("/api/v1/clients").json()}
        assert listed[fp]["name"] == f"fresh-{900 + n}"
        assert v1.get("/api/v1/status").json()["paired_clients"] == base + 1
        assert v1.delete(f"/api/v1/clients/{fp}").status_code == 204  # this client's write
        assert fp not in {c["fingerprint"] for c in v1.get("/api/v1/clients").json()}
        assert v1.get("/api/v1/status").json()["paired_clients"] == base


def test_display_state_and_kept_displays_follow_the_database(v1, writer):
    base = v1.get("/api/v1/status").json()["kept_displays"]
    for n in range(ROUNDS):
        slot = 40 + n
        writer("add_display", slot)
        try:
            slots = {d["slot"]: d for d in v1.get("/api/v1/display/state").json()["displays"]}
            assert slots[slot]["state"] == "pinned"
            assert v1.get("/api/v1/status").json()["kept_displays"] == base + 1
        finally:
            writer("del_display", slot)
        slots = {d["slot"] for d in v1.get("/api/v1/display/state").json()["displays"]}
        assert slot not in slots
        assert v1.get("/api/v1/status").json()["kept_displays"] == base


def test_status_games_follow_the_games_file(v1, writer):
    for n in range(ROUNDS):
        title = f"fresh-game-{n}"
        writer("put_game", title)
        try:
            titles = {g.get("title") for g in v1.get("/api/v1/status").json()["games"]}
            assert title in titles
        finally:
            writer("del_game", title)
        titles = {g.get("title") for g in v1.get("/api/v1/status").json()["games"]}
        assert title not in titles


def test_gpus_follow_the_preference_file_edited_in_place(live_host, v1):
    path = live_host.state_dir / "gpu-preference.json"
    before = path.read_bytes() if path.exists() else None
    try:
        for n in range(ROUNDS):
            # Written in place (same inode, as an editor may), not by rename.
            with open(path, "w") as f:
                json.dump({"mode": "manual", "preferred_id": f"10de-000{n}-0"}, f)
            state = v1.get("/api/v1/gpus").json()
            assert (state["mode"], state["preferred_id"]) == ("manual", f"10de-000{n}-0")
            with open(path, "w") as f:
                json.dump({"mode": "auto", "preferred_id": None, "pad": "x" * n}, f)
            assert v1.get("/api/v1/gpus").json()["mode"] == "auto"
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)


def test_host_name_follows_the_admin_api_and_a_hand_edit(live_host, v1, admin_auth):
    conf = live_host.state_dir / "host.conf"
    env = live_host.state_dir / "host.env"
    saved = {p: p.read_bytes() if p.exists() else None for p in (conf, env)}
    try:
        with live_host.client(auth=admin_auth) as admin:
            for n in range(ROUNDS):
                r = admin.post("/api/config", json={"sunshine_name": f"fresh-host-{n}"})
                assert r.status_code == 200 and r.json()["status"] is True, r.text
                assert v1.get("/api/v1/host").json()["hostname"] == f"fresh-host-{n}"
        conf.write_text(conf.read_text() + "\nsunshine_name = hand-edited\n")
        assert v1.get("/api/v1/host").json()["hostname"] == "hand-edited"
    finally:
        for p, data in saved.items():
            if data is None:
                p.unlink(missing_ok=True)
            else:
                p.write_bytes(data)
