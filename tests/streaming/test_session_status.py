"""Several live sessions as the APIs see them, over real registry records in the tests' Redis:
GET /api/v1/status lists every session (`sessions[]`, one games row each, `active_sessions`
across planes) and keeps the reference's one-session `session`/`stream`; DELETE
/api/v1/session?id= and POST /api/apps/close {"id"} end that session only (400 malformed, 404
unknown), and without an id end them all. A session's end is its own process's work: here a
thread stands in for it, popping its control list and removing its record, as the session
process does."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from django.test import Client

from streaming import status
from streaming.api import session_views
from streaming.sessions import registry

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("restore_config")]


def rec(sid: str, plane: str, state: str, client: str, app: str, t: float, **extra) -> dict:
    fp = (sid * 8)[:64]
    return {"id": sid, "plane": plane, "pid": os.getpid(), "state": state, "client": client,
            "client_id": fp[:12], "fingerprint": fp, "mode": "1280x720@60", "width": 1280,
            "height": 720, "fps": 60, "app": app, "app_title": app.title(), "t_start": t,
            **extra}  # fmt: skip


@pytest.fixture
def three(redis_db, monkeypatch):
    monkeypatch.setattr(status, "_lifecycle_games", lambda: [])
    t = time.time()
    registry.put(rec("aaaa0001", "compat", "streaming", "TV", "red", t - 30,
                     bitrate_kbps=10000, codec="h264"))  # fmt: skip
    registry.put(rec("aaaa0002", "compat", "idle", "Laptop", "blue", t - 20))
    registry.put(rec("bbbb0001", "native", "streaming", "Browser", "desktop", t - 10))
    return redis_db


class SessionStandIn:
    """What a session process does on a stop request: end itself (its record goes)."""

    def __init__(self, ids):
        self.ids, self.stopped, self.done = set(ids), [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.is_set():
            for sid in list(self.ids):
                for msg in registry.pop(sid):
                    if msg.get("op") == "stop":
                        self.stopped.append((sid, msg["reason"]))
                        registry.remove(sid)
                        self.ids.discard(sid)
            time.sleep(0.02)

    def close(self):
        self.done.set()
        self.thread.join(2)


@pytest.fixture
def stand_in(three):
    s = SessionStandIn(["aaaa0001", "aaaa0002", "bbbb0001"])
    yield s
    s.close()


def test_status_lists_every_session_of_both_planes(three, mgmt):
    body = Client().get("/api/v1/status", **mgmt).json()
    rows = body["sessions"]
    assert [r["id"] for r in rows] == ["aaaa0001", "aaaa0002", "bbbb0001"]  # oldest first
    assert [(r["plane"], r["client"], r["app_title"], r["state"]) for r in rows] == [
        ("compat", "TV", "Red", "streaming"),
        ("compat", "Laptop", "Blue", "idle"),
        ("native", "Browser", "Desktop", "streaming"),
    ]
    assert rows[0]["stream"]["bitrate_kbps"] == 10000 and rows[1]["stream"] is None
    assert rows[0]["mode"] == "1280x720@60" and rows[0]["t_start"] < rows[2]["t_start"]
    assert body["active_sessions"] == 2  # the idle compat session streams nothing
    assert body["video_streaming"] is True
    # The reference's one-session fields: the streaming compat session represents them.
    assert body["session"] == {"width": 1280, "height": 720, "fps": 60}
    assert body["stream"]["bitrate_kbps"] == 10000
    games = [(g["session_id"], g["client"], g["title"], g["state"]) for g in body["games"]]
    assert games == [("aaaa0001", "TV", "Red", "running"),
                     ("aaaa0002", "Laptop", "Blue", "running"),
                     ("bbbb0001", "Browser", "Desktop", "running")]  # fmt: skip


def test_status_without_sessions(redis_db, mgmt, monkeypatch):
    monkeypatch.setattr(status, "_lifecycle_games", lambda: [])
    body = Client().get("/api/v1/status", **mgmt).json()
    assert body["sessions"] == [] and body["games"] == [] and body["active_sessions"] == 0
    assert body["session"] is None and body["stream"] is None


def test_delete_by_id_ends_that_session_only(stand_in, mgmt):
    r = Client().delete("/api/v1/session?id=aaaa0002", **mgmt)
    assert r.status_code == 204
    assert stand_in.stopped == [("aaaa0002", "api")]
    left = [s["id"] for s in Client().get("/api/v1/status", **mgmt).json()["sessions"]]
    assert left == ["aaaa0001", "bbbb0001"]


@pytest.mark.parametrize("bad", ["AAAA0001", "aaaa000", "aaaa00011", "x" * 5000, "aaaa0001%00",
                                 "../../etc", "%20aaaa0001"])  # fmt: skip
def test_delete_with_a_malformed_id_is_400_and_ends_nothing(stand_in, mgmt, bad):
    r = Client().delete(f"/api/v1/session?id={bad}", **mgmt)
    assert r.status_code == 400 and "session id" in r.json()["error"]
    assert stand_in.stopped == [] and len(registry.live()) == 3


def test_delete_with_an_unknown_id_is_404(stand_in, mgmt):
    r = Client().delete("/api/v1/session?id=cccc0001", **mgmt)
    assert r.status_code == 404 and r.json()["error"] == session_views.UNKNOWN
    assert stand_in.stopped == []


def test_delete_without_id_ends_all(stand_in, mgmt):
    assert Client().delete("/api/v1/session", **mgmt).status_code == 204
    assert sorted(stand_in.stopped) == [("aaaa0001", "api"), ("aaaa0002", "api"),
                                        ("bbbb0001", "api")]  # fmt: skip
    assert registry.live() == []


def close(admin, body=None):
    if body is None:
        return Client().post("/api/apps/close", **admin)
    return Client().post("/api/apps/close", json.dumps(body), content_type="application/json",
                         **admin)  # fmt: skip


def test_apps_close_by_id_and_all(stand_in, admin):
    r = close(admin, {"id": "bbbb0001"})
    assert r.status_code == 200 and r.json() == {"status": True}
    assert stand_in.stopped == [("bbbb0001", "app_closed")]
    assert close(admin, {"id": "bbbb0001"}).status_code == 404  # gone now
    assert close(admin, {}).status_code == 200  # no id: all
    assert sorted(stand_in.stopped)[:2] == [("aaaa0001", "app_closed"),
                                            ("aaaa0002", "app_closed")]  # fmt: skip
    assert registry.live() == []


@pytest.mark.parametrize("body", [{"id": 12345678}, {"id": "nothex!!"}, {"id": ""}, ["aaaa0001"],
                                  {"id": None, "x": 1} | {"id": ["aaaa0001"]}])  # fmt: skip
def test_apps_close_malformed_is_400(stand_in, admin, body):
    r = close(admin, body)
    assert r.status_code == 400, r.content
    assert stand_in.stopped == [] and len(registry.live()) == 3


def test_apps_close_with_a_form_body_ends_nothing(stand_in, admin):
    form = "application/x-www-form-urlencoded"
    r = Client().post("/api/apps/close", "id=aaaa0001", content_type=form,
                      **admin)  # fmt: skip
    assert r.status_code in (400, 415), r.content  # never read as "no body: end all"
    assert stand_in.stopped == [] and len(registry.live()) == 3
