"""POST /api/v1/update/apply: full admin only, refused while a session is live unless forced,
and refused with what is not built otherwise; `update.applied` once per finished apply."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from access import tokens
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
def test_apply_is_refused_with_what_is_not_built(no_sessions, mgmt):
    r = _post(**mgmt)
    assert r.status_code == 409
    assert "switching to the staged tree" in r.json()["error"]
    assert _post({"force": True}, **mgmt).json()["error"] == update_apply.NOT_BUILT_REASON
    assert updater.status()["apply"] == "notify"


@pytest.mark.django_db
def test_a_live_session_refuses_apply_unless_forced(no_sessions, mgmt):
    no_sessions.append({"id": "s1"})
    r = _post(**mgmt)
    assert r.status_code == 409 and "1 session(s) live" in r.json()["error"]
    forced = _post({"force": True}, **mgmt)
    assert forced.status_code == 409 and forced.json()["error"] == update_apply.NOT_BUILT_REASON


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
