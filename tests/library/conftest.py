"""Fixtures of the library tests: fixture stores, a private state dir, eager Celery, events."""

from __future__ import annotations

import base64
import types

import pytest

from hooks import events as hook_events
from tests.library import stores

TOKEN = "ab" * 32


@pytest.fixture
def state(tmp_path, monkeypatch):
    """A fresh state dir per test (files only; the database is pytest-django's)."""
    path = tmp_path / "state"
    path.mkdir()
    monkeypatch.setenv("HOST_STATE_DIR", str(path))
    return path


@pytest.fixture
def fixture_stores(tmp_path, monkeypatch):
    base = tmp_path / "stores"
    base.mkdir()
    steam_root, second = stores.make_steam(
        base,
        {570: "Dota 2", 1091500: "Cyberpunk 2077", 1493710: "Proton Experimental"},
        {292030: "The Witcher 3: Wild Hunt", 413150: "stardew Valley"},
    )
    stores.make_heroic(base, {"Fortnite": "Fortnite", "Sugar": "Alan Wake"})
    stores.make_lutris(base, [(1, "Diablo II", 1), (2, "Uninstalled Thing", 0)])
    for key, value in stores.store_env(base).items():
        monkeypatch.setenv(key, value)
    return types.SimpleNamespace(base=base, steam=steam_root, second=second)


@pytest.fixture
def no_stores(tmp_path, monkeypatch):
    for key in ("HOST_STEAM_ROOTS", "HOST_HEROIC_ROOTS", "HOST_LUTRIS_DB"):
        monkeypatch.setenv(key, str(tmp_path / "nothing-here"))


@pytest.fixture
def eager_celery():
    from hostmgmt.celery import app

    old = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = old


@pytest.fixture
def events(monkeypatch, django_capture_on_commit_callbacks):
    """Every emitted event, through a stand-in `hooks.events.emit` that records instead of
    sending."""
    seen: list[tuple[str, dict]] = []
    monkeypatch.setattr(hook_events, "emit", lambda kind, payload: seen.append((kind, payload)))

    class Recorder(list):
        def during(self):
            return django_capture_on_commit_callbacks(execute=True)

    rec = Recorder()
    rec.seen = seen
    return rec


@pytest.fixture
def cdn():
    server = stores.CDN()
    yield server
    server.close()


@pytest.fixture
def mgmt(monkeypatch):
    from rest_framework.test import APIClient

    monkeypatch.setenv("HOST_MGMT_TOKEN", TOKEN)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    return client


@pytest.fixture
def admin(db, redis_db):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    get_user_model().objects.create_superuser("admin", password="pw")
    client = APIClient()
    creds = base64.b64encode(b"admin:pw").decode()
    client.credentials(HTTP_AUTHORIZATION=f"Basic {creds}")
    return client
