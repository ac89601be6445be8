"""POST /api/v1/update/apply: full admin only, refused while a session is live unless forced,
and refused with what is not built otherwise; `update.applied` once per finished apply."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from access import credentials, tokens
from common.version import VERSION
from console import update_apply, updater
from tests.support.events import emitted

APPLY = "/api/v1/update/apply"


def _post(body=None, **headers):
    data = "" if body is None else json.dumps(body)
    return Client().post(APPLY, data=data, content_type="application/json", **headers)


@pytest.fixture
def no_sessions(monkeypatch):
    live: list[dict] = []
    monkeypatch.setattr(update_apply.streaming_services, "live_records", lambda plane=None: live)
    return live


@pytest.mark.django_db
def test_plugin_token_and_no_token_cannot_apply(no_sessions):
    plugin = tokens.ensure_token(tokens.PLUGIN)
    assert _post(HTTP_AUTHORIZATION=f"Bearer {plugin}").status_code == 403
    assert _post().status_code == 401


@pytest.mark.django_db
def test_apply_without_a_newer_announced_release_is_refused(no_sessions, mgmt, monkeypatch):
    monkeypatch.setattr(updater, "load_state", lambda: {})
    r = _post(**mgmt)
    assert r.status_code == 409 and "no newer release" in r.json()["error"]
    report_only = {"version": "v2099.101.0-x", "serial": 3}
    monkeypatch.setattr(updater, "load_state", lambda: {"manifest": report_only})
    r = _post(**mgmt)
    assert r.status_code == 409 and "names no archive" in r.json()["error"]


@pytest.mark.django_db
def test_a_live_session_refuses_apply_unless_forced(no_sessions, mgmt, monkeypatch):
    monkeypatch.setattr(updater, "load_state", lambda: {})
    no_sessions.append({"id": "s1"})
    r = _post(**mgmt)
    assert r.status_code == 409 and "1 session(s) live" in r.json()["error"]
    forced = _post({"force": True}, **mgmt)
    assert forced.status_code == 409 and "no newer release" in forced.json()["error"]


@pytest.mark.django_db
@pytest.mark.parametrize("body", [{"force": "yes"}, [1]])
def test_malformed_body_is_a_400(no_sessions, mgmt, body):
    assert _post(body, **mgmt).status_code == 400


@pytest.fixture
def journal(redis_db):
    path = update_apply.updates_dir() / update_apply.JOURNAL_FILE
    path.unlink(missing_ok=True)
    yield path
    path.unlink(missing_ok=True)


def test_update_applied_is_emitted_once_across_restarts(journal):
    journal.write_text(json.dumps({"state": "done", "from": "v2026.1001.0-x", "to": VERSION}))
    assert update_apply.announce_applied() is True
    assert update_apply.announce_applied() is False  # the next start
    sent = emitted("update.applied")
    assert [(e["from"], e["to"]) for e in sent] == [("v2026.1001.0-x", VERSION)]
    assert json.loads(journal.read_text())["announced"]


@pytest.mark.parametrize(
    "record",
    [
        {"state": "done", "from": "v2026.1001.0-x", "to": "v2099.101.0-x"},  # rolled back since
        {"state": "failed", "from": "v2026.1001.0-x", "to": VERSION},
        {"state": "staged", "from": "v2026.1001.0-x", "to": VERSION},
    ],
)
def test_no_update_applied_without_a_finished_apply_to_this_version(journal, record):
    journal.write_text(json.dumps(record))
    assert update_apply.announce_applied() is False
    assert emitted("update.applied") == []


def test_no_journal_no_event(journal):
    assert update_apply.announce_applied() is False
    assert emitted("update.applied") == []


@pytest.fixture
def browser():
    credentials.set_credentials("admin", "s3cret")
    c = Client()
    assert c.post("/login", {"username": "admin", "password": "s3cret"}).status_code == 302
    return c


@pytest.mark.django_db
def test_dashboard_offers_apply_for_a_release_with_an_archive_and_shows_the_job(
    browser, journal, monkeypatch
):
    source = {"commit": "a" * 40, "url": "https://x/y", "sha256": "b" * 64, "size": 1}
    release = {"version": "v2099.101.0-x", "serial": 3, "published_at": "", "notes_url": ""}
    monkeypatch.setattr(updater, "refused_reason", lambda: None)
    monkeypatch.setattr(updater, "load_state", lambda: {"manifest": release})
    assert 'id="update-apply"' not in browser.get("/").content.decode()  # report-only
    release["artifacts"] = {"source": source}
    journal.write_text(
        json.dumps({"state": "rolled_back", "from": "v1", "to": "v2099.101.0-x",
                    "error": "the new version exited with 9",
                    "log": [{"step": "download", "state": "done", "detail": ""}]})
    )  # fmt: skip
    page = browser.get("/").content.decode()
    assert 'id="update-apply" data-version="v2099.101.0-x"' in page
    assert "rolled_back" in page and "exited with 9" in page and "download done" in page


@pytest.mark.django_db
def test_the_console_session_may_apply_with_its_csrf_token(browser, no_sessions, monkeypatch):
    monkeypatch.setattr(updater, "load_state", lambda: {})
    csrf = Client(enforce_csrf_checks=True)
    csrf.cookies = browser.cookies
    assert csrf.post(APPLY, data="{}", content_type="application/json").status_code == 403
    r = browser.post(APPLY, data="{}", content_type="application/json")
    assert r.status_code == 409 and "no newer release" in r.json()["error"]


@pytest.mark.django_db
def test_apply_starts_one_job_at_a_time(no_sessions, mgmt, journal, monkeypatch):
    source = {"commit": "a" * 40, "url": "https://x/y", "sha256": "b" * 64, "size": 1}
    release = {"version": "v2099.101.0-x", "serial": 3, "artifacts": {"source": source}}
    monkeypatch.setattr(updater, "load_state", lambda: {"manifest": release})
    started = []
    monkeypatch.setattr(update_apply, "run_job", lambda *args: started.append(args))
    monkeypatch.delenv("HOST_SUPERVISOR_PID", raising=False)
    r = _post(**mgmt)
    assert r.status_code == 409 and "not running under the supervisor" in r.json()["error"]
    monkeypatch.setenv("HOST_SUPERVISOR_PID", "1")
    r = _post(**mgmt)
    assert r.status_code == 202, r.content
    assert r.json()["to"] == "v2099.101.0-x" and r.json()["state"] == "running"
    assert update_apply.load_journal()["id"] == r.json()["id"]
    again = _post({"force": True}, **mgmt)
    assert again.status_code == 409 and "already in progress" in again.json()["error"]
    for _ in range(50):  # the job's thread
        if started:
            break
        time.sleep(0.02)
    assert len(started) == 1 and started[0][0] == release


@pytest.mark.django_db
def test_dashboard_says_whether_releases_apply_themselves(browser, journal):
    from hostconfig import store

    page = browser.get("/").content.decode()
    assert 'id="update-auto">off: apply by hand' in page
    store.update({"update_auto": 30})
    journal.write_text(json.dumps({"state": "failed", "from": "v1", "to": "v2", "by": "auto"}))
    page = browser.get("/").content.decode()
    assert "applies automatically after 30 idle minutes" in page
    assert "(started automatically)" in page
