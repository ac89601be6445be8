"""`update_auto`: the config key's rule through the admin API, and the supervisor's
`update-auto` periodic job with real files, a real database and real Redis: it starts the apply
only when the key is on, a newer release with an archive is announced, no session is live and
none ran within the last N minutes; never beside a job; never again for a version it tried."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from common import supervisorctl
from common.statedir import state_path
from console import update_apply, update_auto, updater
from hostconfig import store
from streaming import history
from streaming.sessions import registry
from supervisor import periodic

pytestmark = pytest.mark.django_db

VERSION = "v2099.101.0-stable"


@pytest.mark.parametrize(
    ("value", "status"),
    [(0, 200), (5, 200), (1440, 200), (4, 400), (1441, 400), (-1, 400), ("ten", 400), (2.5, 400),
     (True, 400)],
)  # fmt: skip
def test_the_config_api_takes_0_or_5_to_1440_minutes(admin, value, status):
    r = Client().post(
        "/api/config", json.dumps({"update_auto": value}), content_type="application/json", **admin
    )
    assert r.status_code == status, r.content
    if status == 400:
        body = r.json()
        assert body["status"] is False and body["status_code"] == 400
        assert "update_auto" in body["error"]
        assert "0 (off) or 5 to 1440" in body["error"] or "integer" in body["error"]
        assert "update_auto" not in store.read_raw()
    else:
        assert store.get("update_auto") == value


@pytest.fixture
def rig(tmp_path, redis_db, monkeypatch):
    """A checkout to apply to, an announced release whose archive cannot be fetched (the job
    fails at download: real, and fast), the update state and journal put back afterwards."""
    root = tmp_path / "host"
    root.mkdir()
    (root / "requirements.txt").write_text("Django==5.2.19\n")
    (root / ".venv").mkdir()
    source = {"commit": "a" * 40, "url": "http://127.0.0.1:9/host.tar.gz", "sha256": "b" * 64,
              "size": 10}  # fmt: skip
    manifest = {"version": VERSION, "serial": 3, "artifacts": {"source": source}}
    state_file = state_path(updater.STATE_FILE)
    saved = state_file.read_bytes() if state_file.exists() else None
    journal = update_apply.updates_dir() / update_apply.JOURNAL_FILE
    journal.unlink(missing_ok=True)
    updater._save_state({"manifest": manifest})
    monkeypatch.setenv("HOST_SUPERVISOR_PID", str(os.getpid()))
    restarts = []
    monkeypatch.setattr(supervisorctl, "request_restart", lambda: restarts.append(1))
    redis_db.delete(registry.LIVE)
    yield root, manifest, restarts
    redis_db.delete(registry.LIVE)
    journal.unlink(missing_ok=True)
    if saved is None:
        state_file.unlink(missing_ok=True)
    else:
        state_file.write_bytes(saved)


def _settled(timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        journal = update_apply.load_journal() or {}
        if journal.get("state") not in (None, *update_auto.IN_PROGRESS):
            return journal
        time.sleep(0.05)
    raise AssertionError(f"the job did not settle: {update_apply.load_journal()}")


def test_the_job_applies_only_when_idle_long_enough_and_never_twice_a_version(rig):
    root, manifest, restarts = rig
    now = [time.time()]
    job = next(j for j in periodic.jobs() if j.name == "update-auto")
    assert isinstance(job.run, update_auto.AutoApply)
    tick = update_auto.AutoApply(root=root, clock=lambda: now[0])

    # Off (the default): nothing, whatever else holds.
    assert tick() == "off"
    assert update_apply.load_journal() is None
    store.update({"update_auto": 5})

    # A live session: never.
    registry.put({"id": "aaaa0001", "plane": "compat", "pid": os.getpid(), "t_start": now[0]})
    assert tick() == "1 session(s) live"
    registry.remove("aaaa0001")
    # It just went (no history row: it never streamed): the job remembers seeing it.
    now[0] += 4 * 60
    assert tick().startswith("a session ran 4 min ago")
    # A session in the history that ended 3 minutes ago: not yet.
    now[0] += 2 * 60
    history.record_session(
        t_start=datetime.fromtimestamp(now[0], UTC) - timedelta(minutes=30),
        t_end=datetime.fromtimestamp(now[0], UTC) - timedelta(minutes=3, seconds=30),
        app_name="Game",
    )
    assert tick().startswith("a session ran 3 min ago")
    assert update_apply.load_journal() is None

    # A report-only release: nothing to apply.
    now[0] += 10 * 60
    updater._save_state({"manifest": {"version": VERSION, "serial": 3}})
    assert "names no archive" in tick()
    updater._save_state({"manifest": manifest})

    # Idle for 5 minutes and more: the apply starts, marked automatic.
    assert tick() == f"started {VERSION}"
    journal = _settled()
    assert journal["by"] == "auto" and journal["to"] == VERSION
    assert journal["log"][0]["step"] == "start" and "(by auto)" in journal["log"][0]["detail"]
    assert journal["state"] == "failed" and "download" in journal["error"]
    assert restarts == []
    assert updater.status()["job"]["by"] == "auto"
    assert updater.status()["apply"] == "auto" and updater.status()["auto_idle_minutes"] == 5

    # The failed version is not tried again, however long the host stays idle.
    now[0] += 24 * 3600
    assert "was tried already (failed)" in tick()
    assert update_apply.load_journal()["id"] == journal["id"]

    # Unless the job failed only because sessions kept the switch waiting: that one is retried.
    failed = update_apply.load_journal()
    update_apply._save({**failed, "retry": True})
    assert tick() == f"started {VERSION}"
    _settled()

    # A newer release is: the rule is per version.
    newer = {**manifest, "version": "v2099.102.0-stable", "serial": 4}
    updater._save_state({"manifest": newer})
    assert tick() == "started v2099.102.0-stable"
    assert _settled()["to"] == "v2099.102.0-stable"

    # Back to 0: off again.
    store.update({"update_auto": 0})
    updater._save_state({"manifest": {**newer, "version": "v2099.103.0-stable", "serial": 5}})
    assert tick() == "off" and updater.status()["apply"] == "manual"


def test_never_beside_a_job_in_progress_nor_without_session_state(rig, monkeypatch):
    root, manifest, _ = rig
    store.update({"update_auto": 5})
    tick = update_auto.AutoApply(root=root, clock=lambda: time.time() + 3600)
    update_apply._save({"id": "x", "state": "switched", "to": "v2099.100.0-x", "log": []})
    assert "in progress" in tick()
    update_apply._save({"id": "x", "state": "done", "to": "v2099.100.0-x", "log": []})

    def no_redis():
        raise ConnectionError("no redis")

    monkeypatch.setattr(registry, "live", no_redis)
    assert tick() == "session state unavailable (ConnectionError)"
    assert update_apply.load_journal()["id"] == "x"
